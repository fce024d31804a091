ALTER TABLE cards DROP COLUMN limits_set;
