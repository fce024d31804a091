-- The operator console and `tern status` read the dead-lettered events on
-- every refresh; delivered events stay in the table for good, so without
-- this index each read scanned all of them.
CREATE INDEX webhook_events_dead ON webhook_events (merchant_id, transfer_id, seq) WHERE status = 'dead';
