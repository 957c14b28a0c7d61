ALTER TABLE jobs DROP COLUMN cache_version;
