ALTER TABLE settlements DROP COLUMN transfer_id;
DROP TABLE transfers;
