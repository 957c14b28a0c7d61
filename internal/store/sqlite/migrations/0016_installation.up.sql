-- The database's identity: one row, a random ID made when the schema is,
-- which never changes. A blob store is bound to the database whose ID its
-- marker names, so that no other database sweeps it.
CREATE TABLE installation (
    one INTEGER NOT NULL PRIMARY KEY CHECK (one = 1),
    id  TEXT    NOT NULL
) STRICT;

INSERT INTO installation (one, id) VALUES (1, lower(hex(randomblob(16))));
