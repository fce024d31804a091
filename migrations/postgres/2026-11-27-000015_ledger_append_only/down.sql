-- Back to holds edited in place: a resolved hold takes its resolution's
-- status, rows that name a resolution name its hold again, and the
-- resolutions go. Balances are unchanged: a posted resolution's lines
-- counted as posted exactly as an edited hold's did. A card_charge still
-- in flight keeps its pending credit, which the earlier code never
-- resolves (it credits the source anew on success).
DROP TRIGGER ledger_transactions_never_truncated ON ledger_transactions;
DROP TRIGGER ledger_transactions_append_only ON ledger_transactions;
DROP TRIGGER ledger_entries_never_truncated ON ledger_entries;
DROP TRIGGER ledger_entries_append_only ON ledger_entries;
DROP FUNCTION ledger_append_only();

UPDATE settlements SET ledger_transaction_id = resolution.pending_id
    FROM ledger_transactions resolution
    WHERE resolution.id = settlements.ledger_transaction_id AND resolution.pending_id IS NOT NULL;
UPDATE settlements SET reversal_transaction_id = resolution.pending_id
    FROM ledger_transactions resolution
    WHERE resolution.id = settlements.reversal_transaction_id AND resolution.pending_id IS NOT NULL;
UPDATE card_transactions SET ledger_transaction_id = resolution.pending_id
    FROM ledger_transactions resolution
    WHERE resolution.id = card_transactions.ledger_transaction_id AND resolution.pending_id IS NOT NULL;
UPDATE ledger_transactions SET status = resolution.status, updated_at = resolution.created_at
    FROM ledger_transactions resolution
    WHERE resolution.pending_id = ledger_transactions.id;
DELETE FROM ledger_entries
    WHERE transaction_id IN (SELECT id FROM ledger_transactions WHERE pending_id IS NOT NULL);
DELETE FROM ledger_transactions WHERE pending_id IS NOT NULL;

DROP INDEX ledger_transactions_resolving;
ALTER TABLE ledger_transactions DROP COLUMN pending_id;
