DROP TABLE task_args;
