-- The double-entry ledger. Amounts are int64 minor units of the account's
-- one currency. A journal entry (ledger_transactions) is pending, then
-- posted or voided exactly once; its lines (ledger_entries) are never edited.
-- Balances keep pending and posted debits and credits, updated in the same
-- database transaction as the entry.
CREATE TABLE ledger_accounts (
    id TEXT PRIMARY KEY NOT NULL,
    -- NULL for the system's own counterparty accounts.
    merchant_id TEXT REFERENCES merchants (id),
    kind TEXT NOT NULL,
    currency TEXT NOT NULL,
    posted_debits_minor BIGINT NOT NULL DEFAULT 0 CHECK (posted_debits_minor >= 0),
    posted_credits_minor BIGINT NOT NULL DEFAULT 0 CHECK (posted_credits_minor >= 0),
    pending_debits_minor BIGINT NOT NULL DEFAULT 0 CHECK (pending_debits_minor >= 0),
    pending_credits_minor BIGINT NOT NULL DEFAULT 0 CHECK (pending_credits_minor >= 0),
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);

CREATE UNIQUE INDEX ledger_accounts_per_merchant ON ledger_accounts (merchant_id, kind, currency);

CREATE TABLE ledger_transactions (
    id TEXT PRIMARY KEY NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'posted', 'voided')),
    merchant_id TEXT REFERENCES merchants (id),
    settlement_key TEXT,
    description TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);

CREATE INDEX ledger_transactions_by_settlement ON ledger_transactions (merchant_id, settlement_key);

CREATE TABLE ledger_entries (
    id TEXT PRIMARY KEY NOT NULL,
    transaction_id TEXT NOT NULL REFERENCES ledger_transactions (id),
    account_id TEXT NOT NULL REFERENCES ledger_accounts (id),
    direction TEXT NOT NULL CHECK (direction IN ('debit', 'credit')),
    amount_minor BIGINT NOT NULL CHECK (amount_minor > 0),
    currency TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL
);

CREATE INDEX ledger_entries_by_account ON ledger_entries (account_id, created_at, id);
CREATE INDEX ledger_entries_by_transaction ON ledger_entries (transaction_id);
