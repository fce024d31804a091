DROP INDEX card_transactions_event;
CREATE UNIQUE INDEX card_transactions_event ON card_transactions (provider_event_id);
ALTER TABLE card_transactions DROP COLUMN event_source;
