DELETE FROM actor_timers WHERE kind = 'card' AND payload LIKE 'expire_hold:%';

CREATE TABLE card_transactions_prev (
    id TEXT PRIMARY KEY NOT NULL,
    card_id TEXT NOT NULL REFERENCES cards (id),
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    provider_event_id TEXT NOT NULL,
    authorization_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('authorization', 'clear', 'refund')),
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

-- The old schema reads an open authorization's hold from its amount; an
-- ended hold reads as voided.
INSERT INTO card_transactions_prev
SELECT id, card_id, merchant_id, provider_event_id, authorization_id, kind,
       CASE WHEN status IN ('reversed', 'expired') THEN 'voided' ELSE status END,
       CASE WHEN kind = 'authorization' AND status = 'approved' THEN hold_minor ELSE amount_minor END,
       currency, merchant_name, mcc, channel, country, decline_reason,
       ledger_transaction_id, created_at, updated_at
FROM card_transactions
WHERE kind IN ('authorization', 'clear', 'refund');

DROP TABLE card_transactions;
ALTER TABLE card_transactions_prev RENAME TO card_transactions;

CREATE UNIQUE INDEX card_transactions_event ON card_transactions (provider_event_id);
CREATE INDEX card_transactions_by_card ON card_transactions (card_id, created_at);
CREATE INDEX card_transactions_by_authorization ON card_transactions (card_id, authorization_id);
