DROP INDEX uploads_owner;
