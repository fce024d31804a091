-- Transfers (decisions §7): a saga over two child settlements of the
-- merchant, leg 1 a card_charge of the send amount, leg 2 an on_chain payout
-- of the receive amount. The transfer's actor owns this row; every update
-- after creation is a compare-and-swap on `version`. The quote's price is
-- copied so that the transfer stands on its own after the quote expires.
CREATE TABLE transfers (
    id TEXT PRIMARY KEY,
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    idempotency_key TEXT NOT NULL,
    flow TEXT NOT NULL CHECK (flow IN ('tern')),
    -- A quote binds at most one transfer.
    quote_id TEXT NOT NULL UNIQUE REFERENCES quotes (id),
    card_pm TEXT NOT NULL,
    wallet TEXT NOT NULL,
    send_currency TEXT NOT NULL,
    send_amount_minor BIGINT NOT NULL CHECK (send_amount_minor > 0),
    receive_asset TEXT NOT NULL CHECK (receive_asset IN ('USDT', 'USDC')),
    receive_network TEXT NOT NULL CHECK (receive_network IN ('tron', 'ethereum', 'polygon', 'bsc')),
    receive_amount_minor BIGINT NOT NULL CHECK (receive_amount_minor > 0),
    rate TEXT NOT NULL,
    platform_fee_minor BIGINT NOT NULL CHECK (platform_fee_minor >= 0),
    network_fee_minor BIGINT NOT NULL CHECK (network_fee_minor >= 0),
    status TEXT NOT NULL CHECK (status IN ('pending', 'leg1_in_flight', 'leg1_succeeded', 'leg2_in_flight', 'succeeded', 'compensating', 'failed')),
    leg1_key TEXT NOT NULL,
    leg1_status TEXT NOT NULL CHECK (leg1_status IN ('not_started', 'in_flight', 'succeeded', 'failed', 'reversing', 'reversed', 'reverse_failed')),
    leg1_client_secret TEXT,
    leg1_next_action_type TEXT,
    leg2_key TEXT NOT NULL,
    leg2_status TEXT NOT NULL CHECK (leg2_status IN ('not_started', 'in_flight', 'succeeded', 'failed', 'reversing', 'reversed', 'reverse_failed')),
    failure_reason TEXT,
    -- The entry that turned the collected fiat into the asset paid out.
    conversion_transaction_id TEXT,
    -- Refund attempts made by the compensation (leg 1's reversal).
    compensation_attempt INTEGER NOT NULL CHECK (compensation_attempt >= 0),
    next_attempt_at TIMESTAMP,
    -- An operator alert (a refund that could not be made) until acknowledged.
    alert TEXT,
    alert_acknowledged_at TIMESTAMP,
    request_id TEXT NOT NULL,
    version BIGINT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    UNIQUE (merchant_id, idempotency_key)
);

-- Listings, newest first, with and without a status filter. Partial on a
-- predicate only listings state, so that key lookups never pick them (see
-- migration 000009).
CREATE INDEX transfers_by_merchant ON transfers (merchant_id, created_at, id)
    WHERE created_at IS NOT NULL;
CREATE INDEX transfers_by_merchant_status ON transfers (merchant_id, status, created_at, id)
    WHERE created_at IS NOT NULL;
-- Recovery at start: every transfer with work left.
CREATE INDEX transfers_in_flight ON transfers (id)
    WHERE status NOT IN ('succeeded', 'failed');
-- Open operator alerts, for /health.
CREATE INDEX transfers_alerting ON transfers (id)
    WHERE alert IS NOT NULL AND alert_acknowledged_at IS NULL;

-- A settlement that is a transfer's leg names its transfer, which hears of
-- its moves. A transfer's card_charge leg is on-session (the payer is
-- there to finish a 3DS challenge); every other charge is off-session.
ALTER TABLE settlements ADD COLUMN transfer_id TEXT;
