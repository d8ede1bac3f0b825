"""retrial11: `ladder eval STUDY --executor local` stopped by a signal that reaches the command alone (`kill PID`,
`kill -INT PID`, a supervisor that signals the process it started, not its group) said its one line, "stopped by
SIGTERM: run the same command to continue", while its lm-eval workers went on evaluating and finished after it:
the same command, run as told, then raced a still-running worker writing the same run's lm_eval/ folder. (A
terminal's Ctrl-C, which reaches the whole process group, did stop them.) The command now stops the workers it
started before it says its line: none outlives it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.micro import require_slurm, wait_for, write_study

SHIPPED = Path(__file__).resolve().parents[1] / "model" / "evaluation" / "tasks"


def _ladder(*argv) -> list[str]:
    return [sys.executable, "-m", "ladder", *map(str, argv)]


@pytest.fixture(scope="module")
def finished(tmp_path_factory, tiny_jsonl_corpus) -> tuple[Path, Path]:
    """A one-run study trained to its end (a real model/ for lm-eval to load, in seconds), and a folder holding an
    offline task long enough (the shipped perplexity task's snippets 200 times over: about half a minute on one
    core) that a worker left behind is still evaluating when the test looks for it."""
    root = tmp_path_factory.mktemp("evalstop")
    spec = write_study(root / "s.yaml", tiny_jsonl_corpus, name="evalstop", sizes=("4K",), tokens_per_param=4)
    study = root / "study"
    for argv in (("plan", spec, "--out", study, "--no-fit-check"), ("submit", study, "--executor", "debug")):
        r = subprocess.run(_ladder(*argv), capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, (argv, r.stdout, r.stderr)
    tasks = root / "tasks"
    tasks.mkdir()
    shutil.copy(SHIPPED / "utils.py", tasks / "utils.py")  # the YAML's load_local reads data next to it
    (tasks / "slow.jsonl").write_text((SHIPPED / "data" / "py_ppl.jsonl").read_text(encoding="utf-8") * 200)
    yaml = (SHIPPED / "ladder_py_ppl.yaml").read_text(encoding="utf-8")
    yaml = yaml.replace("task: ladder_py_ppl", "task: ladder_slow_ppl").replace("data/py_ppl.jsonl", "slow.jsonl")
    (tasks / "ladder_slow_ppl.yaml").write_text(yaml.replace("tag: ladder_offline\n", ""))
    return study, tasks


def _in_group(pgid: int) -> list[psutil.Process]:
    """The live processes of a process group: the command's session, which it leads, holds its workers."""
    found = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (OSError, psutil.Error):
            continue
    return found


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT"])
def test_a_signal_to_the_command_alone_stops_its_eval_workers(finished, tmp_path, name):
    signum = getattr(signal, name)
    study = Path(shutil.copytree(finished[0], tmp_path / "study"))
    argv = ("eval", study, "--executor", "local", "--device", "cpu", "--tasks", "ladder_slow_ppl",
            "--include-path", finished[1])  # fmt: skip
    proc = subprocess.Popen(_ladder(*argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    try:
        ladder = psutil.Process(proc.pid)
        # a worker: the job's controller (a child of the command) and the task it started, which evaluates
        wait_for(lambda: any(c.children() for c in ladder.children()), 120, "an eval worker to start")
        time.sleep(2)  # the worker is under way: importing lm-eval and torch, or evaluating
        os.kill(proc.pid, signum)  # the command alone, not its process group
        out, errs = proc.communicate(timeout=60)
        said = "interrupted" if signum == signal.SIGINT else f"stopped by {name}"
        assert proc.returncode == 128 + signum, (proc.returncode, errs[-3000:])
        assert errs.strip().splitlines() == [f"{said}: run the same command to continue"], errs[-3000:]
        assert "Traceback" not in out, out[-3000:]
        deadline = time.monotonic() + 5
        while _in_group(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [(p.pid, " ".join(p.cmdline())[:160]) for p in _in_group(proc.pid)]
        assert not left, f"eval workers outlived the command: {left}"
        # nothing written after the command ended, and nothing half-written: the run has no results for the task
        assert not list(study.rglob("results_ladder_slow_ppl.json"))
        assert not [p for p in study.rglob("*") if p.name.endswith((".tmp", ".part"))]
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever a failing test left behind
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)


def _slurm_eval_jobs(name: str) -> list[str]:
    r = subprocess.run(["squeue", "-h", "-n", name, "-o", "%i %T"], capture_output=True, text=True, timeout=30)
    return r.stdout.split("\n")[:-1] if r.returncode == 0 else ["squeue failed: " + r.stderr]


def test_a_signal_to_the_command_alone_cancels_its_slurm_eval_jobs(finished, tmp_path):
    """SLURM's eval jobs are recorded nowhere for the next command to wait for, so the stopped command cancels
    them; otherwise the rerun it asks for would race them."""
    require_slurm()
    study = Path(shutil.copytree(finished[0], tmp_path / "evalstop-slurm"))
    name = f"ladder-eval-{study.name}"
    argv = ("eval", study, "--executor", "slurm", "--device", "cpu", "--tasks", "ladder_slow_ppl",
            "--include-path", finished[1])  # fmt: skip
    proc = subprocess.Popen(_ladder(*argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    try:
        wait_for(lambda: any("RUNNING" in j for j in _slurm_eval_jobs(name)), 120, "the eval job to run")
        os.kill(proc.pid, signal.SIGTERM)
        out, errs = proc.communicate(timeout=60)
        assert proc.returncode == 143, (proc.returncode, errs[-3000:])
        assert errs.strip().splitlines() == ["stopped by SIGTERM: run the same command to continue"], errs[-3000:]
        wait_for(lambda: not _slurm_eval_jobs(name), 30, "the eval job to leave the queue")
        assert not list(study.rglob("results_ladder_slow_ppl.json"))
    finally:
        subprocess.run(["scancel", "-n", name], capture_output=True, timeout=30)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)
