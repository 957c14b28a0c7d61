ALTER TABLE ui_sessions DROP COLUMN token_hash;
ALTER TABLE ui_sessions DROP COLUMN account;
