-- A dashboard session acts as an account, and was started with one of
-- its tokens (by its hash; empty for the client token): the session ends
-- when that token is revoked or the account disabled. Sessions from before
-- accounts are admin's.
ALTER TABLE ui_sessions ADD COLUMN account TEXT NOT NULL DEFAULT 'admin';
ALTER TABLE ui_sessions ADD COLUMN token_hash TEXT NOT NULL DEFAULT '';
