-- Back to holds edited in place: a resolved hold takes its resolution's
-- status, rows that name a resolution name its hold again, and the
-- resolutions go. Balances are unchanged: a posted resolution's lines
-- counted as posted exactly as an edited hold's did. A card_charge still
-- in flight keeps its pending credit, which the earlier code never
-- resolves (it credits the source anew on success).
DROP TRIGGER ledger_transactions_no_delete;
DROP TRIGGER ledger_transactions_no_update;
DROP TRIGGER ledger_entries_no_delete;
DROP TRIGGER ledger_entries_no_update;

UPDATE settlements SET ledger_transaction_id = (
    SELECT resolution.pending_id FROM ledger_transactions AS resolution
    WHERE resolution.id = settlements.ledger_transaction_id)
    WHERE ledger_transaction_id IN (SELECT id FROM ledger_transactions WHERE pending_id IS NOT NULL);
UPDATE settlements SET reversal_transaction_id = (
    SELECT resolution.pending_id FROM ledger_transactions AS resolution
    WHERE resolution.id = settlements.reversal_transaction_id)
    WHERE reversal_transaction_id IN (SELECT id FROM ledger_transactions WHERE pending_id IS NOT NULL);
UPDATE card_transactions SET ledger_transaction_id = (
    SELECT resolution.pending_id FROM ledger_transactions AS resolution
    WHERE resolution.id = card_transactions.ledger_transaction_id)
    WHERE ledger_transaction_id IN (SELECT id FROM ledger_transactions WHERE pending_id IS NOT NULL);
UPDATE ledger_transactions SET
    status = (SELECT resolution.status FROM ledger_transactions AS resolution
        WHERE resolution.pending_id = ledger_transactions.id),
    updated_at = (SELECT resolution.created_at FROM ledger_transactions AS resolution
        WHERE resolution.pending_id = ledger_transactions.id)
    WHERE id IN (SELECT pending_id FROM ledger_transactions WHERE pending_id IS NOT NULL);
DELETE FROM ledger_entries
    WHERE transaction_id IN (SELECT id FROM ledger_transactions WHERE pending_id IS NOT NULL);
DELETE FROM ledger_transactions WHERE pending_id IS NOT NULL;

DROP INDEX ledger_transactions_resolving;
ALTER TABLE ledger_transactions DROP COLUMN pending_id;
