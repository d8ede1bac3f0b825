"""Experiment tracking, offline: TensorBoard event files read back with TensorBoard's own reader, W&B offline run
files that hold the logged keys, and a run killed after a checkpoint and resumed that continues its step count
in the same tracker run, without duplicate steps; a tracker that fails never fails the run."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from ladder.errors import SpecError
from ladder.layout import RunDir
from ladder.model.config import TrackingConfig
from ladder.model.training import tracking
from ladder.model.training.loop import train
from tests.model.training.tiny_runs import make_spec, metrics, tiny_data

pytestmark = pytest.mark.usefixtures("one_thread")

STEPS = 40


def _run(root: Path, kind: str, **cfg) -> Path:
    """A run directory inside a study directory (<study>/runs/<id>), as `ladder plan` lays them out."""
    spec = make_spec(
        steps=STEPS,
        log_interval=2,
        eval_interval=6,
        checkpoint_interval=100,
        tracking=TrackingConfig(kind=kind, **cfg),
        axes={"size": "10K", "seed": 3},
        variant="tied",
    )
    run = root / "study" / "runs" / spec.run_id
    run.mkdir(parents=True)
    (run / "spec.json").write_text(spec.model_dump_json(indent=2))
    return run


def _train_killed_after_a_checkpoint(run: Path) -> None:
    """Train to step 14 (a checkpoint), on to step 26 (another), then put the step-14 checkpoint back: as if the
    second attempt had been killed after step 26 with only its step-14 checkpoint on disk. Then train to the end."""
    data = tiny_data()
    train(run, dataset=data, stop_after_steps=14)
    saved = run.parent / "saved"
    shutil.copytree(run / "ckpt-000000014", saved / "ckpt-000000014")
    shutil.copy(run / "checkpoint.json", saved / "checkpoint.json")
    train(run, dataset=data, stop_after_steps=26)
    shutil.rmtree(run / "ckpt-000000026")
    shutil.copytree(saved / "ckpt-000000014", run / "ckpt-000000014")
    shutil.copy(saved / "checkpoint.json", run / "checkpoint.json")
    assert max(r["step"] for r in metrics(run)) == 26  # the killed attempt's records beyond the checkpoint
    assert train(run, dataset=data)["status"] == "done"


def test_tensorboard_events_read_back_and_a_resumed_run_continues_its_steps(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = _run(tmp_path, "tensorboard")
    _train_killed_after_a_checkpoint(run)
    logdirs = list((tmp_path / "study" / "tensorboard").iterdir())
    assert [d.name for d in logdirs] == [f"tied_10K_seed3-{run.name}"]  # one run, named by variant/size/seed
    ea = EventAccumulator(str(logdirs[0]))
    ea.Reload()
    assert {
        "train/loss",
        "train/lr",
        "train/grad_norm",
        "train/tokens_per_s",
        "train/mfu",
        "eval/loss",
        "eval/loss_novel",
        "tokens",
    } <= set(ea.Tags()["scalars"])
    # a repeats' loss of None (windows without a repeated trigram) is left out, not logged
    assert ("eval/loss_repeats" in ea.Tags()["scalars"]) == any(r["eval_loss_repeats"] for r in metrics(run, "eval"))
    train_recs = metrics(run, "train")
    steps = [e.step for e in ea.Scalars("train/loss")]
    assert steps == [r["step"] for r in train_recs] == list(range(2, STEPS + 1, 2))  # no duplicate, no gap
    assert [e.value for e in ea.Scalars("train/loss")] == pytest.approx([r["loss"] for r in train_recs], rel=1e-6)
    assert [e.step for e in ea.Scalars("eval/loss")] == [r["step"] for r in metrics(run, "eval")]
    assert {"config", "hardware", "result"} <= {t.split("/")[0] for t in ea.Tags()["tensors"]}


def _wandb_records(path: Path) -> list:
    """The protobuf records of a W&B offline run file (W&B's leveldb-style log: a 7-byte header, then 32 KiB
    blocks of records, each a 7-byte header (crc, length, type) and its bytes; a record may span blocks)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, buf, out = 7, 32768, b"", []
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0:
            break
        buf += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a full record, or the last piece of one
            rec = wandb_internal_pb2.Record()
            rec.ParseFromString(buf)
            out.append(rec)
            buf = b""
    return out


def _history(path: Path) -> tuple[list[dict], list, dict]:
    rows, runs, summary = [], [], {}
    for rec in _wandb_records(path):
        kind = rec.WhichOneof("record_type")
        if kind == "history":
            rows.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item})
        elif kind == "run":
            runs.append(rec.run)
        elif kind == "summary":
            summary.update({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.summary.update})
    return rows, runs, summary


def test_wandb_offline_files_hold_the_logged_keys_and_a_resumed_run_continues_its_steps(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = _run(tmp_path, "wandb", project="ladder-test", group="g", tags=["t1"])
    _train_killed_after_a_checkpoint(run)
    import wandb

    # Read the files as `wandb sync` would, after the process that wrote them: its W&B service (one per process,
    # outliving `finish`) may still hold a run's records in its buffers; under a loaded suite one file once held none.
    wandb.teardown()
    files = sorted((run / "wandb").glob("offline-run-*/*.wandb"))
    assert len(files) == 3  # one per attempt, all under the run directory
    steps, logged, last_summary = [], {}, {}
    for f in files:
        rows, runs, summary = _history(f)
        (meta,) = runs
        assert meta.run_id == tracking.wandb_id(json_spec(run), RunDir(run))  # the same W&B run every time
        assert (meta.display_name, meta.run_group, meta.project) == ("tied 10K seed3", "g", "ladder-test")
        assert list(meta.tags) == ["t1"]
        config = {i.key: json.loads(i.value_json) for i in meta.config.update}
        assert config["run_id"] == run.name and "hardware" in config and config["shape"]["d_model"] == 32
        for row in rows:
            steps.append(row["_step"])
            logged.setdefault(row["_step"], {}).update(row)
        last_summary = summary
    assert steps == sorted(steps)  # the step count continues from attempt to attempt
    train_recs = metrics(run, "train")
    assert sorted(s for s, row in logged.items() if "train/loss" in row) == [r["step"] for r in train_recs]
    assert {"train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s", "train/mfu", "tokens"} <= set(
        logged[STEPS]
    )
    # steps 16-26 are the killed attempt's, not logged again: the resumed run computes the same numbers
    for r in train_recs:
        assert logged[r["step"]]["train/loss"] == pytest.approx(r["loss"], rel=1e-6)
    assert [s for s, row in logged.items() if "eval/loss" in row] == [r["step"] for r in metrics(run, "eval")]
    assert last_summary["status"] == "done" and last_summary["final_eval_loss"] > 0
    assert json.loads((run / "tracker.json").read_text())["last_step"] == STEPS


def json_spec(run: Path):
    from ladder.model.config import RunSpec

    return RunSpec.model_validate_json((run / "spec.json").read_text())


def test_wandb_falls_back_to_offline_when_it_cannot_reach_the_server(tmp_path, monkeypatch, capfd):
    """... and says so in a few lines: W&B's own run history and summary (about 40 lines a run, in the middle of
    `ladder run`'s progress when runs train in its process) are not printed."""
    import wandb

    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_SILENT", raising=False)
    real, modes = wandb.init, []

    def init(**kwargs):
        modes.append(kwargs.get("mode"))
        if kwargs.get("mode") != "offline":
            raise wandb.errors.CommError("no network")
        return real(**kwargs)

    monkeypatch.setattr(wandb, "init", init)
    run = _run(tmp_path, "wandb")
    assert train(run, dataset=tiny_data())["status"] == "done"
    assert modes == [None, "offline"]
    assert len(list((run / "wandb").glob("offline-run-*/*.wandb"))) == 1
    said = capfd.readouterr()
    lines = [line for line in (said.out + said.err).splitlines() if line.startswith("wandb:")]
    assert len(lines) <= 5 and not any("Run history" in line for line in lines), "\n".join(lines)


class _Broken:
    def __init__(self, *args):
        pass

    def log(self, record):
        raise OSError("disk full")

    def close(self, result):
        raise OSError("disk full")


def test_a_tracker_that_fails_costs_a_warning_never_the_run(tmp_path, monkeypatch, caplog):
    monkeypatch.setitem(tracking.TRACKERS, "tensorboard", _Broken)
    run = _run(tmp_path, "tensorboard")
    assert train(run, dataset=tiny_data())["status"] == "done"
    assert "experiment tracker failed" in caplog.text and "disk full" in caplog.text
    assert [r["step"] for r in metrics(run, "train")] == list(range(2, STEPS + 1, 2))


def test_a_missing_tracker_package_fails_the_run_naming_the_extra(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_wandb(name, *args, **kwargs):
        if name == "wandb":
            raise ImportError("No module named 'wandb'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_wandb)
    run = _run(tmp_path, "wandb")
    with pytest.raises(SpecError, match=r"pip install 'ladder\[wandb\]'"):
        train(run, dataset=tiny_data())
    assert json.loads((run / "result.json").read_text())["status"] == "failed"


def test_tracking_is_not_part_of_the_run_id():
    a = make_spec(tracking=TrackingConfig(kind="wandb", project="p"))
    assert a.run_id == make_spec().run_id


def test_scalars_and_names():
    assert tracking.scalars({"kind": "train", "step": 3, "loss": 2.5, "lr": 1e-3, "tokens": 96, "mfu": None}) == {
        "train/loss": 2.5,
        "train/lr": 1e-3,
        "tokens": 96.0,
    }
    assert tracking.scalars({"kind": "eval", "step": 3, "tokens": 96, "eval_loss": 2.0}) == {"eval/loss": 2.0}
    assert tracking.scalars({"kind": "eval", "eval_loss": 2.0, "eval_loss_repeats": 1.5, "eval_loss_novel": None}) == {
        "eval/loss": 2.0,
        "eval/loss_repeats": 1.5,
    }
    spec = make_spec(axes={"size": "50K", "multiplier": 0.5}, variant="untied")
    assert tracking.run_name(spec) == "untied 50K 0.5x"
