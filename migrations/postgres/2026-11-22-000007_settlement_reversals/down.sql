ALTER TABLE settlements DROP COLUMN reversal_transaction_id;
