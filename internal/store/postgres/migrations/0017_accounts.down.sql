DROP TABLE account_tokens;
DROP TABLE accounts;
