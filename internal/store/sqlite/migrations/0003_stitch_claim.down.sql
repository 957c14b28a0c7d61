DROP INDEX tasks_claim_stitch;
