-- Backups of stragglers: a chunk leased twice keeps its other attempt's
-- lease (store.EncodeSecondLease), and a job says after how many times
-- its median chunk time a chunk gets a backup (0: never).
ALTER TABLE tasks ADD COLUMN second_lease TEXT;
ALTER TABLE jobs ADD COLUMN speculate_after REAL NOT NULL DEFAULT 3;
