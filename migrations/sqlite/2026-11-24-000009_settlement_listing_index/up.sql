-- The per-merchant listing index, rebuilt so that only listings use it.
--
-- Before a table is first analyzed (autovacuum may be off, or not yet have
-- run), PostgreSQL prices any index scan on `merchant_id = $1` about the
-- same, and the plan it cached for a settlement's lookup and version-checked
-- update by (merchant_id, idempotency_key) could take this index instead of
-- the primary key: every step then walked all of the merchant's settlements,
-- for the life of the connection. A partial index serves only queries that
-- state its predicate, which listings do and key lookups do not. The key
-- column also serves the listing's tie-break order, so a listing reads its
-- page in index order instead of sorting all of the merchant's settlements.
-- schema/tests/settlements.rs checks both plans.
DROP INDEX settlements_by_merchant;
CREATE INDEX settlements_by_merchant ON settlements (merchant_id, created_at, idempotency_key)
    WHERE created_at IS NOT NULL;
