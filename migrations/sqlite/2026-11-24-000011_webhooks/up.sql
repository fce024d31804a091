-- Outbound webhooks (decisions §8). One endpoint per merchant; its actor is
-- the only writer of the merchant's deliveries. The secret is kept as given:
-- signing needs the key itself, unlike API keys, which are kept as digests.
CREATE TABLE webhook_endpoints (
    merchant_id TEXT PRIMARY KEY REFERENCES merchants (id),
    url TEXT NOT NULL CHECK (length(url) <= 2048),
    secret TEXT NOT NULL CHECK (length(secret) >= 24),
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);

-- The transactional outbox: one row per transfer status change, written in
-- the transaction of the change. `payload` is the exact body delivered (and
-- signed) on every attempt. `seq` orders a transfer's events; a status is
-- passed at most once, so (transfer_id, seq) and (transfer_id, event_type) are
-- unique and a repeated write of the same move cannot make a second event.
CREATE TABLE webhook_events (
    id TEXT PRIMARY KEY,
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    transfer_id TEXT NOT NULL REFERENCES transfers (id),
    seq INTEGER NOT NULL CHECK (seq >= 0),
    event_type TEXT NOT NULL,
    payload TEXT NOT NULL,
    request_id TEXT NOT NULL,
    -- pending: to deliver at next_attempt_at; delivered; dead (dead-lettered
    -- after the last retry); skipped (no endpoint to deliver to).
    status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'dead', 'skipped')),
    -- Attempts since the event was last armed (created or replayed).
    attempts INTEGER NOT NULL CHECK (attempts >= 0),
    -- Times the event was armed: 0 at creation, one more per replay.
    round INTEGER NOT NULL CHECK (round >= 0),
    next_attempt_at TIMESTAMP,
    last_attempt_at TIMESTAMP,
    last_status_code INTEGER,
    last_error TEXT,
    delivered_at TIMESTAMP,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    UNIQUE (transfer_id, seq),
    UNIQUE (transfer_id, event_type)
);

-- What an endpoint's actor delivers next, and recovery at start.
CREATE INDEX webhook_events_pending ON webhook_events (merchant_id, next_attempt_at)
    WHERE status = 'pending';
-- The debugging listing, newest first.
CREATE INDEX webhook_events_by_merchant ON webhook_events (merchant_id, created_at, id);

-- Every attempt, for the deliveries listing: kept after the event is done.
CREATE TABLE webhook_attempts (
    event_id TEXT NOT NULL REFERENCES webhook_events (id),
    attempt INTEGER NOT NULL CHECK (attempt >= 1),
    -- Attempts of one event restart at 1 after a replay; `round` tells them apart.
    round INTEGER NOT NULL CHECK (round >= 0),
    attempted_at TIMESTAMP NOT NULL,
    status_code INTEGER,
    error TEXT,
    duration_ms BIGINT NOT NULL CHECK (duration_ms >= 0),
    PRIMARY KEY (event_id, round, attempt)
);
