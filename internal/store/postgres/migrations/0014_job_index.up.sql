-- One index for every read of a job's tasks (counts by state, pages in
-- chunk order, the stitch's outputs, the chart, cancel, retry, retention)
-- in place of tasks_job_kind_index and tasks_job_kind_state. A change of
-- state is never a HOT update, so each index of tasks takes a new entry
-- at every claim and every completion, whatever its columns: one index
-- fewer is one entry fewer for each. The chart reads finished_at from the
-- index alone; a page of a job's tasks in chunk order, of any state,
-- merges the index's ranges of each state.
CREATE INDEX tasks_job ON tasks (job_id, kind, state, chunk_index) INCLUDE (finished_at);
DROP INDEX tasks_job_kind_index;
DROP INDEX tasks_job_kind_state;
