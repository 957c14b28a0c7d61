DROP INDEX tasks_claim_open;
ALTER TABLE tasks DROP COLUMN voters;
ALTER TABLE tasks DROP COLUMN workers;
ALTER TABLE jobs DROP COLUMN quorum;
ALTER TABLE jobs DROP COLUMN workers;
