-- Quotes (decisions §3): priced once at creation and never changed. The row
-- outlives expires_at, for audit and for the transfer that binds it. Amounts
-- are minor units (send currency, or 6 decimals of the asset); the rate is
-- the exact decimal string it was priced with.
CREATE TABLE quotes (
    id TEXT PRIMARY KEY,
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    send_currency TEXT NOT NULL,
    send_amount_minor BIGINT NOT NULL CHECK (send_amount_minor > 0),
    receive_asset TEXT NOT NULL CHECK (receive_asset IN ('USDT', 'USDC')),
    receive_network TEXT NOT NULL CHECK (receive_network IN ('tron', 'ethereum', 'polygon', 'bsc')),
    rate TEXT NOT NULL,
    platform_fee_minor BIGINT NOT NULL CHECK (platform_fee_minor >= 0),
    network_fee_minor BIGINT NOT NULL CHECK (network_fee_minor >= 0),
    receive_amount_minor BIGINT NOT NULL CHECK (receive_amount_minor > 0),
    request_id TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    expires_at TIMESTAMP NOT NULL,
    CHECK (expires_at > created_at)
);

-- A merchant's quotes, newest first.
CREATE INDEX quotes_by_merchant ON quotes (merchant_id, created_at);
