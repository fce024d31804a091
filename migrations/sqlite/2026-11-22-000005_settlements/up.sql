-- Settlement intents, one row each, keyed by the merchant's Idempotency-Key
-- (the settlement's id in paths). The row, its ledger hold and its
-- idempotency record are written in one transaction before any provider
-- call. `version` guards every later update (compare-and-swap), so a second
-- node can never apply a stale transition.
CREATE TABLE settlements (
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    idempotency_key TEXT NOT NULL,
    method TEXT NOT NULL CHECK (method IN ('card_charge', 'card_push', 'on_chain')),
    currency TEXT NOT NULL,
    amount_minor BIGINT NOT NULL CHECK (amount_minor > 0),
    asset TEXT,
    source TEXT NOT NULL REFERENCES ledger_accounts (id),
    destination TEXT NOT NULL,
    recipient_name TEXT NOT NULL,
    reference TEXT,
    status TEXT NOT NULL CHECK (status IN ('pending', 'in_flight', 'retrying', 'succeeded', 'failed', 'reversed')),
    attempt INTEGER NOT NULL CHECK (attempt >= 0),
    outcome_unknown BOOLEAN NOT NULL,
    reversal TEXT NOT NULL CHECK (reversal IN ('none', 'in_flight', 'pending_at_provider')),
    next_attempt_at TIMESTAMP,
    provider_id TEXT,
    stan TEXT,
    retrieval_reference_number TEXT,
    transaction_identifier TEXT,
    approval_code TEXT,
    action_code TEXT,
    failure_reason TEXT,
    client_secret TEXT,
    next_action_type TEXT,
    funding_transaction_id TEXT,
    ledger_transaction_id TEXT,
    request_id TEXT NOT NULL,
    version BIGINT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    PRIMARY KEY (merchant_id, idempotency_key)
);

-- Listing newest first per merchant.
CREATE INDEX settlements_by_merchant ON settlements (merchant_id, created_at);
-- Recovery at start: every settlement with work left.
CREATE INDEX settlements_by_status ON settlements (status);

-- What an Idempotency-Key has already answered, per merchant and scope
-- (settlements, transfers): the digest of the request that claimed it and
-- the response to replay. Written in the same transaction as the effect.
CREATE TABLE idempotency_records (
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    scope TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    request_sha256 TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('in_progress', 'completed')),
    response_status INTEGER,
    response_body TEXT,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    PRIMARY KEY (merchant_id, scope, idempotency_key)
);
