-- Nothing to do on PostgreSQL: an upsert (INSERT ... ON CONFLICT DO
-- UPDATE) fires the UPDATE triggers of 000015 and is refused, and there is
-- no REPLACE. The SQLite migration of this name closes REPLACE there.
SELECT 1;
