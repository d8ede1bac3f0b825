"""Re-trial 15: a user who sweeps learning rate and batch size to get the hero's hyperparameters. What plan and
fit say about the sweep must be true of the runs the fit reads, and its advice must lead where the loss does."""

from __future__ import annotations

from tests import hero_fixture as hf


def _sweep_plan(**ablations):
    from ladder.plan.planner import expand
    from ladder.studies.spec import parse_study

    d = hf.study_dict(name="sweep", sizes=["4K", "8K", "16K"], ablations=ablations)
    d["data"]["seq_len"] = 32
    d["ladder"]["tokens_per_param"] = 5
    study = parse_study(d)
    return study, expand(study).runs


def test_a_batch_sweeps_rungs_are_counted_once_as_the_fit_keeps_one_run_per_rung():
    """`ladder plan sweep.yaml` (3 sizes, lr_multipliers x batch_multipliers) said "the ladder has 5 runs at 3 sizes
    ...: no rollout backtest", so the loss law looked fittable; `ladder fit` then kept the best run of each rung
    (3) and refused: "ratio: needs >= 4 runs for 3 parameters (has 3)". A batch variant trains whole steps, so its
    tokens/param read 5 or 4.97 and were counted as two rungs."""
    from ladder.plan.requirements import fit_requirements

    study, runs = _sweep_plan(lr_multipliers=[0.5, 1, 2], batch_multipliers=[0.5, 1, 2])
    assert len({f"{r.tokens / r.params:.3g}" for r in runs}) > 1  # the batch variants' tokens differ by a step
    refuse, partly = fit_requirements(study, runs)
    said = " ".join(refuse + partly)
    assert "has 3 runs at 3 sizes" in said and "no loss law" in said, said
    assert "no rollout backtest" not in said, said
