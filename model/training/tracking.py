"""Where a run's records go: ``metrics.jsonl`` and, when the study asks (``RunSpec.tracking``), an experiment
tracker, TensorBoard or Weights & Biases, with the run's config (its spec) and the hardware of each attempt.

The loop appends every record through :class:`MetricsLog`, which writes the line first (the file is the record
of the run; collect reads only it) and then mirrors it, keyed as ``train/loss``, ``train/lr``,
``train/grad_norm``, ``train/tokens_per_s``, ``train/mfu``, ``train/elapsed_s``, ``eval/loss`` and ``tokens``,
at the record's optimizer step. A tracker that fails while the run trains costs a warning, never the run; one
that cannot start (W&B's own errors) costs a warning too; one whose package is missing fails the run at its start,
naming the extra to install (``studies validate`` and ``plan`` say so earlier).

Resumed into the same tracker run after a restart, without duplicate runs or steps:

- TensorBoard: the same log directory (``<study>/tensorboard/<run name>``, or under ``tracking.dir``), opened with
  ``purge_step`` one past the checkpoint's step, so that the events an interrupted attempt wrote after its
  checkpoint are dropped and the resumed attempt's replace them.
- W&B: a run id derived from the study and the run id, with ``resume="allow"``; a W&B history only grows, so the
  steps an earlier attempt already logged (the run directory's ``tracker.json`` keeps the last one) are not logged
  again. Offline (``WANDB_MODE=offline``, or online when W&B cannot be reached: a warning says so) the files stay
  under the run directory (``wandb/``), and ``wandb sync`` uploads them later, into the same run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import re
import socket
from pathlib import Path
from typing import Any, Protocol

from ladder.errors import SpecError
from ladder.layout import TENSORBOARD, RunDir, append_jsonl, atomic_write_json
from ladder.model.config import RunSpec, TrackingConfig
from ladder.model.training.run_files import trim_metrics

log = logging.getLogger("ladder.train")

EXTRAS = {"tensorboard": ("tensorboard", "ladder[tensorboard]"), "wandb": ("wandb", "ladder[wandb]")}
_KEYS = {"train": {"loss": "train/loss", "lr": "train/lr", "grad_norm": "train/grad_norm",
                   "tokens_per_s": "train/tokens_per_s", "mfu": "train/mfu", "elapsed_s": "train/elapsed_s",
                   "tokens": "tokens"},
         "eval": {"eval_loss": "eval/loss", "eval_loss_repeats": "eval/loss_repeats",
                  "eval_loss_novel": "eval/loss_novel"}}  # fmt: skip


def scalars(record: dict[str, Any]) -> dict[str, float]:
    """A metrics.jsonl record as the tracker's scalars (missing and non-numeric values left out)."""
    keys = _KEYS.get(str(record.get("kind")), {})
    return {name: float(record[k]) for k, name in keys.items()
            if isinstance(record.get(k), (int, float)) and not isinstance(record.get(k), bool)}  # fmt: skip


def run_name(spec: RunSpec) -> str:
    """What the tracker calls the run: its variant, size, budget and seed (``tied 24K``, ``base 5M 0.5x seed1``)."""
    axes = spec.axes
    parts = [spec.variant, str(axes.get("size", ""))]
    if "budget" in axes:
        parts.append(f"C={axes['budget']}")
    if "multiplier" in axes:
        parts.append(f"{float(axes['multiplier']):g}x")
    if "seed" in axes:
        parts.append(f"seed{axes['seed']}")
    return " ".join(p for p in parts if p) or spec.run_id


def wandb_id(spec: RunSpec, run: RunDir) -> str:
    """A W&B run id that a restart finds again: the run id (its science) with a hash of the study's name, since
    two studies may train the same run."""
    return f"{spec.run_id or run.run_id}-{hashlib.sha256(spec.study.encode()).hexdigest()[:8]}"


def study_path(run: RunDir) -> Path:
    """The study directory a run directory lies in (``<study>/runs/<id>``); the run directory itself otherwise."""
    return run.path.parent.parent if run.path.parent.name == "runs" else run.path


def _where(run: RunDir, cfg: TrackingConfig) -> Path | None:
    if cfg.dir is None:
        return None
    path = Path(cfg.dir).expanduser()
    return path if path.is_absolute() else study_path(run) / path


def hardware(device: Any) -> dict[str, Any]:
    """This attempt's machine: device, its name, torch, threads, host, world size."""
    import torch

    dev = torch.device(device) if device is not None else torch.device("cpu")
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else (platform.processor() or platform.machine())
    return {
        "device": dev.type,
        "device_name": name,
        "host": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "torch_threads": torch.get_num_threads(),
        "world_size": int(os.environ.get("WORLD_SIZE", "1")),
        "python": platform.python_version(),
    }


class Tracker(Protocol):
    def log(self, record: dict[str, Any]) -> None: ...

    def close(self, result: dict[str, Any] | None) -> None: ...


def _require(kind: str) -> None:
    module, extra = EXTRAS[kind]
    try:
        __import__(module)
    except ImportError:
        raise SpecError(
            f"tracking.kind = {kind!r} needs the {module} package, which is not installed here: pip install '{extra}'"
        ) from None


class TensorBoardTracker:
    """Scalars in a TensorBoard log directory that every attempt of the run shares."""

    def __init__(self, run: RunDir, spec: RunSpec, step: int, device: Any) -> None:
        from torch.utils.tensorboard import SummaryWriter

        slug = re.sub(r"[^A-Za-z0-9_.=-]+", "_", run_name(spec)).strip("_")
        root = _where(run, spec.tracking) or study_path(run) / TENSORBOARD
        self.log_dir = root / (spec.study if spec.tracking.dir is not None else "") / f"{slug}-{run.run_id}"
        fresh = not any(self.log_dir.glob("events.out.tfevents.*"))
        self.writer = SummaryWriter(log_dir=str(self.log_dir), purge_step=None if fresh else step + 1)
        if fresh:
            self.writer.add_text("config", f"```json\n{json.dumps(spec.model_dump(mode='json'), indent=2)}\n```", 0)
        self.writer.add_text("hardware", f"```json\n{json.dumps(hardware(device), indent=2)}\n```", step)
        self.writer.flush()

    def log(self, record: dict[str, Any]) -> None:
        for name, value in scalars(record).items():
            self.writer.add_scalar(name, value, int(record["step"]))
        self.writer.flush()

    def close(self, result: dict[str, Any] | None) -> None:
        if result is not None:
            self.writer.add_text("result", f"```json\n{json.dumps(result, indent=2, default=str)}\n```",
                                 int(result.get("steps") or 0))  # fmt: skip
        self.writer.close()


class WandbTracker:
    """One W&B run per ladder run, resumed by id after a restart; offline files stay in the run directory."""

    def __init__(self, run: RunDir, spec: RunSpec, step: int, device: Any) -> None:
        import wandb

        cfg = spec.tracking
        self.run_dir, self.id = run, wandb_id(spec, run)
        self.state_path = run.tracker
        state = _read_json(self.state_path)
        # a W&B history only grows: what an earlier attempt logged past its checkpoint stays, and is not repeated
        self.skip_upto = int(state.get("last_step", 0)) if state.get("id") == self.id else 0
        self.logged = self.skip_upto
        config = {**spec.model_dump(mode="json"), "hardware": hardware(device)}
        kwargs = dict(project=cfg.project or "ladder", entity=cfg.entity, group=cfg.group or spec.study,
                      name=run_name(spec), id=self.id, resume="allow", dir=str(_where(run, cfg) or run.path),
                      config=config, tags=list(cfg.tags) or None, job_type="ladder", reinit="finish_previous",
                      allow_val_change=True, settings=wandb.Settings(quiet=True))  # fmt: skip
        Path(kwargs["dir"]).mkdir(parents=True, exist_ok=True)
        try:
            self.wb = wandb.init(**kwargs)
        except Exception as exc:  # noqa: BLE001 - no network, no key: keep the files, sync them later
            if os.environ.get("WANDB_MODE") == "offline":
                raise
            log.warning("W&B is unreachable (%s: %s): logging offline under %s; `wandb sync` uploads it later",
                        type(exc).__name__, exc, kwargs["dir"])  # fmt: skip
            self.wb = wandb.init(**kwargs, mode="offline")
        self._save()

    def _save(self) -> None:
        atomic_write_json(self.state_path, {"kind": "wandb", "id": self.id, "last_step": self.logged,
                                            "dir": str(getattr(self.wb, "dir", ""))})  # fmt: skip

    def log(self, record: dict[str, Any]) -> None:
        step, values = int(record["step"]), scalars(record)
        if step <= self.skip_upto or not values:
            return
        self.wb.log(values, step=step)
        if step > self.logged:
            self.logged = step
            self._save()

    def close(self, result: dict[str, Any] | None) -> None:
        status = (result or {}).get("status", "preempted")
        self.wb.summary.update(
            {
                "status": status,
                **{k: v for k, v in (result or {}).items() if isinstance(v, (int, float, str)) and k != "traceback"},
            }
        )
        self.wb.finish(exit_code=0 if status in ("done", "preempted") else 1)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


TRACKERS = {"tensorboard": TensorBoardTracker, "wandb": WandbTracker}


class MetricsLog:
    """What the loop appends its records to: ``metrics.jsonl`` (cut back to the resumed ``step`` first) and the
    study's tracker. Only the main rank writes; on the others every method does nothing."""

    def __init__(self, run: RunDir, spec: RunSpec, step: int, is_main: bool = True, device: Any = None) -> None:
        self.run, self.enabled = run, is_main
        self.tracker: Tracker | None = None
        if not is_main:
            return
        trim_metrics(run, step)
        kind = spec.tracking.kind
        if kind in TRACKERS:
            _require(kind)  # the study asked for it: a missing package fails the run at its start
            try:
                self.tracker = TRACKERS[kind](run, spec, step, device)
            except Exception as exc:  # noqa: BLE001 - a mirror that cannot start: the run goes on without it
                log.warning("could not start the %s tracker (%s: %s); the run goes on, metrics.jsonl has every "
                            "record", kind, type(exc).__name__, exc)  # fmt: skip

    def append(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        append_jsonl(self.run.metrics, record)
        if self.tracker is not None:
            try:
                self.tracker.log(record)
            except Exception as exc:  # noqa: BLE001 - the tracker is a mirror: the run goes on without it
                log.warning("experiment tracker failed (%s: %s); the run goes on, metrics.jsonl has every record",
                            type(exc).__name__, exc)  # fmt: skip
                self.tracker = None

    def close(self) -> None:
        """Close the tracker with the run's result.json as its summary (none when the run stopped short)."""
        tracker, self.tracker = self.tracker, None
        if tracker is None:
            return
        result = _read_json(self.run.result) or None
        try:
            tracker.close(result)
        except Exception as exc:  # noqa: BLE001 - never hide how the run ended
            log.warning("closing the experiment tracker failed (%s: %s)", type(exc).__name__, exc)
