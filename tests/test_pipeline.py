"""`ladder run`, the main job, end to end on a micro-study: interrupted with Ctrl-C (SIGINT to its whole
process group, local workers included) and killed with SIGKILL, then run again, it finishes with the same
results as a run that was never disturbed, and ends with a fit and a report."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_helpers import run_cli
from tests.micro import last_step, wait_for, write_study

pytestmark = pytest.mark.slow


def _ladder(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ladder", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        **kw,
    )


def _losses(study: Path) -> dict[str, tuple[float, float]]:
    out = {}
    for rd in sorted((study / "runs").iterdir()):
        res = json.loads((rd / "result.json").read_text())
        out[rd.name] = (res["final_train_loss"], res["final_eval_loss"])
    return out


def test_ladder_run_survives_ctrl_c_and_kill_9(tmp_path, tiny_jsonl_corpus, capsys):
    sizes = ("4K", "6K", "8K", "11K")
    # a few hundred steps a run: long enough to interrupt mid-run twice, short enough to train twice
    kw = dict(sizes=sizes, tokens_per_param=10, checkpoints_per_run=40, executor="local")
    spec = write_study(tmp_path / "s.yaml", tiny_jsonl_corpus, name="main", **kw)
    study = tmp_path / "main"

    # 1. start, let it train a while, then Ctrl-C the whole process group (the terminal's way)
    proc = _ladder("run", str(spec), "--out", str(study), "--parallel", "2", "--skip-sanity")
    runs = study / "runs"
    wait_for(lambda: runs.is_dir() and any(last_step(rd) >= 10 for rd in runs.iterdir()), 240, "training to start")
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    assert "\ninterrupted: run the same command to continue\n" in out, out  # workers may still print after it
    assert not all((rd / "result.json").is_file() for rd in runs.iterdir())

    # 2. run again; this time SIGKILL the main process only, once its workers train again: they go on, and a third
    # run waits for them (a run still queued or training is not submitted twice)
    before = {rd.name: last_step(rd) for rd in runs.iterdir()}
    proc = _ladder("run", str(spec), "--out", str(study), "--parallel", "2", "--skip-sanity")
    wait_for(
        lambda: any(last_step(rd) > before[rd.name] for rd in runs.iterdir()),
        240,
        "the second run's workers to train",
    )
    proc.kill()
    proc.communicate(timeout=60)

    # 3. run to the end
    proc = _ladder("run", str(spec), "--out", str(study), "--parallel", "2", "--skip-sanity")
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out
    assert "submit: 0 submitted" in out  # every run was done or still held by the killed run's live workers
    assert (study / "fit.json").is_file() and (study / "report" / "report.html").is_file()
    jobs = json.loads((study / "jobs.json").read_text())["runs"]
    assert all(len(recs) <= 2 for recs in jobs.values())  # never more than one resubmission per run

    # the undisturbed reference: the same runs trained in one go, one thread each
    ref = tmp_path / "ref"
    assert run_cli(capsys, "plan", spec, "--out", ref).code == 0
    for rd in sorted((ref / "runs").iterdir()):
        assert run_cli(capsys, "train", rd, "--threads", "1").code == 0
    assert _losses(study) == _losses(ref)
