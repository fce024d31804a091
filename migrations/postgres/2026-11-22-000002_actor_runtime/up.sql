-- Persisted timers of the actor runtime: retries, challenge expiry, webhook
-- backoff. A row is due at due_at (UTC) and is delivered to the actor of
-- (kind, entity_id) as a message. A node claims a due row by writing a fresh
-- claim_token and a lease end (claimed_until); once the lease has passed the
-- row may be claimed again, so a dead node's timers move on. The row is
-- deleted once handled, ideally in the transaction of the transition it causes.
CREATE TABLE actor_timers (
    id TEXT PRIMARY KEY NOT NULL,
    kind TEXT NOT NULL,
    entity_id TEXT NOT NULL,
    due_at TIMESTAMP NOT NULL,
    payload TEXT NOT NULL,
    claim_token TEXT,
    claimed_until TIMESTAMP,
    attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    created_at TIMESTAMP NOT NULL
);

-- The timer service asks "which rows of my kinds are due" on every poll.
CREATE INDEX actor_timers_due ON actor_timers (kind, due_at);
-- Entities cancel their own timers when they reach a terminal state.
CREATE INDEX actor_timers_by_entity ON actor_timers (kind, entity_id);
