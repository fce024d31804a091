-- Tern records events of its own among a card's transactions (a hold's
-- expiry, `tern_expiry:<authorization row id>`), beside the provider's.
-- Provider event ids are whatever the provider sends, so no form of id is
-- safe to share: a provider event named like an expiry made that expiry a
-- "duplicate" and its hold never ended. Each id now belongs to a source and
-- is unique within it; Tern's ids live where inbound ids cannot reach.
--
-- Existing rows: an expiry is only ever Tern's, every other kind the
-- provider's (a provider event that took a `tern_expiry:` id stays the
-- provider's, so the expiry it blocked can now be recorded).
ALTER TABLE card_transactions ADD COLUMN event_source TEXT NOT NULL DEFAULT 'provider'
    CHECK (event_source IN ('provider', 'tern'));
UPDATE card_transactions SET event_source = 'tern' WHERE kind = 'expiry';

DROP INDEX card_transactions_event;
CREATE UNIQUE INDEX card_transactions_event ON card_transactions (event_source, provider_event_id);
