DROP TABLE audit_events;
DROP TABLE audit_heads;
