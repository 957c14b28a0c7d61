ALTER TABLE workers DROP COLUMN tasks_done;
ALTER TABLE workers DROP COLUMN workloads;
