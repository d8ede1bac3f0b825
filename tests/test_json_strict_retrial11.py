"""Issue 28, retrial 11: every JSON file the tool writes parses with a strict parser (no NaN/Infinity tokens, which
jq, JavaScript and most tools refuse). The shared writers (``layout.atomic_write_json``, ``layout.append_jsonl``)
wrote a NaN as the bare token ``NaN``: an evaluation that overflowed left it in metrics.jsonl (the trainer's own
result.json already says null there), a sanity check whose loss was not finite left it in sanity.json, and a
resume (or a branch copying its trunk's curve) wrote an older NaN in metrics.jsonl back as it was."""

from __future__ import annotations

import json

from ladder import layout
from tests.cli_helpers import run_cli
from tests.fake_runs import outcomes


def strict(text: str):
    return json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(f"{c} is not JSON")))


def test_a_metrics_record_with_a_nonfinite_eval_loss_is_written_null(tmp_path, capsys):
    """The trainer appends each eval as it comes (``{"eval_loss": nan}`` when the eval overflowed); the line was
    ``"eval_loss": NaN``. Written null, `ladder status` reads it as no loss, in the text and --json alike."""
    by = outcomes(tmp_path)
    rd = layout.StudyDir(tmp_path).run(by["interrupted"].run_id)
    step = max(json.loads(line)["step"] for line in rd.metrics.read_text().splitlines())
    layout.append_jsonl(rd.metrics, {"kind": "eval", "step": step, "eval_loss": float("nan"),
                                     "eval_loss_novel": float("inf")})  # fmt: skip
    last = strict(rd.metrics.read_text().splitlines()[-1])
    assert last["eval_loss"] is None and last["eval_loss_novel"] is None, last
    r = run_cli(capsys, "status", tmp_path, "--json")
    assert r.code == 0, r.stderr
    assert "Traceback" not in r.stderr
    strict(r.stdout)
    text = run_cli(capsys, "status", tmp_path)
    assert text.code == 0 and "nan" not in text.stdout.lower(), text.stdout


def test_a_json_file_with_a_nonfinite_number_is_written_null(tmp_path):
    """result.json, plan.json, jobs.json and sanity.json are written by ``atomic_write_json``: a NaN or inf
    reaching it (numpy's too) is written null, never a token a strict parser refuses."""
    import numpy as np

    path = tmp_path / "x.json"
    layout.atomic_write_json(path, {"a": float("nan"), "b": [float("-inf"), 1.5], "c": np.float32("nan"), "d": 2})
    assert strict(path.read_text()) == {"a": None, "b": [None, 1.5], "c": None, "d": 2}


def test_the_sanity_verdict_ladder_run_keeps_is_strict_json(tmp_path, monkeypatch):
    """`ladder run` keeps the sanity check's verdict in sanity.json; a check whose model gave a non-finite loss
    (what the check is there to catch) wrote ``"initial_loss": NaN`` and ``"losses": [NaN, ...]``."""
    from ladder import pipeline
    from ladder.model.evaluation import sanity as sanity_mod
    from ladder.studies.spec import parse_study
    from tests.hero_fixture import study_dict

    class Report:
        def to_dict(self):
            return {"passed": False, "initial_loss": float("nan"), "losses": [float("nan"), float("inf")]}

    monkeypatch.setattr(sanity_mod, "run_sanity", lambda prepared, shape, **kw: Report())
    verdict = pipeline.sanity(parse_study(study_dict()), tmp_path, prepared=None)
    assert verdict["passed"] is False
    kept = strict((tmp_path / pipeline.SANITY).read_text())
    assert kept["initial_loss"] is None and kept["losses"] == [None, None], kept


def test_a_resume_writes_back_an_older_nan_in_metrics_null(tmp_path):
    """A resume cuts metrics.jsonl back to its checkpoint by rewriting it; a NaN an older version wrote in a
    record was written back as the bare token again."""
    from ladder.model.training.run_files import trim_metrics

    rd = layout.RunDir(tmp_path)
    rd.metrics.write_text(
        '{"kind": "eval", "step": 2, "eval_loss": NaN}\n{"kind": "train", "step": 4, "loss": Infinity}\n'
    )
    trim_metrics(rd, 3)
    assert [strict(line) for line in rd.metrics.read_text().splitlines()] == [
        {"kind": "eval", "step": 2, "eval_loss": None}
    ]
