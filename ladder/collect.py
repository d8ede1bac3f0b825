"""Turn run directories into one results table (``results.parquet`` / ``results.csv``) and a long table of
per-step curves (``curves.parquet``).

Reads only files the runs wrote: ``spec.json`` (from the plan), ``result.json`` (atomic, so never
half-written), ``metrics.jsonl`` (a torn last line is skipped) and lm-eval's results. A run whose files are
missing, partial or corrupt is reported (which file, what is wrong) and left out; nothing here raises on a
bad run. Runs still going (no ``result.json`` yet) are listed as pending.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ladder import layout
from ladder.model.config import RunSpec
from ladder.plan import read_plan

RESULT_KEYS = ("status", "final_train_loss", "final_eval_loss", "tokens", "flops", "wall_time_s")


@dataclass(frozen=True)
class Problem:
    run_id: str
    file: str
    what: str

    def __str__(self) -> str:
        return f"{self.run_id}: {self.file}: {self.what}"


@dataclass
class Collected:
    runs: pd.DataFrame
    curves: pd.DataFrame
    problems: list[Problem] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # raised before writing a result (see error.json)


def _read_result(rd: layout.RunDir) -> tuple[dict | None, Problem | None]:
    try:
        result = json.loads(rd.result.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return None, Problem(rd.run_id, layout.RESULT, f"unreadable JSON ({exc})")
    if not isinstance(result, dict):
        return None, Problem(rd.run_id, layout.RESULT, "not a JSON object")
    missing = [k for k in RESULT_KEYS if k not in result]
    if missing:
        return None, Problem(rd.run_id, layout.RESULT, f"missing keys {missing}")
    return result, None


def _read_curves(rd: layout.RunDir, spec: RunSpec) -> tuple[list[dict], Problem | None]:
    if not rd.metrics.is_file():
        return [], None
    rows = []
    try:
        for rec in layout.read_jsonl(rd.metrics):
            kind = rec.get("kind", "train")
            tokens = rec.get("tokens")
            rows.append(
                {
                    "run_id": spec.run_id,
                    "kind": kind,
                    "step": rec.get("step"),
                    "tokens": tokens,
                    "flops": None if tokens is None else float(tokens) * spec.flops_per_token,
                    "loss": rec.get("loss"),
                    "eval_loss": rec.get("eval_loss"),
                    "lr": rec.get("lr"),
                    "grad_norm": rec.get("grad_norm"),
                    "tokens_per_s": rec.get("tokens_per_s"),
                    "mfu": rec.get("mfu"),
                }
            )
    except (ValueError, UnicodeDecodeError, OSError) as exc:
        return [], Problem(spec.run_id, layout.METRICS, f"corrupt line ({exc})")
    return rows, None


def _read_tasks(rd: layout.RunDir) -> tuple[dict[str, float], Problem | None]:
    """lm-eval results as ``task/<task>/<metric>`` columns (numbers only; stderr columns dropped)."""
    out: dict[str, float] = {}
    if not rd.lm_eval.is_dir():
        return out, None
    for path in sorted(rd.lm_eval.rglob("results*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return {}, Problem(rd.run_id, str(path.relative_to(rd.path)), f"unreadable JSON ({exc})")
        for task, metrics in (data.get("results") or {}).items():
            for key, value in metrics.items():
                name, _, _filter = key.partition(",")
                if isinstance(value, (int, float)) and not isinstance(value, bool) and "stderr" not in name:
                    out[f"task/{task}/{name}"] = float(value)
    return out, None


def run_record(spec: RunSpec, result: dict) -> dict[str, Any]:
    shape = spec.shape
    row: dict[str, Any] = {
        "run_id": spec.run_id,
        "variant": spec.variant,
        "scale": str(spec.axes.get("budget", spec.axes.get("size", ""))),
    }
    for axis, value in spec.axes.items():
        row[f"axis/{axis}"] = value
    row.update(
        {
            "d_model": shape.d_model,
            "n_layers": shape.n_layers,
            "n_heads": shape.n_heads,
            "n_kv_heads": shape.n_kv_heads,
            "head_dim": shape.head_dim,
            "ffn_dim": shape.ffn_dim,
            "vocab_size": shape.vocab_size,
            "tie_embeddings": shape.tied,
            "aspect_ratio": shape.aspect_ratio,
            "seq_len": spec.data.seq_len,
            "param_convention": spec.param_convention,
            "params": spec.params,
            "params_total": shape.params_total,
            "params_embedding": shape.params_embedding,
            "params_non_embedding": shape.params_non_embedding,
            "tokens_planned": spec.tokens,
            "tokens": result.get("tokens"),
            "flops_per_token": spec.flops_per_token,
            "flops": result.get("flops"),
            # what the run trained itself: a branch starts at its trunk's step (the study's cost counts this)
            "flops_spent": result.get("flops_spent", result.get("flops")),
            "seed": spec.seed,  # runs that differ only by seed are repeats of one configuration
            "trunk_run_id": spec.trunk.run_id if spec.trunk else None,
            "branch_step": spec.trunk.step if spec.trunk else None,
            "batch_tokens": spec.batch_tokens,
            "lr": spec.lr,
            "schedule": spec.schedule.kind,
            "warmup_steps": spec.warmup_steps,
            "steps": spec.steps,
            "status": result.get("status"),
            "final_train_loss": result.get("final_train_loss"),
            "final_eval_loss": result.get("final_eval_loss"),
            "loss": result.get("final_eval_loss"),
            "wall_time_s": result.get("wall_time_s"),
            "tokens_per_s": result.get("tokens_per_s"),
            "mfu": result.get("mfu"),
            "restarts": result.get("restarts"),
            "diverged_at_step": result.get("diverged_at_step"),
            "reason": result.get("reason"),
        }
    )
    return row


def collect(study_dir: Path) -> Collected:
    sd = layout.StudyDir(Path(study_dir))
    _, specs = read_plan(sd.path)
    rows, curves, problems, pending, failed = [], [], [], [], []
    for spec in specs:
        rd = sd.run(spec.run_id)
        result, problem = _read_result(rd)
        if problem:
            problems.append(problem)
            continue
        if result is None:
            (failed if rd.error.is_file() else pending).append(spec.run_id)
            continue
        run_curves, problem = _read_curves(rd, spec)
        if problem:
            problems.append(problem)
            continue
        tasks, problem = _read_tasks(rd)
        if problem:
            problems.append(problem)
            continue
        row = run_record(spec, result)
        row.update(tasks)
        rows.append(row)
        curves.extend(run_curves)
    return Collected(runs=pd.DataFrame(rows), curves=pd.DataFrame(curves), problems=problems, pending=pending,
                     failed=failed)


def write_collected(study_dir: Path, collected: Collected) -> list[Path]:
    """Write the tables atomically (a temporary file renamed into place)."""
    sd = layout.StudyDir(Path(study_dir))
    written = []
    for frame, path, kind in (
        (collected.runs, sd.results_parquet, "parquet"),
        (collected.runs, sd.results_csv, "csv"),
        (collected.curves, sd.curves, "parquet"),
    ):
        tmp = path.with_name(f".{path.name}.tmp")
        if kind == "parquet":
            frame.to_parquet(tmp, index=False)
        else:
            frame.to_csv(tmp, index=False)
        tmp.replace(path)
        written.append(path)
    return written


def read_results(study_dir: Path) -> pd.DataFrame:
    from ladder.errors import StateError

    sd = layout.StudyDir(Path(study_dir))
    if not sd.results_parquet.is_file():
        raise StateError(f"{sd.path} has no {layout.RESULTS_PARQUET}; run `ladder collect {sd.path}` first")
    return pd.read_parquet(sd.results_parquet)
