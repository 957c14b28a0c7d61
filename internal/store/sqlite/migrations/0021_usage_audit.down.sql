DROP TABLE audit;
DROP TABLE usage;
ALTER TABLE tasks DROP COLUMN leased_at;
