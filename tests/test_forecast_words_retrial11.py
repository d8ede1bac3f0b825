"""Re-trial 11c: `ladder fit --runs FILE --predict` on a user's own ladder. Every forecast states its distance
in parameters, tokens and compute (6ND), how far the rollout tested and its error there, and the track record
on published ladders at that distance (issue 26 item 5), alike in the terminal and in --json (issue 28)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from tests.cli_helpers import run_cli


def _ladder(path: Path) -> Path:
    """Five sizes x three budgets of a Chinchilla-like law, with a little noise: enough sizes for a rollout."""
    rng = random.Random(1)
    text = "params,tokens,loss\n"
    for n in (1e6, 2e6, 4e6, 8e6, 16e6):
        for r in (10, 20, 40):
            loss = (1.7 + 400 / n**0.34 + 410 / (n * r) ** 0.28) * (1 + rng.gauss(0, 0.003))
            text += f"{n:g},{n * r:g},{loss:.5f}\n"
    path.write_text(text)
    return path


def test_every_prediction_says_its_distance_the_rollouts_reach_and_the_track_record(tmp_path, capsys):
    """retrial11c: the predictions of a runs table (no hero) were the only forecasts, and none said how far the
    rollout tested, its error there, or the published ladders' record at that distance: the table gave the
    multiple in params alone ("1.88x"), and a warning "beyond what the rollout tested" with no tested distance."""
    from ladder.reports.fits.loss import track_record

    runs = str(_ladder(tmp_path / "runs.csv"))
    args = ("fit", "--runs", runs, "--bootstrap", "20", "--predict", "3e7:6e8", "--predict", "1e9:2e10")
    r = run_cli(capsys, *args)
    assert r.code == 0, r.stderr
    j = run_cli(capsys, *args, "--json")
    assert j.code == 0, j.stderr
    fit = json.loads(j.stdout)
    near, far = fit["predictions"]
    out = " ".join(r.stdout.split())
    # the distance in all three axes, 6ND compute recomputed here: 3e7 x 6e8 over 16M x 640M
    assert abs(near["compute_x"] - 6 * 3e7 * 6e8 / (6 * 16e6 * 640e6)) < 1e-9
    assert "1.88x params, 0.938x tokens, 1.76x compute (6ND)" in out, r.stdout
    assert "62.5x params, 31.2x tokens, 1,953x compute (6ND)" in out, r.stdout
    tested = fit["loss"]["reach"]["tested"]
    assert f"the rollout tested up to {tested['params_x']:.3g}x params" in out, r.stdout
    for p in (near, far):
        assert p["track_record"] == track_record.at(p["compute_x"]), p.get("track_record")
        assert p["track_record"]["band"] == track_record.band_of(p["compute_x"])
        assert track_record.sentence(p["track_record"]) in out, (p["label"], r.stdout)
    # beyond what was tested: the warning says how far the rollout tested and its error there
    warn = next(w for w in fit["warnings"] if w.startswith("prediction 1e9:2e10"))
    assert "beyond what the rollout tested" in warn and "the rollout tested up to" in warn, warn
    assert "erred by a median of" in warn and "the hero" not in warn, warn
    assert not any(w.startswith("prediction 3e7:6e8") for w in fit["warnings"]), fit["warnings"]
