-- Cards (interface "Cards", decisions §1 and §10). The card's actor is the
-- only writer of its row, its transactions and its wallet tokens. The PAN
-- and CVV live at the issuer only: nothing here can reveal them.
CREATE TABLE cards (
    id TEXT PRIMARY KEY NOT NULL,
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    user_id TEXT NOT NULL REFERENCES users (id),
    program_id TEXT NOT NULL,
    card_type TEXT NOT NULL CHECK (card_type IN ('virtual', 'physical')),
    -- `issuing` is the intent written before the issuer is called; such a
    -- card is not shown until the issuer answers.
    status TEXT NOT NULL CHECK (status IN ('issuing', 'active', 'frozen', 'blocked', 'closed')),
    network TEXT NOT NULL CHECK (network IN ('visa', 'mastercard')),
    currency TEXT NOT NULL,
    cardholder TEXT NOT NULL,
    display_name TEXT,
    card_art TEXT NOT NULL,
    theme TEXT NOT NULL CHECK (theme IN ('dark', 'light')),
    provider_card_id TEXT,
    last_four TEXT,
    expiry_month INTEGER,
    expiry_year INTEGER,
    wallet_status TEXT NOT NULL,
    -- Spend limits in minor units; NULL is no limit.
    per_transaction_minor BIGINT,
    daily_spend_minor BIGINT,
    monthly_spend_minor BIGINT,
    atm_daily_minor BIGINT,
    online_enabled BOOLEAN NOT NULL,
    international_enabled BOOLEAN NOT NULL,
    atm_enabled BOOLEAN NOT NULL,
    -- A replacement's intent names the card it replaces and that card's
    -- status before, so a failed issue can put it back.
    replaces_card_id TEXT,
    replaces_status TEXT,
    replaced_by_card_id TEXT,
    request_id TEXT NOT NULL,
    version BIGINT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    closed_at TIMESTAMP
);

-- One live virtual card per user, under any concurrency: a second intent
-- fails here before any issuer call.
CREATE UNIQUE INDEX cards_one_live_virtual ON cards (user_id)
    WHERE card_type = 'virtual' AND status IN ('issuing', 'active', 'frozen');
CREATE INDEX cards_by_user ON cards (user_id, created_at);
CREATE INDEX cards_by_merchant ON cards (merchant_id, created_at);
CREATE INDEX cards_issuing ON cards (created_at) WHERE status = 'issuing';

-- What the card provider's webhooks did to a card: authorization requests
-- (approved or declined), clearings and refunds. Each row is one provider
-- event (deduplicated by its id) and serves both the card's events and its
-- transactions.
CREATE TABLE card_transactions (
    id TEXT PRIMARY KEY NOT NULL,
    card_id TEXT NOT NULL REFERENCES cards (id),
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    provider_event_id TEXT NOT NULL,
    authorization_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('authorization', 'clear', 'refund')),
    -- authorization: approved (hold open), declined, cleared, voided;
    -- clear and refund: posted.
    status TEXT NOT NULL CHECK (status IN ('approved', 'declined', 'cleared', 'voided', 'posted')),
    amount_minor BIGINT NOT NULL,
    currency TEXT NOT NULL,
    merchant_name TEXT NOT NULL,
    mcc TEXT NOT NULL,
    channel TEXT NOT NULL,
    country TEXT NOT NULL,
    decline_reason TEXT,
    ledger_transaction_id TEXT,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);

CREATE UNIQUE INDEX card_transactions_event ON card_transactions (provider_event_id);
CREATE INDEX card_transactions_by_card ON card_transactions (card_id, created_at);
CREATE INDEX card_transactions_by_authorization ON card_transactions (card_id, authorization_id);

-- Mobile-wallet tokens of a card; the id is also the issuer's idempotency key.
CREATE TABLE card_wallet_tokens (
    id TEXT PRIMARY KEY NOT NULL,
    card_id TEXT NOT NULL REFERENCES cards (id),
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    wallet TEXT NOT NULL CHECK (wallet IN ('apple_pay', 'google_pay')),
    status TEXT NOT NULL CHECK (status IN ('requested', 'provisioning', 'active', 'suspended', 'removed', 'failed')),
    device_id TEXT,
    provider_token_id TEXT,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);

CREATE INDEX card_wallet_tokens_by_card ON card_wallet_tokens (card_id, created_at);
