DROP TABLE worker_keys;
