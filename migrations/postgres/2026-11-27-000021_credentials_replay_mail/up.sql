-- Sessions end after TERN_SESSION_IDLE_TTL without use (decisions §9).
-- last_seen_at is written at most once per resolution, not per request.
-- Existing sessions are carried over as seen at migration time: a deploy
-- logs nobody out, and an idle session ends one idle period later.
-- The column is added nullable, filled, then made NOT NULL.
ALTER TABLE sessions ADD COLUMN last_seen_at TIMESTAMP;
UPDATE sessions SET last_seen_at = (now() AT TIME ZONE 'UTC');
ALTER TABLE sessions ALTER COLUMN last_seen_at SET NOT NULL;
CREATE INDEX sessions_by_expiry ON sessions (expires_at);
CREATE INDEX email_tokens_by_expiry ON email_tokens (expires_at);

-- A signed dispatch repeated within the signature tolerance answers the
-- first one (decisions §11): the digest of what the signature covers
-- (timestamp and body) is unique, so two identical requests at once, on
-- one node or two, record one dispatch. NULL for dispatches made before.
ALTER TABLE push_dispatches ADD COLUMN replay_sha256 TEXT;
CREATE UNIQUE INDEX push_dispatches_replay ON push_dispatches (replay_sha256);

-- Mail written by a committed change (verification, reset), in the same
-- transaction as the change, then sent by a background sender with
-- retries. A row is deleted once sent: its body carries a live token.
-- A row that used up its attempts keeps failed_at and loses its body.
CREATE TABLE mail_outbox (
    id TEXT PRIMARY KEY NOT NULL,
    recipient TEXT NOT NULL,
    subject TEXT NOT NULL,
    body TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    due_at TIMESTAMP NOT NULL,
    -- A sender's lease: while it is in the future no other sender takes
    -- the row; a sender that died lets it lapse.
    claimed_until TIMESTAMP,
    claim_token TEXT,
    last_error TEXT,
    created_at TIMESTAMP NOT NULL,
    failed_at TIMESTAMP
);

CREATE INDEX mail_outbox_due ON mail_outbox (due_at) WHERE failed_at IS NULL;
