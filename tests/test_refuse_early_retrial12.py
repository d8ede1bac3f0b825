"""Re-trial 12 of issue 28, item 3 (refuse early): a new user's own studies, validated, planned, fake-trained
(no training), fitted. What `ladder fit` leaves out or refuses for a reason the design already holds must be said by
`studies validate` and `plan` before any run trains, in the fit's own terms; and neither may refuse or deny what the
fit does."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests import hero_fixture as hf
from tests.cli_helpers import run_cli


def _study_file(tmp_path: Path, name: str = "s", **kw) -> Path:
    """A hero_fixture study a user could run (a vocabulary data preparation accepts) as a YAML file."""
    d = hf.study_dict(name=name, **kw)
    d["model"]["vocab_size"] = 320
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(d), encoding="utf-8")
    return path


def _said(r) -> str:
    return " ".join(r.stderr.split())


def _rollout_rows(root: Path) -> list:
    return (json.loads((root / "fit.json").read_text())["loss"].get("rollout") or {}).get("rows") or []


def test_three_sizes_whose_budgets_share_compute_levels_are_not_denied_a_rollout(tmp_path, capsys):
    """3 sizes 1.4x apart at budgets 0.5x, 1x, 2x (a wsd trunk and its branches): validate and plan warned "no rollout
    backtest, which needs >= 4 sizes", and `ladder fit` on the trained ladder ran one (4 forecasts): the fit grows
    such a ladder by compute level, not by size."""
    sizes, budgets = hf.SIZES[:3], [0.5, 1, 2]
    spec = _study_file(tmp_path, sizes=sizes, budgets=budgets)
    for command in (("studies", "validate"), ("plan", "--dry-run")):
        r = run_cli(capsys, *command, spec)
        assert r.code == 0 and "rollout" not in r.stderr, _said(r)
    root = hf.make_ladder(tmp_path / "fitted", sizes=sizes, budgets=budgets, n_boot=5)
    assert _rollout_rows(root)
    # 3 sizes 2x apart at the same budgets share no compute level: neither has a rollout, and the plan says so
    wide = ["25K", "50K", "100K"]
    r = run_cli(capsys, "studies", "validate", _study_file(tmp_path, "wide", sizes=wide, budgets=budgets))
    assert r.code == 0 and "no rollout backtest, which needs >= 4 sizes" in _said(r), _said(r)
    assert not _rollout_rows(hf.make_ladder(tmp_path / "wide", sizes=wide, budgets=budgets, n_boot=5))
