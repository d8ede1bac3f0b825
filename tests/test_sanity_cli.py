"""`ladder sanity` on the built-in default study (its real data, prepared through the cache): it passes, and
with labels deliberately left unshifted it fails, naming the masking / label-shift stage."""

import pytest

from tests.cli_helpers import run_cli

pytestmark = pytest.mark.slow


def test_sanity_passes_on_the_default_study_and_catches_a_label_shift(capsys):
    ok = run_cli(capsys, "sanity", "default", "--json")
    assert ok.code == 0, ok.stderr
    report = ok.json()
    assert report["passed"] and report["final_loss"] < 0.05
    assert report["checks"] and all(report["checks"].values())
    assert abs(report["initial_loss"] / report["ln_vocab"] - 1) < 0.25

    broken = run_cli(capsys, "sanity", "default", "--break-labels", "--json")
    assert broken.code == 1
    verdict = broken.json()
    assert not verdict["passed"] and verdict["stage"] == "generation"
    assert "label shift" in verdict["diagnosis"]
