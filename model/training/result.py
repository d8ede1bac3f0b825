"""The fields every ``result.json`` of :func:`ladder.model.training.loop.train` holds, whatever its status.

``status`` (done | diverged | failed), ``run_id``, ``final_train_loss`` (the MEAN of the per-step training losses
over the last ``max(1, ceil(steps / 10))`` steps: a smoothed, exactly reproducible number), ``final_eval_loss``
(on a finished run also ``final_eval_loss_repeats`` and ``final_eval_loss_novel``, the same loss over the targets
that repeat their window's earlier text and over the others, and ``eval_repeat_share``, the repeats' share of the
targets: :mod:`ladder.model.data.repeats`),
``tokens``, ``steps``, ``flops`` (= flops_per_token x tokens), ``wall_time_s`` (wall time of all attempts up to their
last checkpoint plus the last attempt: work lost to a kill after the last checkpoint is not counted),
``train_time_s`` (time inside training steps), ``tokens_per_s`` (tokens trained / train_time_s: :func:`throughput`), ``mfu``, ``peak_flops``,
``restarts``, ``device``, ``device_name``, ``precision``, ``world_size``, ``flops_spent`` (:mod:`.branching`),
``peak_rss_bytes`` and ``peak_gpu_allocated_bytes`` (this process's peak resident memory and, on CUDA, the
allocator's peak, over the last attempt); on divergence ``diverged_at_step`` and ``reason``; on failure ``reason``
and ``error_type``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ladder.layout import RunDir
from ladder.model.config import RunSpec
from ladder.model.hardware import Peak, checked_peak, peak_memory
from ladder.model.hardware import mfu as compute_mfu
from ladder.model.training import branching
from ladder.model.training.run_files import finite_or_none


def throughput(state: dict[str, Any]) -> float | None:
    """THE throughput of a run (result.json's ``tokens_per_s``, and each train record's in metrics.jsonl, which
    ``ladder status`` shows): the tokens it trained itself (a branch: after its branch step; every attempt) over
    its seconds inside training steps (``train_time_s``: compiles included, evaluations and checkpoints not)."""
    return state["tokens_trained"] / state["train_time_s"] if state["train_time_s"] > 0 else None


def base_result(
    spec: RunSpec,
    run: RunDir,
    state: dict[str, Any],
    *,
    tokens_per_step: int,
    sequences: int,
    seq_len: int,
    elapsed_s: float,
    peak: Peak,
    dev: torch.device,
    precision: str,
    world_size: int,
) -> dict[str, Any]:
    """The result's fields from the trainer's ``state`` (its books) and setup; the caller adds ``status`` and what
    that status brings."""
    st = state
    tokens = st["step"] * tokens_per_step
    tps = throughput(st)
    if tps:
        peak = checked_peak(peak, float(spec.flops_per_token) * tps / max(1, world_size), dev, precision)
    return {
        "run_id": spec.run_id or run.run_id,
        "steps": st["step"],
        "tokens": tokens,
        "flops": float(spec.flops_per_token) * tokens,
        "final_train_loss": finite_or_none(float(np.mean(st["recent_losses"]))) if st["recent_losses"] else None,
        "wall_time_s": round(elapsed_s, 3),
        "train_time_s": round(st["train_time_s"], 3),
        "tokens_per_s": tps,
        "mfu": compute_mfu(spec.flops_per_token, tps, peak.flops, world_size) if tps else None,
        "peak_flops": peak.flops,
        "peak_flops_source": peak.source,
        "restarts": st["restarts"],
        "device": dev.type,
        "device_name": peak.device_name,
        "precision": precision,
        "world_size": world_size,
        "seq_len": seq_len,
        "batch_sequences": sequences,
        "params_total": spec.shape.params_total,
        "params_non_embedding": spec.shape.params_non_embedding,
        "flops_per_token": spec.flops_per_token,
        "torch_threads": torch.get_num_threads() if dev.type == "cpu" else None,
        **branching.result_fields(run, spec, st, tokens_per_step),
        **peak_memory(dev),  # of this attempt
    }
