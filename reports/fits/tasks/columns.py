"""The task results of a runs table: the ``task/<task>/<metric>`` columns, which metric is the task loss and
which the accuracy, and the frame one task is fitted on (finished runs with usable numbers)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ladder.errors import FitError

PREFIX = "task/"
LOSS_METRICS = ("bpb", "bits_per_byte")  # task loss, in order of preference
ACC_METRICS = ("acc", "acc_norm", "exact_match")  # accuracy, in order of preference


def task_columns(runs: pd.DataFrame) -> dict[str, list[str]]:
    """``{task: [metric, ...]}`` of the ``task/<task>/<metric>`` columns of a results table."""
    out: dict[str, list[str]] = {}
    for col in runs.columns:
        if isinstance(col, str) and col.startswith(PREFIX):
            task, _, metric = col[len(PREFIX) :].rpartition("/")
            if task and metric:
                out.setdefault(task, []).append(metric)
    return out


def column(task: str, metric: str) -> str:
    return f"{PREFIX}{task}/{metric}"


def pick_metric(
    task: str, available: Sequence[str], wanted: str | None, prefs: Sequence[str], what: str, required: bool
) -> str | None:
    if wanted is not None:
        if wanted not in available:
            raise FitError(
                f"task {task!r}: no column {column(task, wanted)!r} in the results (this task has "
                f"{', '.join(sorted(available)) or 'no metrics'})"
            )
        return wanted
    for m in prefs:
        if m in available:
            return m
    if required:
        raise FitError(
            f"task {task!r}: no {what} column (looked for {', '.join(column(task, m) for m in prefs)}; the task "
            f"has {', '.join(sorted(available)) or 'no metrics'}). Multiple-choice tasks get 'bpb' when evaluated "
            "with `ladder eval`; pass loss_metric= to use another column"
        )
    return None


def task_frame(
    runs: pd.DataFrame, task: str, loss_metric: str | None, acc_metric: str | None, need_acc: bool
) -> tuple[pd.DataFrame, str, str | None, list[str]]:
    if not isinstance(runs, pd.DataFrame):
        raise FitError(f"task scaling takes a DataFrame of runs, got {type(runs).__name__}")
    cols = task_columns(runs)
    if task not in cols:
        known = ", ".join(sorted(cols)) or "none (evaluate the runs with `ladder eval` and collect again)"
        raise FitError(f"task {task!r}: no task/{task}/<metric> columns in the results; tasks present: {known}")
    lm = pick_metric(task, cols[task], loss_metric, LOSS_METRICS, "task loss", required=True)
    am = pick_metric(task, cols[task], acc_metric, ACC_METRICS, "accuracy", required=need_acc)
    missing = [c for c in ("params", "tokens") if c not in runs.columns]
    if missing:
        raise FitError(f"task {task!r}: the results lack column(s) {missing}")
    warnings = []
    df = runs
    if "status" in df.columns:
        bad = df["status"].astype(str) != "done"
        if bad.any():
            warnings.append(f"{int(bad.sum())} run(s) not done left out")
            df = df[~bad]
    use = ["params", "tokens", column(task, lm)] + ([column(task, am)] if am else [])
    frame = pd.DataFrame(
        {
            "params": pd.to_numeric(df["params"], errors="coerce"),
            "tokens": pd.to_numeric(df["tokens"], errors="coerce"),
            "flops": pd.to_numeric(df["flops"], errors="coerce") if "flops" in df.columns else np.nan,
            "loss": pd.to_numeric(df[column(task, lm)], errors="coerce"),
            "acc": pd.to_numeric(df[column(task, am)], errors="coerce") if am else np.nan,
            "run_id": df["run_id"].astype(str) if "run_id" in df.columns else [str(i) for i in df.index],
        }
    )
    ok = np.isfinite(frame["params"]) & np.isfinite(frame["tokens"]) & np.isfinite(frame["loss"])
    ok &= (frame["params"] > 0) & (frame["tokens"] > 0) & (frame["loss"] > 0)
    if am:
        ok &= np.isfinite(frame["acc"]) & (frame["acc"] >= 0) & (frame["acc"] <= 1)
    if (~ok).any():
        warnings.append(f"{int((~ok).sum())} run(s) without usable {', '.join(use[2:])} left out")
    frame = frame[ok].reset_index(drop=True)
    # flops: measured where present, else params x tokens at the ladder's own flops per (N D) (6 by default)
    fl = frame["flops"].to_numpy(float)
    good = np.isfinite(fl) & (fl > 0)
    ratio = (
        float(np.median(fl[good] / (frame["params"].to_numpy()[good] * frame["tokens"].to_numpy()[good])))
        if good.any()
        else 6.0
    )
    if (~good).any():
        fl = np.where(good, fl, ratio * frame["params"].to_numpy() * frame["tokens"].to_numpy())
        frame["flops"] = fl
    frame.attrs["flops_per_nd"] = ratio
    return frame, lm, am, warnings
