DROP TABLE push_deliveries;
DROP TABLE push_dispatches;
DROP TABLE devices;
