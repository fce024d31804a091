DROP INDEX webhook_events_dead;
