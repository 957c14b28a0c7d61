-- A log line's position among the lines its attempt sent, as the worker
-- numbered it (the "offset" of its batch plus its place in the batch);
-- NULL for lines of senders that number none. An append that carries an
-- offset skips the positions already stored for its attempt, so a batch
-- sent again after its answer was lost is stored once. The index finds
-- the last position of an attempt without reading its lines.
ALTER TABLE task_logs ADD COLUMN seq INTEGER;
CREATE INDEX task_logs_seq ON task_logs (task_id, attempt, seq) WHERE seq IS NOT NULL;
