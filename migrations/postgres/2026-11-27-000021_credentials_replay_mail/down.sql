DROP TABLE mail_outbox;
DROP INDEX push_dispatches_replay;
ALTER TABLE push_dispatches DROP COLUMN replay_sha256;
DROP INDEX email_tokens_by_expiry;
DROP INDEX sessions_by_expiry;
ALTER TABLE sessions DROP COLUMN last_seen_at;
