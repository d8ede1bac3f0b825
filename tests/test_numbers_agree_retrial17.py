"""Re-trial 17c: one number per quantity, the same meaning everywhere (the default study's fit and report, read
side by side)."""

from __future__ import annotations

import pandas as pd

from ladder.reports.fits.ablations import fit_tie_ablation
from tests.reports.fits.test_ablations import LADDER, log_gap, tie_runs


def test_a_rung_one_variant_trained_is_not_a_rung_whose_shapes_differ():
    """The default study's top rung (200K) trained untied only. fit.json's tied_vs_untied.method (and the report's
    Method paragraph) said "here the variants' shapes differ at 1 of 16 rungs (sizes hold total parameters fixed,
    so the untied head takes V x d from the body)", though the study holds non-embedding parameters fixed and both
    variants share the body at every one of the 15 rungs that has both; the 16th had no tied run to differ from."""
    df = tie_runs(log_gap(0.004, 3e17))
    top = df[(df["flops"] == LADDER[-1]) & ~df["tie_embeddings"]].assign(
        flops=LADDER[-1] * 4, params=LADDER[-1] * 4 / 1e11, d_model=1024, n_layers=12
    )
    res = fit_tie_ablation(pd.concat([df, top], ignore_index=True), hero_flops=1e21, n_boot=20)
    assert sum(1 for s in res.scales if s.skipped) == 1
    assert "shapes differ" not in res.method, res.method
    # a rung whose two variants do differ in body is still named, out of the rungs that compare both
    unlike = df.copy()
    unlike.loc[(unlike["flops"] == LADDER[0]) & ~unlike["tie_embeddings"], "d_model"] = 48
    res = fit_tie_ablation(pd.concat([unlike, top], ignore_index=True), hero_flops=1e21, n_boot=20)
    assert f"shapes differ at 1 of {len(LADDER)} rungs" in res.method, res.method
