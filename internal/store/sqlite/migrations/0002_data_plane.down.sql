DROP TABLE task_logs;
DROP TABLE uploads;
ALTER TABLE tasks DROP COLUMN input_length;
ALTER TABLE tasks DROP COLUMN input_offset;
ALTER TABLE jobs DROP COLUMN input_header;
ALTER TABLE jobs DROP COLUMN upload_id;
