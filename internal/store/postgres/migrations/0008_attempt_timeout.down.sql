ALTER TABLE tasks DROP COLUMN IF EXISTS attempt_deadline;
ALTER TABLE tasks DROP COLUMN IF EXISTS timeout_seconds;
ALTER TABLE jobs DROP COLUMN IF EXISTS timeout_seconds;
