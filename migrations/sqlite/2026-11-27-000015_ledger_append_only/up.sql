-- The ledger becomes append-only (decisions §6): a hold stays `pending`
-- for ever, and its posting or void is a transaction of its own that names
-- it in `pending_id`. The unique index lets a hold be resolved at most once
-- (many NULLs are allowed). Rows written before this migration keep their
-- meaning: a hold that was edited in place has status `posted` or `voided`
-- and no `pending_id`, and counts as its status says; nothing is rewritten.
ALTER TABLE ledger_transactions ADD COLUMN pending_id TEXT REFERENCES ledger_transactions (id);

CREATE UNIQUE INDEX ledger_transactions_resolving ON ledger_transactions (pending_id);

-- After insert no entry's amount, direction, account or transaction
-- changes, and no transaction's status: the database refuses it, whoever asks.
CREATE TRIGGER ledger_entries_no_update BEFORE UPDATE ON ledger_entries
BEGIN
    SELECT RAISE(ABORT, 'the ledger is append-only: UPDATE on ledger_entries refused');
END;
CREATE TRIGGER ledger_entries_no_delete BEFORE DELETE ON ledger_entries
BEGIN
    SELECT RAISE(ABORT, 'the ledger is append-only: DELETE on ledger_entries refused');
END;
CREATE TRIGGER ledger_transactions_no_update BEFORE UPDATE ON ledger_transactions
BEGIN
    SELECT RAISE(ABORT, 'the ledger is append-only: UPDATE on ledger_transactions refused');
END;
CREATE TRIGGER ledger_transactions_no_delete BEFORE DELETE ON ledger_transactions
BEGIN
    SELECT RAISE(ABORT, 'the ledger is append-only: DELETE on ledger_transactions refused');
END;
