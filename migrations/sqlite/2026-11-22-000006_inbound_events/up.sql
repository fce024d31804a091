-- Webhooks received from providers, stored only after their signature
-- verified, once per provider event id (providers redeliver).
CREATE TABLE inbound_events (
    provider TEXT NOT NULL,
    event_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    payload TEXT NOT NULL,
    request_id TEXT NOT NULL,
    received_at TIMESTAMP NOT NULL,
    processed_at TIMESTAMP,
    PRIMARY KEY (provider, event_id)
);
