DROP TABLE account_served;
DROP INDEX tasks_leased;
DROP INDEX tasks_fair_workload;
DROP INDEX tasks_fair;
