DROP INDEX actor_timers_due_by_slot;
ALTER TABLE actor_timers DROP COLUMN slot;
DROP TABLE cluster_slots;
DROP TABLE cluster_nodes;
