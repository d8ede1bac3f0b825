"""`ladder sanity` through the command line: on the built-in default study (its real data, prepared through the
cache) it passes; with labels deliberately left unshifted it fails with exit 1, naming the masking / label-shift
stage (on a micro study: the diagnosis itself is proven on a tiny model in tests/model/evaluation/test_sanity.py,
and what this adds is the flag and the exit code, which need no 37 MB corpus)."""

import pytest

from tests.cli_helpers import run_cli
from tests.micro import write_study


@pytest.mark.slow
def test_sanity_passes_on_the_default_study(capsys):
    ok = run_cli(capsys, "sanity", "default", "--json")
    assert ok.code == 0, ok.stderr
    report = ok.json()
    assert report["passed"] and report["final_loss"] < 0.05
    assert report["checks"] and all(report["checks"].values())
    assert abs(report["initial_loss"] / report["ln_vocab"] - 1) < 0.25


def test_break_labels_fails_with_exit_1_and_names_the_label_shift(capsys, tmp_path, tiny_jsonl_corpus):
    spec = write_study(tmp_path / "s.yaml", tiny_jsonl_corpus, name="sanitybreak", sizes=("4K", "8K"))
    broken = run_cli(capsys, "sanity", str(spec), "--break-labels", "--json")
    assert broken.code == 1, broken.stderr
    verdict = broken.json()
    assert not verdict["passed"] and verdict["stage"] == "generation"
    assert verdict["checks"]["loss_below_threshold"]  # copying the input is easy, predicting the next token is not
    assert "label shift" in verdict["diagnosis"]
