-- The database's identity: one row, a random ID made when the schema is,
-- which never changes. A blob store is bound to the database whose ID its
-- marker names, so that no other database sweeps it.
CREATE TABLE installation (
    one integer PRIMARY KEY CHECK (one = 1),
    id  text    NOT NULL
);

INSERT INTO installation (one, id) VALUES (1, replace(gen_random_uuid()::text, '-', ''));
