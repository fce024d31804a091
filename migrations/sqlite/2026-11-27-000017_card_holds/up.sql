-- Holds end (decisions §10): an authorization's hold is released by the
-- network's reversal (all of it, or part) or, when nothing clears it within
-- TERN_CARD_HOLD_TTL, by the card's expiry timer.
--
-- SQLite cannot change a CHECK constraint in place, so the table is rebuilt
-- (nothing references card_transactions). hold_minor is what an
-- authorization still holds: its amount while open, less what partial
-- reversals released; 0 once it ended (cleared, reversed, expired) and for
-- every other kind. The card's hold_minor sums it. New kinds: a reversal the
-- network sent, an expiry Tern made, both `released`; new authorization
-- statuses: reversed, expired.
CREATE TABLE card_transactions_next (
    id TEXT PRIMARY KEY NOT NULL,
    card_id TEXT NOT NULL REFERENCES cards (id),
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    provider_event_id TEXT NOT NULL,
    authorization_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('authorization', 'clear', 'refund', 'reversal', 'expiry')),
    status TEXT NOT NULL CHECK (status IN ('approved', 'declined', 'cleared', 'voided', 'posted',
                                           'reversed', 'expired', 'released')),
    amount_minor BIGINT NOT NULL,
    currency TEXT NOT NULL,
    merchant_name TEXT NOT NULL,
    mcc TEXT NOT NULL,
    channel TEXT NOT NULL,
    country TEXT NOT NULL,
    decline_reason TEXT,
    ledger_transaction_id TEXT,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    hold_minor BIGINT NOT NULL DEFAULT 0 CHECK (hold_minor >= 0)
);

INSERT INTO card_transactions_next
    (id, card_id, merchant_id, provider_event_id, authorization_id, kind, status,
     amount_minor, currency, merchant_name, mcc, channel, country, decline_reason,
     ledger_transaction_id, created_at, updated_at, hold_minor)
SELECT id, card_id, merchant_id, provider_event_id, authorization_id, kind, status,
       amount_minor, currency, merchant_name, mcc, channel, country, decline_reason,
       ledger_transaction_id, created_at, updated_at,
       CASE WHEN kind = 'authorization' AND status = 'approved' THEN amount_minor ELSE 0 END
FROM card_transactions;

DROP TABLE card_transactions;
ALTER TABLE card_transactions_next RENAME TO card_transactions;

CREATE UNIQUE INDEX card_transactions_event ON card_transactions (provider_event_id);
CREATE INDEX card_transactions_by_card ON card_transactions (card_id, created_at);
CREATE INDEX card_transactions_by_authorization ON card_transactions (card_id, authorization_id);

-- Holds open before this migration had no expiry: each gets the default
-- TERN_CARD_HOLD_TTL (7 days) from its approval, the timer the card's actor
-- schedules with every new hold (same id and payload), so it ends like any
-- other. One already past that is due at once and expires at start.
INSERT INTO actor_timers (id, kind, entity_id, due_at, payload, claim_token, claimed_until, attempts, created_at)
SELECT card_id || ':hold:' || id, 'card', card_id,
       strftime('%Y-%m-%d %H:%M:%f', created_at, '+7 days'),
       'expire_hold:' || id, NULL, NULL, 0, strftime('%Y-%m-%d %H:%M:%f', 'now')
FROM card_transactions
WHERE kind = 'authorization' AND status = 'approved';
