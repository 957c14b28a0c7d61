-- A chunk being voted on keeps its replicas as ballots in its own row: a
-- JSON array of what each replica holds of its own (domain.Ballot), NULL
-- for every other task.
ALTER TABLE tasks ADD COLUMN ballots TEXT;
