-- The tables of several nodes on one PostgreSQL (see the PostgreSQL
-- migration). SQLite runs one process: they stay as created, so that one
-- schema serves both backends.
CREATE TABLE cluster_nodes (
    id TEXT PRIMARY KEY NOT NULL,
    advertise_url TEXT,
    instance TEXT NOT NULL,
    started_at TIMESTAMP NOT NULL,
    heartbeat_at TIMESTAMP NOT NULL,
    lease_until TIMESTAMP NOT NULL
);

CREATE TABLE cluster_slots (
    slot INTEGER PRIMARY KEY NOT NULL CHECK (slot >= 0),
    owner TEXT,
    epoch BIGINT NOT NULL DEFAULT 0,
    acquired_at TIMESTAMP
);

ALTER TABLE actor_timers ADD COLUMN slot INTEGER NOT NULL DEFAULT 0;
