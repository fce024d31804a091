-- The tamper-evident audit chain: one hash chain per merchant. Each event's
-- hash covers its fields and the previous event's hash. audit_heads holds
-- each chain's last seq and hash: appending locks only that merchant's head
-- row, so unrelated merchants never wait on each other.
CREATE TABLE audit_heads (
    merchant_id TEXT PRIMARY KEY NOT NULL REFERENCES merchants (id),
    seq BIGINT NOT NULL,
    hash TEXT NOT NULL,
    updated_at TIMESTAMP NOT NULL
);

CREATE TABLE audit_events (
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    seq BIGINT NOT NULL,
    id TEXT NOT NULL UNIQUE,
    occurred_at TIMESTAMP NOT NULL,
    actor_type TEXT NOT NULL,
    actor_id TEXT NOT NULL,
    action TEXT NOT NULL,
    resource_type TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    data TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (merchant_id, seq)
);
