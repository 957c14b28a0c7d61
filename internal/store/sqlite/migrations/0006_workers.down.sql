DROP INDEX tasks_tree_roots;
DROP TABLE workers;
