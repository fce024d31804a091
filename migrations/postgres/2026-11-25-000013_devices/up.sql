-- Devices and push notifications (decisions §11): the push tokens of a
-- merchant's users, and each dispatch with the outcome per device.
CREATE TABLE devices (
    id TEXT PRIMARY KEY NOT NULL,
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    user_id TEXT NOT NULL REFERENCES users (id),
    platform TEXT NOT NULL CHECK (platform IN ('ios', 'android')),
    token TEXT NOT NULL,
    -- Hex SHA-256 of the token: tokens may be up to 4,096 characters, more
    -- than a PostgreSQL btree entry holds, so uniqueness is on the digest.
    token_sha256 TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'revoked')),
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    revoked_at TIMESTAMP
);

-- One active device per user and token: registering the token again finds
-- it. Revoked devices keep their token and do not count.
CREATE UNIQUE INDEX devices_active_token ON devices (user_id, token_sha256)
    WHERE status = 'active';
CREATE INDEX devices_by_merchant ON devices (merchant_id, status, created_at);
CREATE INDEX devices_by_user ON devices (user_id, status, created_at);

-- A dispatch as received: title, body and data are kept until every
-- delivery has an outcome, so a restart can resume the pending ones.
CREATE TABLE push_dispatches (
    id TEXT PRIMARY KEY NOT NULL,
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    user_id TEXT NOT NULL REFERENCES users (id),
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    -- A JSON object as text, or NULL.
    data TEXT,
    request_id TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL
);

CREATE INDEX push_dispatches_by_user ON push_dispatches (user_id, created_at);

-- One row per targeted device. The gateway's idempotency key is
-- push_{dispatch_id}_{device_id}, so resending a pending row is safe.
CREATE TABLE push_deliveries (
    dispatch_id TEXT NOT NULL REFERENCES push_dispatches (id),
    device_id TEXT NOT NULL REFERENCES devices (id),
    status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts INTEGER NOT NULL,
    last_error TEXT,
    provider_message_id TEXT,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    delivered_at TIMESTAMP,
    PRIMARY KEY (dispatch_id, device_id)
);

CREATE INDEX push_deliveries_pending ON push_deliveries (created_at)
    WHERE status = 'pending';
