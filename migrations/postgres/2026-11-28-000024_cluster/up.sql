-- Several Tern nodes on one PostgreSQL (design: scale-out). Each node
-- registers here and heartbeats; a node whose heartbeat is older than the
-- lease TTL is dead.
CREATE TABLE cluster_nodes (
    id TEXT PRIMARY KEY NOT NULL,
    -- How the other nodes reach this one (TERN_ADVERTISE_URL); NULL: it
    -- cannot be forwarded to.
    advertise_url TEXT,
    -- The process that heartbeats under this id: a second live process
    -- with the same id is refused instead of fighting over every slot.
    instance TEXT NOT NULL,
    started_at TIMESTAMP NOT NULL,
    heartbeat_at TIMESTAMP NOT NULL,
    -- heartbeat_at plus the node's own TERN_LEASE_TTL: it is alive until
    -- then, whatever TTL the node reading it runs with.
    lease_until TIMESTAMP NOT NULL
);

-- Entities hash into a fixed number of slots; one node at a time owns a
-- slot and runs the actors of its entities. Every claim and every release
-- raises the epoch, so (slot, epoch) names one ownership: a write carrying
-- an epoch that is no longer the slot's is refused (fencing).
CREATE TABLE cluster_slots (
    slot INTEGER PRIMARY KEY NOT NULL CHECK (slot >= 0),
    owner TEXT,
    epoch BIGINT NOT NULL DEFAULT 0,
    acquired_at TIMESTAMP
);
INSERT INTO cluster_slots (slot) SELECT generate_series(0, 63);

-- A timer belongs to its entity's slot: a node claims the timers of the
-- slots it owns.
ALTER TABLE actor_timers ADD COLUMN slot INTEGER NOT NULL DEFAULT 0;
CREATE INDEX actor_timers_due_by_slot ON actor_timers (slot, due_at);
