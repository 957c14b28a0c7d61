-- What each worker announces and has done, for the workers page and
-- GET /workloads: the workloads its last chunk claim named (space
-- separated; '' when it named none and takes any), and how many tasks it
-- completed, added to in the transaction that records their results.
ALTER TABLE workers ADD COLUMN workloads text NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN tasks_done bigint NOT NULL DEFAULT 0;
