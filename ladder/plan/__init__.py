"""The plan stage: a study expanded into runs (rungs, hero, packing, compile choice, plausibility checks, what data
preparation and the fit will require) and written as run directories with plan.json; imports nothing from the
later stages (books, jobs, forecast)."""
