"""The forecast loop: the fit as the commands read it, frozen forecasts, the hero as a planned run, its score and
what to train next; imports the plan and the books, never the jobs."""
