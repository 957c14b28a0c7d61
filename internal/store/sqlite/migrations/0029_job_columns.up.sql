-- The input columns a job's final CSV carries after the outputs' own, as
-- a JSON array of names ('' when none), and the column that joins them.
ALTER TABLE jobs ADD COLUMN columns TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN id_column TEXT NOT NULL DEFAULT '';
