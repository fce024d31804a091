-- The ledger entry of a settlement's reversal: the refund's reservation on
-- the source (posted when the refund completes, voided when it does not) or
-- the posted return of a reversed push.
ALTER TABLE settlements ADD COLUMN reversal_transaction_id TEXT;
