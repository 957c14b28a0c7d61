-- Back to bytea's default (compressed, out of line when large); results
-- written meanwhile stay uncompressed.
ALTER TABLE jobs ALTER COLUMN result SET STORAGE EXTENDED;
