-- A job's timeout_seconds bounds how long one attempt of a chunk may run
-- (0: no limit). Its tasks copy it, as they copy lease_seconds, so that a
-- claim sets each attempt's deadline in its one statement; a lease never
-- runs past the deadline, and the reaper tells a deadline reached from a
-- lease that ran out. NULL attempt_deadline: no deadline. Columns with a
-- constant default are added without rewriting the table.
ALTER TABLE jobs ADD COLUMN timeout_seconds integer NOT NULL DEFAULT 0;

ALTER TABLE tasks ADD COLUMN timeout_seconds integer NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN attempt_deadline timestamptz;
