DROP TABLE idempotency_records;
DROP TABLE settlements;
