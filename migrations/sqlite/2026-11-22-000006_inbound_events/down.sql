DROP TABLE inbound_events;
