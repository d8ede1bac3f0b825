"""Re-trial 11e: the parts around training (the trainer's progress lines, `ladder eval`, `ladder sanity`, the
experiment trackers): what the terminal says agrees with what the run's files say."""

from __future__ import annotations

import re

import pytest

from ladder.model.training.loop import train
from tests.model.training.tiny_runs import make_spec, tiny_data


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread, as the model tests train (the CPU is shared)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_the_finished_line_gives_the_throughput_result_json_gives(tmp_path, capsys):
    """Without a terminal, `ladder train` ended "finished: 66.24K/66.24K tok (100%), loss 2.8329, 131,618 tok/s" and
    then "done: ... 66,240 tokens in 32s": the rate of the last step alone, 58x what result.json and `ladder status`
    give (2,249 tok/s)."""
    spec = make_spec(steps=20, log_interval=5, eval_interval=10, checkpoint_interval=100)
    run = tmp_path / "study" / "runs" / spec.run_id
    run.mkdir(parents=True)
    (run / "spec.json").write_text(spec.model_dump_json(indent=2))
    result = train(run, dataset=tiny_data(), progress=True)
    lines = capsys.readouterr().out.splitlines()
    finished = next(line for line in lines if " finished: " in line)
    rate = re.search(r"([\d,]+) tok/s", finished)
    assert rate and rate.group(1) == f"{result['tokens_per_s']:,.0f}", (finished, result["tokens_per_s"])


def test_an_unusable_home_costs_no_matplotlib_warnings_before_the_output(tmp_path):
    """With HOME unwritable (a container, a daemon's /nonexistent) `ladder fit` and `ladder report` began with
    matplotlib's "mkdir -p failed for path ..." and "Matplotlib created a temporary cache directory ... it is highly
    recommended to set the MPLCONFIGDIR environment variable" on stderr, before a word of their own."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    home = tmp_path / "a-file"
    home.write_text("")  # a path under a file cannot be made, not even by root
    env = {k: v for k, v in os.environ.items() if k not in ("MPLCONFIGDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")}
    env.update(HOME=str(home / "home"), TMPDIR=str(tmp_path))
    runs, columns = repo / "docs/examples/wandb-runs.csv", "params=n_params,tokens=tokens,loss=eval/loss"
    r = subprocess.run(
        [sys.executable, "-m", "ladder", "fit", "--runs", str(runs), "--columns", columns],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "matplotlib" not in r.stderr.lower() and "mkdir -p failed" not in r.stderr, r.stderr
    assert r.stdout.startswith("loss laws"), r.stdout[:200]
    assert not list(tmp_path.glob("matplotlib-*"))  # the stand-in folder is gone with the process


@pytest.mark.parametrize(
    ("tracking", "words"),
    [
        ({"kind": "wandb", "project": "my team/ladders"}, ["tracking.project", "/"]),
        ({"kind": "wandb", "project": "p" * 129}, ["tracking.project", "128"]),
        ({"kind": "wandb", "tags": ["cpu", ""]}, ["tracking.tags", "1 to 64"]),
        ({"kind": "wandb", "tags": ["t" * 65]}, ["tracking.tags", "1 to 64"]),
    ],
)
def test_a_name_wandb_refuses_is_refused_by_plan_not_by_every_run(tmp_path, capsys, tracking, words):
    """`tracking: {kind: wandb, project: "bad/project name?"}` planned, and each run then warned "could not start
    the wandb tracker (UsageError: Invalid project name ...); the run goes on": a whole ladder trained with its
    tracking off, one warning per run in its log."""
    import yaml

    from tests.cli_helpers import run_cli
    from tests.micro import write_study

    spec = write_study(tmp_path / "s.yaml", tmp_path)
    study = yaml.safe_load(spec.read_text())
    spec.write_text(yaml.safe_dump({**study, "tracking": tracking}))
    r = run_cli(capsys, "plan", spec, "--out", tmp_path / "study", "--no-fit-check")
    assert r.code == 2, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    for word in words:
        assert word in r.stderr, r.stderr
    assert not (tmp_path / "study").exists()


def test_train_on_a_finished_run_says_it_trained_nothing(tmp_path, capsys):
    """`ladder train RUN` on a run that was done said "done: final eval loss 2.8369, train loss 2.8368, 33,024 tokens
    in 6s" in a third of a second: read as a run just trained, where nothing was."""
    from tests.cli_helpers import run_cli

    spec = make_spec(steps=6, log_interval=3, eval_interval=6, checkpoint_interval=100)
    run = tmp_path / "study" / "runs" / spec.run_id
    run.mkdir(parents=True)
    (run / "spec.json").write_text(spec.model_dump_json(indent=2))
    assert train(run, dataset=tiny_data())["status"] == "done"
    r = run_cli(capsys, "train", run)
    assert r.code == 0, r.stderr
    assert r.stdout.startswith("already done, nothing to train: final eval loss "), r.stdout


def test_fit_prints_the_task_forecasts_the_report_shows(tmp_path, capsys):
    """`ladder eval`'s help says "`ladder fit` forecasts the hero's task loss and accuracy"; fit.json and the report's
    task section had ladder_py_ppl at the hero (bits_per_byte 10.7801, 90% 0.3920 - 74.0621), and `ladder fit` in
    the terminal said not a word of it: only a warning about the task it could not fit."""
    import io
    import json

    from rich.console import Console

    from ladder.reports.fits.study.fit_json import validate
    from ladder.reports.summary import print_fit
    from tests.cli_helpers import run_cli

    runs = "docs/examples/wandb-runs.csv"
    columns = "params=n_params,tokens=tokens,loss=eval/loss"
    fit = json.loads(run_cli(capsys, "fit", "--runs", runs, "--columns", columns, "--bootstrap", "5", "--json").stdout)
    fit["tasks"] = {
        "available": True,
        "tasks": {
            "ladder_py_ppl": {
                "task": "ladder_py_ppl", "loss_metric": "bits_per_byte", "n_runs": 4,
                "hero": {"loss": 10.780110289817893, "loss_interval": [0.3919926193603034, 74.0620605080615]},
            },
            "qa": {
                "task": "qa", "loss_metric": "bpb", "acc_metric": "acc", "n_runs": 6,
                "hero": {"loss": 0.91234, "loss_interval": [0.8, 1.1], "acc": 0.61234, "acc_interval": [0.5, 0.7]},
            },
        },
        "errors": {"nl": "task 'nl': the step-2 sigmoid has 4 parameters and needs at least 5 runs"},
    }  # fmt: skip
    buf = io.StringIO()
    print_fit(validate(fit), Console(file=buf, width=400, color_system=None))
    said = buf.getvalue()
    assert "ladder_py_ppl: bits_per_byte 10.7801 (90% [0.3920, 74.0621]) at the hero" in said, said
    assert "qa: bpb 0.9123 (90% [0.8000, 1.1000]), acc 0.612 (90% [0.500, 0.700]) at the hero" in said, said
