-- The last verified point of each merchant's audit chain, so that
-- GET /v1/audit/verify walks only what was appended since (from this
-- event's hash) plus a bounded window of older events, re-verified in
-- turn so that the whole chain is rescanned over successive calls.
-- seq and hash name the checkpoint's event, which every call re-checks;
-- rescan_seq is where the rolling rescan of older events stands (the last
-- event it re-verified in the current pass, 0 at a pass's start). version
-- guards updates: concurrent calls compare and set, so a slower call never
-- moves the checkpoint back. Rows are made by the first verification of a
-- chain; a chain without one is verified from its first event.
CREATE TABLE audit_checkpoints (
    merchant_id TEXT PRIMARY KEY NOT NULL REFERENCES merchants (id),
    seq BIGINT NOT NULL,
    hash TEXT NOT NULL,
    rescan_seq BIGINT NOT NULL,
    version BIGINT NOT NULL,
    verified_at TIMESTAMP NOT NULL
);
