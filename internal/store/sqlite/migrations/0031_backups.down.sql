ALTER TABLE jobs DROP COLUMN speculate_after;
ALTER TABLE tasks DROP COLUMN second_lease;
