"""The books stage: what a study's files say about its runs (results, metrics, locks, jobs.json), their state for
``ladder status`` and the results table of ``ladder collect``; imports only the plan among the stages."""
