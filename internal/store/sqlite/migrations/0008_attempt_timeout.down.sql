ALTER TABLE tasks DROP COLUMN attempt_deadline;
ALTER TABLE tasks DROP COLUMN timeout_seconds;
ALTER TABLE jobs DROP COLUMN timeout_seconds;
