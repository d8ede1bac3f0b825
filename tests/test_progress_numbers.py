"""Progress numbers you can trust (issue 28), on fake runs (no training):

- throughput has one definition, tokens trained / seconds inside training steps, in result.json, in each train
  record of metrics.jsonl and so in `ladder status`; status shows a finished run's result's number, and a seed
  and a budget column that tell replicates apart;
- the ETA of `ladder run`'s progress lines comes from each run's measured rate of work by its size (FLOPs over
  wall time: small models turn fewer FLOPs per second; a branch its own steps) and moves smoothly when runs of
  other sizes start and end.
"""

from __future__ import annotations

import contextlib
import json
import os

import pytest

from ladder import layout
from ladder.books.run_lock import run_lock
from ladder.books.run_status import EtaClock, study_status
from tests.cli_helpers import run_cli
from tests.fake_runs import done_result, metrics_lines, plan_micro, record_job, status_row


def test_status_shows_the_throughput_result_json_gives(tmp_path, capsys):
    root = tmp_path / "s"
    specs = plan_micro(root)
    sd = layout.StudyDir(root)
    spec = specs[0]
    rd = sd.run(spec.run_id)
    # the last log interval ran fast (11,289 tok/s); the run as a whole, compile included, 2,449 tok/s
    lines = [json.loads(x) for x in metrics_lines(spec, spec.steps)]
    for rec in lines:
        if rec["kind"] == "train":
            rec["tokens_per_s"] = 11289.0
    rd.metrics.write_text("".join(json.dumps(r) + "\n" for r in lines))
    layout.atomic_write_json(rd.result, {**done_result(spec, 3.5), "tokens_per_s": 2449.0})
    rows = {r.run_id: r for r in study_status(root)}
    assert rows[spec.run_id].tokens_per_s == 2449.0
    r = run_cli(capsys, "status", root, "--json")
    assert next(x for x in r.json()["runs"] if x["run_id"] == spec.run_id)["tokens_per_s"] == 2449.0
    human = run_cli(capsys, "status", root)
    assert "2,449" in human.stdout and "11,289" not in human.stdout


def test_status_has_seed_and_budget_columns(tmp_path, capsys):
    from ladder.plan.planner import expand, write_plan
    from ladder.studies.spec import parse_study

    study = parse_study(
        {
            "name": "reps",
            "data": {"seq_len": 32, "validation_tokens": 1024},
            "model": {"vocab_size": 320, "head_dim": 16, "ffn_multiple": 8, "aspect_ratio": 16},
            "ladder": {
                "sizes": ["4K", "8K", "16K"],
                "tokens_per_param": 10,
                "budgets": [1, 2],
                "replicates": {"sizes": ["8K"], "seeds": [1]},
            },
            "training": {"batch_min_sequences": 8},
            "hero": {"params": "1M"},
            "sanity_check": False,
        }
    )
    root = tmp_path / "reps"
    write_plan(expand(study), root)
    rows = study_status(root)
    assert sorted({r.seed for r in rows}) == [0, 1]
    r = run_cli(capsys, "status", root, "--json")
    assert {x["seed"] for x in r.json()["runs"]} == {0, 1}
    human = run_cli(capsys, "status", root)
    header = next(line for line in human.stdout.splitlines() if line.lstrip().startswith("run "))
    # the planned tokens, headed "tokens": "budget" read as the study's 2x budgets beside 82.94K
    assert " seed " in header and " tokens " in header and "budget" not in header
    table = [line for line in human.stdout.splitlines() if line.startswith(tuple(r.run_id for r in rows))]
    assert len(table) == len(rows) and max(len(line.rstrip()) for line in table) <= 120


def test_the_trainer_writes_one_throughput():
    """result.json's tokens_per_s and each train record's are :func:`throughput` of the trainer's books."""
    import inspect

    from ladder.model.training import loop, result

    assert result.throughput({"tokens_trained": 4898, "train_time_s": 2.0}) == 2449.0
    assert result.throughput({"tokens_trained": 0, "train_time_s": 0.0}) is None
    source = inspect.getsource(loop)
    assert '"tokens_per_s": tps' in source and "tps = throughput(st)" in source
    assert "tps = throughput(st)" in inspect.getsource(result.base_result)


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _simulate(root, flops_per_s, poll_s: float, eta_at, largest_first: bool = False):
    """Train the micro-study's runs one after another, each at its rate of FLOPs per second ``flops_per_s(spec)``
    (a number: one rate for every size; a small model's tokens per second are many times a large one's), writing
    the files a run leaves; at each poll, ask ``eta_at(t, rows)``. Returns [(t, eta, true time left)]."""
    rate = flops_per_s if callable(flops_per_s) else (lambda spec: flops_per_s)
    specs = plan_micro(root)
    sd = layout.StudyDir(root)
    for s in specs:  # submitted, as `ladder run` does before it waits: queued until they run
        record_job(sd, s.run_id, cancelled=False, job_id=str(os.getpid()))
    order = sorted(specs, key=lambda s: -s.own_flops) if largest_first else specs
    spans, t0 = {}, 0.0
    for s in order:
        spans[s.run_id] = (t0, t0 + s.own_flops / rate(s))
        t0 = spans[s.run_id][1]
    total = t0
    finished: set[str] = set()
    out = []
    t = poll_s
    while t < total:
        with contextlib.ExitStack() as stack:
            for s in specs:
                (a, b), rd = spans[s.run_id], sd.run(s.run_id)
                if t >= b and s.run_id not in finished:
                    rd.metrics.write_text("".join(metrics_lines(s, s.steps)))
                    layout.atomic_write_json(
                        rd.result,
                        {**done_result(s, 4.0), "tokens_per_s": rate(s) / s.flops_per_token, "wall_time_s": b - a},
                    )
                    finished.add(s.run_id)
                elif a <= t < b:
                    k = int((t - a) / (b - a) * s.steps) // s.log_interval * s.log_interval
                    recs = [json.loads(x) for x in metrics_lines(s, k)]
                    for rec in recs:
                        if rec["kind"] == "train":
                            rec["tokens_per_s"] = rate(s) / s.flops_per_token
                            rec["elapsed_s"] = rec["step"] / s.steps * (b - a)
                    rd.metrics.write_text("".join(json.dumps(r) + "\n" for r in recs))
                    assert stack.enter_context(run_lock(rd))
            rows = study_status(root)
            out.append((t, eta_at(t, rows), total - t))
        t += poll_s
    return out


def _eta_clock_at():
    clock = _Clock()
    eta = EtaClock(clock=clock)

    def at(t, rows):
        clock.t = t
        return eta(rows)

    return at


def _far_off(seen, within: float):
    """Past the first tenth: the polls whose ETA is more than ``within`` (and half a minute) off the time left."""
    late = [(t, e, truth) for t, e, truth in seen if t > 0.1 * seen[-1][0] and truth > 20]
    return late, [
        (round(t), round(e or -1), round(truth))
        for t, e, truth in late
        if e is None or abs(e - truth) > within * truth + 30
    ]


def test_the_eta_comes_from_the_measured_rate_and_moves_smoothly(tmp_path):
    seen = _simulate(tmp_path / "s", 2e8, poll_s=2.0, eta_at=_eta_clock_at())
    assert len(seen) > 100
    # within 25% of the true time left, and never moving by more than 5% of itself besides the clock's own tick
    # from one poll to the next
    late, bad = _far_off(seen, 0.25)
    assert not bad, bad[:20]
    for (t1, e1, _), (t2, e2, _) in zip(late, late[1:]):
        assert abs(e2 - e1) <= 0.05 * e1 + (t2 - t1), (t1, e1, e2)


def test_the_eta_knows_that_small_models_turn_fewer_flops_per_second(tmp_path):
    """The main job trains its largest runs first, then many small ones that turn a fraction of the FLOPs per
    second (on 2 CPU cores: 3e10 at 1.8M FLOPs per token, 4e9 at 68K). The old clock took the study's FLOP rate
    from the runs running so far and said "ETA 58s" four minutes before the end, "ETA 1s" one minute before."""
    per_token = {s.run_id: s.flops_per_token for s in plan_micro(tmp_path / "sizes")}
    top = max(per_token.values())

    def flops_per_s(spec):  # FLOP rate ~ (FLOPs per token)^0.7, as the main job measured
        return 2e8 * (spec.flops_per_token / top) ** 0.7

    assert top / min(per_token.values()) > 3, "the micro-study's sizes are too alike to tell the clocks apart"
    seen = _simulate(tmp_path / "s", flops_per_s, poll_s=2.0, eta_at=_eta_clock_at(), largest_first=True)
    _, bad = _far_off(seen, 0.3)
    assert not bad, bad[:20]


def test_the_old_eta_from_summed_tokens_per_second_jumps(tmp_path):
    """What the progress line did before: tokens left / tokens per second of the runs running now. With a small
    run running the ETA is several times what it is with a large one: the test above would fail on it."""
    from ladder.books.run_status import totals

    def at(t, rows):
        tot = totals(rows)
        rate = sum(r.tokens_per_s or 0.0 for r in rows if r.state == "running")
        return (tot["tokens_planned"] - tot["tokens_done"]) / rate if rate else None

    seen = _simulate(tmp_path / "s", 2e8, poll_s=5.0, eta_at=at)
    ratios = [e / truth for t, e, truth in seen if e and truth > 20]
    assert max(ratios) / min(ratios) > 1.5


def test_progress_lines_print_the_eta_of_the_clock():
    from rich.console import Console

    from ladder.cli.status import StatusLines

    def row(state, done, spent, elapsed):
        return status_row(state, done, tokens_per_s=50.0, flops_spent=spent, elapsed_s=elapsed)

    console = Console(record=True, width=120, file=open("/dev/null", "w"))
    clock = _Clock()
    lines = StatusLines(console, "training: s", every_s=0, clock=clock)
    lines([row("running", 0, 0.0, None)])
    for t in range(1, 6):
        clock.t = 2.0 * t
        lines([row("running", 100 * t, 600.0 * t, 2.0 * t)])  # 300 FLOPs/s: 50 tokens/s of 6 FLOPs each
    printed = console.export_text().splitlines()
    assert printed[-1].endswith("500/1K tokens (50%), ETA 10s")  # 3,000 FLOPs left at 300 FLOPs/s


def test_status_writes_sizes_and_compute_in_human_units(tmp_path, capsys):
    """Tokens as 41.47K / 1.378M and compute as 2.42e9 FLOPs, as the report writes them (not 2.42e+09)."""
    import re

    from tests.fake_runs import finish

    root = tmp_path / "s"
    specs = plan_micro(root)
    finish(layout.StudyDir(root), specs[0])
    human = run_cli(capsys, "status", root)
    assert human.code == 0, human.stderr
    assert "e+" not in human.stdout and "e-0" not in human.stdout
    row = next(line for line in human.stdout.splitlines() if line.startswith(specs[0].run_id))
    assert re.search(r" \d\.\d\de\d+ ", row), row  # its FLOPs spent
    said = " ".join(human.stdout.split())  # the totals line, unwrapped
    assert re.search(r"\d+(\.\d+)?K/\d\.\d+M tokens", said), said[-500:]
    assert re.search(r"\d\.\d\de\d+ of \d\.\d\de\d+ FLOPs spent", said), said[-500:]


def test_plan_writes_sizes_and_compute_in_human_units(capsys):
    """The plan's table and totals write sizes as status and the report do: 23.71K params, 31.6M tokens, a batch of
    1.28K tokens, a hero of 800K params (not 23,712 / 31,596,544 / 1,280 / 800,000)."""
    import re

    r = run_cli(capsys, "plan", "default", "--dry-run")
    assert r.code == 0, r.stderr
    said = " ".join(r.stdout.split())
    assert " 23.71K 948.5K 40.0 3.21e11 1.28K " in said and "23,712" not in said, said[:2000]  # the first row
    assert re.search(r"totals: .* \d+(\.\d+)?M tokens", said) and "hero: 800K params" in said, said[-1500:]


def test_a_running_runs_eta_is_at_its_wall_clock_rate(tmp_path):
    """A run's row gave its time left at its rate inside training steps: one whose evaluations and checkpoints took
    half its wall time said half the time it then took, and less than the study's ETA counted for it."""
    root = tmp_path / "s"
    spec = plan_micro(root)[-1]
    rd = layout.StudyDir(root).run(spec.run_id)
    half = spec.steps // 2 // spec.log_interval * spec.log_interval
    recs = [json.loads(x) for x in metrics_lines(spec, half)]
    wall = 100.0  # seconds for the first half, of which the training steps took 50
    for rec in recs:
        if rec["kind"] == "train":
            rec["tokens_per_s"] = rec["tokens"] / (0.5 * wall * rec["step"] / half)
            rec["elapsed_s"] = wall * rec["step"] / half
    rd.metrics.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with run_lock(rd):
        row = next(r for r in study_status(root) if r.run_id == spec.run_id)
        assert row.state == "running" and row.elapsed_s == wall
        left = wall * (spec.steps - half) / half
        assert abs(row.eta_s - left) < 0.01 * left, (row.eta_s, left)
        eta = EtaClock(clock=_Clock())
        assert abs(eta([row]) - left) < 0.01 * left


def test_a_one_shot_status_gives_the_studys_eta_as_the_watch_does(tmp_path, capsys):
    """`ladder status` showed each run's ETA but the study's only with --watch (its clock needed two polls); the
    study's time left counts the runs that will run without another command, not the ones never submitted."""
    root = tmp_path / "s"
    spec = plan_micro(root)[-1]
    rd = layout.StudyDir(root).run(spec.run_id)
    half = spec.steps // 2 // spec.log_interval * spec.log_interval
    recs = [json.loads(x) for x in metrics_lines(spec, half)]
    for rec in recs:
        if rec["kind"] == "train":
            rec["elapsed_s"] = 600.0 * rec["step"] / half
    rd.metrics.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with run_lock(rd):
        data = run_cli(capsys, "status", root, "--json").json()
        (row,) = [r for r in data["runs"] if r["state"] == "running"]
        assert data["totals"]["eta_s"] == pytest.approx(row["eta_s"])  # the planned runs are not submitted
        assert row["eta_s"] == pytest.approx(600.0 * (spec.steps - half) / half, rel=0.01)
        human = run_cli(capsys, "status", root).stdout
        assert "; ETA 10.0m" in " ".join(human.split()), human
    data = run_cli(capsys, "status", root, "--json").json()  # nothing runs: no time left to give
    assert data["totals"]["eta_s"] is None and "; ETA" not in run_cli(capsys, "status", root).stdout


def test_a_queued_run_shows_no_eta_of_its_own(tmp_path):
    """A run interrupted part-way and submitted again waits its turn in the queue: its row gave an ETA from its
    old throughput as if it were training."""
    root = tmp_path / "s"
    spec = plan_micro(root)[-1]
    sd = layout.StudyDir(root)
    half = spec.steps // 2 // spec.log_interval * spec.log_interval
    sd.run(spec.run_id).metrics.write_text("".join(metrics_lines(spec, half)))
    record_job(sd, spec.run_id, cancelled=False, job_id=str(os.getpid()))  # a live local worker, not on it yet
    row = next(r for r in study_status(root) if r.run_id == spec.run_id)
    assert row.state == "queued" and row.tokens_per_s and row.eta_s is None, (row.state, row.eta_s)
