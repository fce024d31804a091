-- Merchants and their machine-to-machine API keys.
-- Ids are UUID text; timestamps are UTC; scopes are space-separated names.
CREATE TABLE merchants (
    id TEXT PRIMARY KEY NOT NULL,
    organization_name TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'suspended', 'disabled')),
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);

CREATE TABLE api_keys (
    id TEXT PRIMARY KEY NOT NULL,
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    prefix TEXT NOT NULL UNIQUE,
    secret_sha256 TEXT NOT NULL,
    name TEXT,
    scopes TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    last_used_at TIMESTAMP,
    expires_at TIMESTAMP,
    revoked_at TIMESTAMP
);

CREATE INDEX api_keys_by_merchant ON api_keys (merchant_id, created_at);
