ALTER TABLE actor_timers DROP COLUMN slot;
DROP TABLE cluster_slots;
DROP TABLE cluster_nodes;
