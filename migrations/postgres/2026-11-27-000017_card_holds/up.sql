-- Holds end (decisions §10): an authorization's hold is released by the
-- network's reversal (all of it, or part) or, when nothing clears it within
-- TERN_CARD_HOLD_TTL, by the card's expiry timer.
--
-- hold_minor is what an authorization still holds: its amount while open,
-- less what partial reversals released; 0 once it ended (cleared, reversed,
-- expired) and for every other kind. The card's hold_minor sums it.
ALTER TABLE card_transactions ADD COLUMN hold_minor BIGINT NOT NULL DEFAULT 0
    CHECK (hold_minor >= 0);
UPDATE card_transactions SET hold_minor = amount_minor
    WHERE kind = 'authorization' AND status = 'approved';

-- New kinds: a reversal the network sent, an expiry Tern made; both
-- `released`. New authorization statuses: reversed, expired.
ALTER TABLE card_transactions DROP CONSTRAINT card_transactions_kind_check;
ALTER TABLE card_transactions ADD CONSTRAINT card_transactions_kind_check
    CHECK (kind IN ('authorization', 'clear', 'refund', 'reversal', 'expiry'));
ALTER TABLE card_transactions DROP CONSTRAINT card_transactions_status_check;
ALTER TABLE card_transactions ADD CONSTRAINT card_transactions_status_check
    CHECK (status IN ('approved', 'declined', 'cleared', 'voided', 'posted',
                      'reversed', 'expired', 'released'));

-- Holds open before this migration had no expiry: each gets the default
-- TERN_CARD_HOLD_TTL (7 days) from its approval, the timer the card's actor
-- schedules with every new hold (same id and payload), so it ends like any
-- other. One already past that is due at once and expires at start.
INSERT INTO actor_timers (id, kind, entity_id, due_at, payload, claim_token, claimed_until, attempts, created_at)
SELECT card_id || ':hold:' || id, 'card', card_id, created_at + INTERVAL '7 days',
       'expire_hold:' || id, NULL, NULL, 0, CURRENT_TIMESTAMP AT TIME ZONE 'UTC'
FROM card_transactions
WHERE kind = 'authorization' AND status = 'approved';
