-- SQLite's REPLACE (and INSERT OR REPLACE) resolves a key conflict by
-- deleting the old row without firing its DELETE triggers (unless
-- recursive_triggers is on), so it could rewrite a ledger row that UPDATE
-- may not touch. An insert over an existing id is refused before that
-- happens, whatever the connection's settings. Transactions are checked by
-- id only: a hold's resolution relies on ON CONFLICT (pending_id) DO
-- NOTHING to find that it lost the race, which must stay a no-op.
CREATE TRIGGER ledger_entries_no_replace BEFORE INSERT ON ledger_entries
WHEN EXISTS (SELECT 1 FROM ledger_entries WHERE id = NEW.id)
BEGIN
    SELECT RAISE(ABORT, 'the ledger is append-only: an insert over an existing ledger_entries row refused');
END;
CREATE TRIGGER ledger_transactions_no_replace BEFORE INSERT ON ledger_transactions
WHEN EXISTS (SELECT 1 FROM ledger_transactions WHERE id = NEW.id)
BEGIN
    SELECT RAISE(ABORT, 'the ledger is append-only: an insert over an existing ledger_transactions row refused');
END;
