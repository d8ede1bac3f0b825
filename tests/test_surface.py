"""What scripts and logs rely on: help that describes every option (booleans as --flag/--no-flag, paragraphs
not broken mid-sentence), JSON where a script wants it, exit codes that say whether runs failed, progress lines
where there is no terminal, plans that say what they adjusted, and tables that fit 120 columns."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import typer.main
import yaml

from tests.cli_helpers import run_cli
from tests.fake_runs import status_row


def _leaf_commands():
    from ladder.cli import _polish, app

    root = typer.main.get_command(app)
    _polish(root)

    def walk(cmd, path=()):
        subs = getattr(cmd, "commands", None)
        if subs is None:
            yield path, cmd
            return
        for name, sub in subs.items():
            yield from walk(sub, (*path, name))

    return list(walk(root))


def test_every_option_is_described_and_every_boolean_is_a_flag_pair():
    for path, cmd in _leaf_commands():
        for p in cmd.params:
            where = f"ladder {' '.join(path)} {p.opts}"
            assert (p.help or "").strip(), f"{where} has no help"
            if getattr(p, "is_flag", False) and p.opts != ["--tied"]:
                assert p.secondary_opts == [f"--no-{p.opts[0][2:]}"], where
        assert cmd.help and "\n" not in cmd.help.split("\n\n")[0], f"ladder {' '.join(path)}: a broken first line"


def test_help_shows_no_bool_type_and_reflows_paragraphs(capsys):
    for path, _ in _leaf_commands():
        r = run_cli(capsys, *path, "--help")
        assert r.code == 0 and "<bool>" not in r.stdout, path
    text = run_cli(capsys, "plan", "--help").stdout
    # a docstring's line break mid-sentence would leave a short line followed by a lower-case continuation
    assert "wall time and memory, and the ladder's cost" in " ".join(text.replace("│", " ").split())
    from ladder.cli import reflow

    assert reflow("One.\n\nA long\nsentence.\n\nExample:\n  ladder run\n  ladder plan") == \
        "One.\n\nA long sentence.\n\nExample:\n  ladder run\n  ladder plan"  # fmt: skip


def test_studies_list_and_show_print_json(capsys):
    from ladder.plan.planner import expand
    from ladder.studies import load_study

    rows = {s["name"]: s for s in run_cli(capsys, "studies", "list", "--json").json()["studies"]}
    assert (
        rows["default"]["runs"] == len(expand(load_study("default")).runs) == 37
    )  # 12 trunks, 24 branches, 1 run at the top rung
    assert all(isinstance(s["runs"], int) and s["runs"] > 0 for s in rows.values())
    shown = run_cli(capsys, "studies", "show", "default", "--json")
    assert shown.code == 0 and shown.json() == yaml.safe_load(run_cli(capsys, "studies", "show", "default").stdout)


def _table_rows(text: str) -> list[str]:
    """The header, its rule and the rows of a plan or status table (a row starts with a run id; a wrapped cell
    continues on a line that starts with blanks)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("run "))
    rows = lines[start : start + 2]
    for line in lines[start + 2 :]:
        if not (re.match(r"[0-9a-f]{12} ", line) or line[:1] == " "):
            break
        rows.append(line)
    return rows


def test_tables_fit_120_columns_in_a_log(capsys, tmp_path):
    from tests.fake_runs import outcomes

    for study in ("default", "chinchilla", "batch-lr", "depth-vs-width"):
        rows = _table_rows(run_cli(capsys, "plan", study, "--dry-run").stdout)
        assert len(rows) > 3 and max(map(len, rows)) <= 120, study
        assert "…" not in "".join(rows), study  # nothing cut short
    root = tmp_path / "study"
    outcomes(root)
    text = run_cli(capsys, "status", root).stdout
    rows = _table_rows(text)
    assert len(rows) > 12 and max(map(len, rows)) <= 120 and "…" not in "".join(rows)
    assert "DataError: no such corpus /x" in text  # errors on their own lines, never cut


def test_status_check_exits_1_naming_the_failed_runs(capsys, tmp_path):
    from tests.fake_runs import finish, outcomes, plan_micro

    root = tmp_path / "study"
    by = outcomes(root)
    r = run_cli(capsys, "status", root, "--check")
    assert r.code == 1
    for name in ("crashed", "raised", "diverged", "deleted_result"):
        assert by[name].run_id in r.stderr
    assert run_cli(capsys, "status", root).code == 0
    assert run_cli(capsys, "status", root, "--check", "--json").code == 1
    clean = tmp_path / "clean"
    from ladder import layout

    for spec in plan_micro(clean)[:2]:
        finish(layout.StudyDir(clean), spec)
    assert run_cli(capsys, "status", clean, "--check").code == 0


class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_status_lines_print_on_a_change_and_about_once_a_minute():
    from rich.console import Console

    from ladder.cli.status import StatusLines

    def row(state, done, tps=None):
        return status_row(state, done, tokens_per_s=tps)

    console = Console(record=True, width=120, file=open("/dev/null", "w"))
    clock = _Clock()
    lines = StatusLines(console, "training: s", every_s=60, clock=clock)
    lines([row("queued", 0), row("queued", 0)])
    clock.t = 5
    lines([row("running", 100, 50.0), row("queued", 0)])  # a state changed
    clock.t = 30
    lines([row("running", 400, 50.0), row("queued", 0)])  # nothing new, under a minute
    clock.t = 70
    lines([row("running", 900, 50.0), row("queued", 0)])  # a minute since the last line
    printed = console.export_text().splitlines()
    assert len(printed) == 3
    # the ETA: from the measured rate (ladder.books.run_status.EtaClock; tests/test_progress_numbers.py)
    assert "training: s: 0/2 done, 1 queued, 1 running; 900/2K tokens (45%), ETA " in printed[-1]


def test_the_plan_says_what_it_rounded_and_warns_about_a_costly_ladder():
    from ladder.plan.planner import expand
    from ladder.studies.spec import parse_study

    spec = {
        "name": "t",
        "data": {"seq_len": 64},
        "model": {"vocab_size": 256, "head_dim": 16},
        "ladder": {"sizes": ["10K", "20K"]},
        "training": {"batch_tokens": 1000},
        "hero": {"params": "12K"},
    }
    plan = expand(parse_study(spec))
    assert not any(n.startswith("batch") for n in plan.notes)  # 1,000 -> 1,024 tokens: within 10%, no word
    # a 12K hero: the ladder costs more, said as a multiple ("2.1x the hero's compute"), as fit and the report do
    [cost] = [w for w in plan.warnings if "the hero's compute" in w]
    assert re.search(r"the ladder costs \d+(\.\d+)?x the hero's compute", cost) and "%" not in cost, cost
    spec["training"] = {"batch_tokens": 64}
    note = next(n for n in expand(parse_study(spec)).notes if n.startswith("batch"))
    assert "at least batch_min_sequences 8" in note and "10K 64 -> 512" in note  # 8 sequences of 64
    spec["ladder"] = {"sizes": ["2K", "20K"]}
    notes = expand(parse_study(spec)).notes
    assert any(n.startswith("sizes more than 10% from their targets") and "2K -> 2.608K (+30%)" in n for n in notes)


def test_train_prints_json_and_exits_1_unless_done(tmp_path, capsys, monkeypatch, tiny_jsonl_corpus):
    from tests.micro import write_study

    spec = write_study(tmp_path / "s.yaml", tiny_jsonl_corpus, sizes=("4K",))
    assert run_cli(capsys, "plan", spec, "--out", tmp_path / "st", "--no-fit-check").code == 0
    run = next((tmp_path / "st" / "runs").iterdir())
    monkeypatch.setenv("LADDER_FORCE_NAN_AT_STEP", "2")
    r = run_cli(capsys, "train", run, "--json", "--threads", "1")
    assert r.code == 1 and r.json()["status"] == "diverged" and r.json()["diverged_at_step"] == 2


def test_train_prints_its_losses_in_the_digits_status_gives(tmp_path, capsys, tiny_jsonl_corpus):
    """`ladder train RUN` said "final eval loss 1.8651792122564075" where status shows 1.8652."""
    import re

    from tests.micro import write_study

    spec = write_study(tmp_path / "s.yaml", tiny_jsonl_corpus, sizes=("4K",))
    assert run_cli(capsys, "plan", spec, "--out", tmp_path / "st", "--no-fit-check").code == 0
    run = next((tmp_path / "st" / "runs").iterdir())
    r = run_cli(capsys, "train", run, "--threads", "1")
    assert r.code == 0, r.stderr
    assert re.search(
        r"done: final eval loss \d+\.\d{4}, train loss \d+\.\d{4} \(mean of the last 10% of steps\), ", r.stdout
    ), r.stdout
    # the progress line's closing loss is the last step's, a different figure: it says so, not a bare "loss"
    assert re.search(r"finished: .*, last step loss \d+\.\d{4}, ", r.stdout), r.stdout


def test_ladder_run_exits_1_naming_the_failed_runs_and_the_fit(tmp_path, capsys, monkeypatch, tiny_jsonl_corpus):
    from tests.micro import write_study

    spec = write_study(tmp_path / "s.yaml", tiny_jsonl_corpus, sizes=("4K", "6K"))
    monkeypatch.setenv("LADDER_FORCE_NAN_AT_STEP", "2")  # every run diverges at its second step
    args = ("--out", tmp_path / "st", "--executor", "debug", "--skip-sanity", "--no-fit-check", "--json")
    r = run_cli(capsys, "run", spec, *args)  # two sizes: no fit (--no-fit-check), and the runs diverge
    assert r.code == 1, r.stderr
    out = r.json()
    assert out["ok"] is False and len(out["runs_failed"]) == 2 and out["fit_error"]
    for run_id in out["runs_failed"]:
        assert run_id in r.stderr and "diverged" in out["failures"][run_id]
    assert "no fit" in r.stderr
    assert "> plan:" in r.stderr and "> train: 0 of 2 runs done" in r.stderr  # progress on stderr with --json
    assert re.search(r"report\.html", json.dumps(out))  # the report is written all the same


def _fake_submit(trained: list[str]):
    """A stand-in for ``ladder.jobs.submit.submit``: the runs "train" in a thread of this process, one after
    another, writing the files a run leaves (tests/fake_runs.py: its lock held, metrics in four slices, then
    model/ and a result.json whose loss follows a Chinchilla law, so that the fit succeeds), under a local job
    record whose process (this one) is alive, so that they show as queued, running and done."""
    import threading
    import time

    from ladder import layout
    from ladder.books import job_records
    from ladder.books.run_lock import run_lock
    from ladder.jobs.submit import SubmitResult
    from ladder.plan.planner import read_plan
    from tests.fake_runs import finish, metrics_lines

    def submit(study_dir, executor, **_kw):
        sd = layout.StudyDir(Path(study_dir))
        _, specs = read_plan(sd.path)
        with job_records.editing(sd) as book:
            for s in specs:
                book.setdefault(s.run_id, []).append(
                    job_records.JobRecord(
                        executor="local", job_ids=[str(os.getpid())], folder="fake", submitted_at=job_records.now()
                    )
                )

        def train_all():
            for s in specs:
                rd = sd.run(s.run_id)
                with run_lock(rd) as held:
                    assert held
                    for k in range(1, 5):
                        # atomically: a reader polling mid-write saw a truncated file and a progress share fall
                        layout.atomic_write_text(rd.metrics, "".join(metrics_lines(s, s.steps * k // 5)))
                        time.sleep(0.15)
                    finish(sd, s, 1.7 + 40.0 / s.params**0.34 + 40.0 / s.tokens**0.28)
                trained.append(s.run_id)

        threading.Thread(target=train_all, daemon=True).start()
        return SubmitResult(submitted=[s.run_id for s in specs], executor=executor.kind)

    return submit


def test_progress_lines_without_a_terminal_while_runs_train(tmp_path, capsys, monkeypatch, tiny_jsonl_corpus):
    """`ladder run` in a log (no terminal) prints a progress line on a change and about once a minute while the
    runs train, each stage's line, and exits 0 with the fit. On fake runs, with the data and the report stubbed:
    local workers training a study, its data prepared and its report rendered by `ladder run` are
    tests/test_pipeline.py's (and test_ladder_run_exits_1_naming_the_failed_runs_and_the_fit's, above)."""
    from types import SimpleNamespace

    import ladder.cli.status as status_cli
    from ladder import pipeline
    from ladder.books import run_status
    from ladder.jobs import submit as submit_mod
    from ladder.reports import render
    from tests.micro import write_study

    monkeypatch.setattr(status_cli, "PROGRESS_EVERY_S", 0.5)
    trained: list[str] = []
    monkeypatch.setattr(submit_mod, "submit", _fake_submit(trained))
    waited = run_status.wait
    monkeypatch.setattr(
        run_status,
        "wait",
        lambda study_dir, *, poll_s, on_update=None, timeout_s=None: waited(
            study_dir, poll_s=0.1, on_update=on_update, timeout_s=60
        ),
    )
    monkeypatch.setattr(
        pipeline,
        "prepare",
        lambda study, **kw: SimpleNamespace(train_tokens=10_000, val_tokens=1_000, root=tmp_path / "data"),
    )
    monkeypatch.setattr(render, "render_report", lambda study_dir: {"html": Path(study_dir) / "report.html"})
    # four sizes: the fit needs them, and `ladder run` exits 1 when the fit fails
    spec = write_study(
        tmp_path / "s.yaml", tiny_jsonl_corpus, sizes=("4K", "6K", "8K", "11K"), tokens_per_param=20, executor="local"
    )
    r = run_cli(capsys, "run", spec, "--out", tmp_path / "st", "--parallel", "1", "--skip-sanity")
    assert r.code == 0, r.stderr
    assert len(trained) == 4
    progress = [line for line in r.stdout.splitlines() if " training: micro: " in line]
    assert len(progress) >= 3 and any("1 running" in line for line in progress), r.stdout
    shares = [int(re.search(r"\((\d+)%\)", line).group(1)) for line in progress]
    assert shares == sorted(shares) and shares[-1] == 100
    assert progress[-1].split(": ", 2)[2].startswith("4/4 done")
    for stage in ("> plan:", "> data:", "> submit:", "> train:", "> collect:", "> fit:", "> report:"):
        assert stage in r.stdout, stage


EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"
WANDB_COLUMNS = "params=config.n_params,tokens=config.tokens,loss=summary.eval/loss"


def test_fit_reads_a_wandb_runs_export_as_json_lines_or_the_uis_csv(capsys):
    from ladder.reports.fits import read_runs_file

    table = read_runs_file(EXAMPLES / "wandb-runs.jsonl", columns=WANDB_COLUMNS)
    assert list(table.columns) == ["params", "tokens", "loss", "status", "run_id"]  # state and name come along
    assert table["status"].tolist().count("crashed") == 1 and table["run_id"].iloc[0] == "n2M-x10"
    fits = {}
    for name in ("wandb-runs.jsonl", "wandb-runs.csv"):  # the CSV's columns lack the config./summary. prefix
        r = run_cli(
            capsys,
            "fit",
            "--runs",
            EXAMPLES / name,
            "--columns",
            WANDB_COLUMNS,
            "--bootstrap",
            "10",
            "--predict",
            "1e13:2e14",
            "--json",
        )
        assert r.code == 0, r.stderr
        fits[name] = d = r.json()
        assert d["loss"]["n_runs"] == 15 and [e["run"] for e in d["excluded"]] == ["n32M-x80"]
        # a forecast 3e5x beyond the largest run says how far it reaches past what the rollout tested
        far = next(p for p in d["predictions"] if p["label"] == "1e13:2e14")
        assert far["beyond_reach"] and far["beyond_tested"] and far["params_x"] > 1e5
        assert any(
            w.startswith("prediction 1e13:2e14: ") and "beyond what the rollout tested" in w for w in d["warnings"]
        )
    assert fits["wandb-runs.jsonl"]["loss"]["forms"] == fits["wandb-runs.csv"]["loss"]["forms"]
    human = run_cli(
        capsys,
        "fit",
        "--runs",
        EXAMPLES / "wandb-runs.csv",
        "--columns",
        "params=n_params,tokens=tokens,loss=eval/loss",
        "--bootstrap",
        "10",
        "--predict",
        "1e13:2e14",
    )
    assert human.code == 0 and "(beyond tested)" in human.stdout and "excluded n32M-x80 (crashed)" in human.stdout
