-- The input columns a job's final CSV carries after the outputs' own, as
-- a JSON array of names ('' when none), and the column that joins them.
ALTER TABLE jobs ADD COLUMN columns text NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN id_column text NOT NULL DEFAULT '';
