"""The jobs stage: runs submitted through submitit (SLURM, local workers, debug) and what a job runs on its node;
imports the plan and the books, never the forecast."""
