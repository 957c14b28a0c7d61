-- An account's current use, which its quotas bound: the bytes of its
-- uploads (max_storage), summed from the index alone.
CREATE INDEX uploads_owner ON uploads (owner, bytes);
