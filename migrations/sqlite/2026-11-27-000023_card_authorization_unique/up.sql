-- An authorization id names one authorization of a card (decisions §10):
-- the one hold a reversal or a clearing of that id ends. Before this, a
-- second request under the same id was decided and held again, and only one
-- of the holds could ever be reversed or cleared.
--
-- Existing rows: where a card has several authorizations under one id, one
-- keeps the id: an open one (status approved, still holding) before the
-- others, then the earliest. Each other is renamed to
-- `<authorization_id>#duplicate:<its row id>`; nothing else changes, so an
-- open hold among them still ends by its expiry timer (keyed by row id),
-- and an operator can find them by the suffix.
UPDATE card_transactions SET authorization_id = authorization_id || '#duplicate:' || id
WHERE kind = 'authorization' AND EXISTS (
    SELECT 1 FROM card_transactions kept
    WHERE kept.kind = 'authorization'
      AND kept.card_id = card_transactions.card_id
      AND kept.authorization_id = card_transactions.authorization_id
      AND kept.id <> card_transactions.id
      AND (
        (kept.status = 'approved' AND card_transactions.status <> 'approved')
        OR ((kept.status = 'approved') = (card_transactions.status = 'approved')
            AND (kept.created_at < card_transactions.created_at
                 OR (kept.created_at = card_transactions.created_at
                     AND kept.id < card_transactions.id)))
      )
);

CREATE UNIQUE INDEX card_transactions_authorization
    ON card_transactions (card_id, authorization_id) WHERE kind = 'authorization';
