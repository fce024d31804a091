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
CREATE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the ledger is append-only: % on % refused', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE TRIGGER ledger_entries_append_only BEFORE UPDATE OR DELETE ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER ledger_entries_never_truncated BEFORE TRUNCATE ON ledger_entries
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER ledger_transactions_append_only BEFORE UPDATE OR DELETE ON ledger_transactions
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER ledger_transactions_never_truncated BEFORE TRUNCATE ON ledger_transactions
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
