DELETE FROM actor_timers WHERE kind = 'card' AND payload LIKE 'expire_hold:%';
DELETE FROM card_transactions WHERE kind IN ('reversal', 'expiry');
-- The old schema reads an open authorization's hold from its amount.
UPDATE card_transactions SET amount_minor = hold_minor
    WHERE kind = 'authorization' AND status = 'approved';
UPDATE card_transactions SET status = 'voided' WHERE status IN ('reversed', 'expired');
ALTER TABLE card_transactions DROP CONSTRAINT card_transactions_status_check;
ALTER TABLE card_transactions ADD CONSTRAINT card_transactions_status_check
    CHECK (status IN ('approved', 'declined', 'cleared', 'voided', 'posted'));
ALTER TABLE card_transactions DROP CONSTRAINT card_transactions_kind_check;
ALTER TABLE card_transactions ADD CONSTRAINT card_transactions_kind_check
    CHECK (kind IN ('authorization', 'clear', 'refund'));
ALTER TABLE card_transactions DROP COLUMN hold_minor;
