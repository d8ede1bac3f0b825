"""What one rank computes for a run: the seeded model and its optimizer, the data order and the precision; the
gradient of one update over this rank's share of the global batch; the loss on the fixed validation windows.

Update ``N + 1`` reads global sequence numbers ``N * S .. N * S + S - 1`` through ``window_order(len(train),
seed)``, so the data position is a function of the step alone. The step's sequences are split in contiguous
slices over ranks, each slice in micro-batches of ``micro_batch_size`` sequences; the loss of each micro-batch
is weighted by its share of the global batch, so that the gradient is that of the mean loss over the whole
batch, whatever the world size or micro-batching. The loss is :class:`~ladder.model.training.loss.CausalLMLoss`.

``spec.compile`` compiles each decoder layer (regional compilation: the layers share one compiled graph, so a
deeper model costs no more compile time) and then pads every micro-batch to ``micro_batch_size`` windows whose
extra rows count for nothing, so that the compiled graph sees one shape (a smaller last micro-batch would make it
compile again). Compiled kernels go to ``$TORCHINDUCTOR_CACHE_DIR``, by default ``inductor/`` in the ladder's
cache, where later runs of the same shape find them. Without compile nothing is padded. On CUDA a step's windows
come from pinned host memory, copied without blocking, and the next step's are on their way while this one
computes; on CPU, malloc keeps freed activations in the process (:func:`~ladder.model.hardware.tune_cpu_allocator`).
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ladder.model.config import RunSpec
from ladder.model.data.repeats import repeat_mask
from ladder.model.data.windows import window_order
from ladder.model.hardware import tune_cpu_allocator
from ladder.model.training.distributed import Dist, all_reduce_sum
from ladder.model.training.inputs import TrainData
from ladder.model.training.llama import build_model
from ladder.model.training.loss import CausalLMLoss
from ladder.model.training.optim import build_optimizer


@dataclass(frozen=True)
class EvalLoss:
    """One evaluation: the mean loss over every target, and over the in-context repeats and the novel targets
    apart (None where a kind has no target), with the repeats' share of the targets."""

    loss: float
    repeats: float | None
    novel: float | None
    repeat_share: float

    def record(self) -> dict[str, float | None]:
        """The fields a ``metrics.jsonl`` eval record carries."""
        return {"eval_loss": self.loss, "eval_loss_repeats": self.repeats, "eval_loss_novel": self.novel}


def resolve_precision(precision: str, device: torch.device) -> str:
    """``auto`` -> ``bf16`` on a CUDA device that supports it, else ``fp32``."""
    if precision == "auto":
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return "bf16"
        return "fp32"
    return precision


class Steps:
    """The model, optimizer and data of one run on this rank, and the two computations the loop asks of them."""

    def __init__(self, spec: RunSpec, data: TrainData, d: Dist, dev: torch.device, n_eval: int):
        self.spec, self.data, self.d, self.dev, self.n_eval = spec, data, d, dev, n_eval
        self.S = spec.sequences_per_batch
        self.precision = resolve_precision(spec.precision, dev)
        if dev.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        self.autocast = (
            (lambda: torch.autocast(device_type=dev.type, dtype=torch.bfloat16))
            if self.precision == "bf16"
            else contextlib.nullcontext
        )
        self.order = window_order(len(data.train), spec.seed)
        if dev.type == "cpu":
            tune_cpu_allocator()  # no page faults for every activation at every step (see its docstring)

        torch.manual_seed(spec.seed)
        np.random.seed(spec.seed % 2**32)
        random.seed(spec.seed)
        self.model = build_model(
            spec.shape, seq_len=spec.data.seq_len, seed=spec.seed, device=dev,
            bos_token_id=data.eos_id, eos_token_id=data.eos_id, pad_token_id=data.pad_id,
        )  # fmt: skip
        self.model.train()
        self.optimizer = build_optimizer(self.model, spec.optimizer, lr=spec.lr)
        self.loss = CausalLMLoss(self.model)
        self.train_model: torch.nn.Module = self.loss
        self._next: tuple[int, list[torch.Tensor]] | None = None
        self._repeats: np.ndarray | None = None  # the evaluation windows' in-context repeats (on this rank)

    def distribute(self) -> None:
        """Compile the decoder layers (``spec.compile``) and wrap the loss in DDP (several ranks); after a checkpoint
        is loaded."""
        if self.spec.compile:
            import torch._dynamo

            from ladder.model.data.cache import default_cache_root

            # a local worker trains run after run in one process: the graphs of earlier runs' shapes would count
            # toward dynamo's recompile limit (8 per function), past which every later run silently trains eager
            torch._dynamo.reset()

            # compiled kernels kept with the ladder's cache, so runs of one shape (sweeps, seeds, resumes, other
            # nodes on a shared filesystem) load them instead of compiling again
            os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(default_cache_root() / "inductor"))
            for layer in self.model.model.layers:
                layer.compile()
            self.loss.exact_llama = False  # through the layers' (compiled) forward, not the eager decoder stack
        if self.d.enabled:
            from torch.nn.parallel import DistributedDataParallel as DDP

            self.train_model = DDP(
                self.loss, device_ids=[self.dev.index] if self.dev.type == "cuda" else None, broadcast_buffers=False
            )

    def _windows(self, split, indices: list[int]) -> torch.Tensor:
        """The windows ``indices`` of ``split`` on this rank's device; compiled runs pad them to the micro-batch
        size (the padding rows are never targets: see :meth:`_loss`)."""
        host = split.batch(indices)
        m = self.spec.micro_batch_size
        if self.spec.compile and len(indices) < m:
            host = np.concatenate([host, np.zeros((m - len(indices), host.shape[1]), dtype=host.dtype)])
        t = torch.from_numpy(host)
        if self.dev.type == "cuda":
            return t.pin_memory().to(self.dev, non_blocking=True)
        return t.to(self.dev)

    def _chunks(self, step: int) -> list[list[int]]:
        mine = self.my_sequences(step)
        m = self.spec.micro_batch_size
        return [mine[i : i + m] for i in range(0, len(mine), m)]

    def _step_windows(self, step: int) -> list[torch.Tensor]:
        if self._next is not None and self._next[0] == step:
            windows = self._next[1]
        else:
            windows = [self._windows(self.data.train, c) for c in self._chunks(step)]
        self._next = None
        return windows

    def _prefetch(self, step: int) -> None:
        """On CUDA, start copying the windows of update ``step + 1`` while update ``step`` still computes."""
        if self.dev.type == "cuda" and step < self.spec.steps:
            self._next = (step, [self._windows(self.data.train, c) for c in self._chunks(step)])

    def _loss(self, module: torch.nn.Module, windows: torch.Tensor, rows: int) -> torch.Tensor:
        """Mean next-token loss of the first ``rows`` windows (the rest, if any, is padding)."""
        total = module(windows, rows if rows < windows.shape[0] else None)
        return total / (rows * (windows.shape[1] - 1))

    def my_sequences(self, step: int) -> list[int]:
        S, W, r = self.S, self.d.world_size, self.d.rank
        lo, hi = (r * S) // W, ((r + 1) * S) // W
        start = step * S
        return [self.order(start + j) for j in range(lo, hi)]

    def gradients(
        self, step: int, lr: float, signal_flags: Callable[[], list[float]], force_nan: bool = False
    ) -> tuple[float, float, list[float]]:
        """Accumulate the gradient of update ``step + 1`` at ``lr`` and clip it. Returns (global mean loss, grad
        norm, the signal flags summed over ranks); does NOT apply the optimizer step (the caller checks for
        non-finite values first). ``force_nan`` turns the loss into NaN (the divergence test hook)."""
        spec, d = self.spec, self.d
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        chunks = self._chunks(step)
        all_windows = self._step_windows(step)
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.dev)
        for j, (chunk, windows) in enumerate(zip(chunks, all_windows)):
            sync = contextlib.nullcontext()
            if d.enabled and j < len(chunks) - 1:
                sync = self.train_model.no_sync() if hasattr(self.train_model, "no_sync") else sync
            with sync:
                with self.autocast():
                    loss = self._loss(self.train_model, windows, len(chunk))
                if force_nan:
                    loss = loss * float("nan")
                weight = len(chunk) * d.world_size / self.S
                (loss * weight if weight != 1.0 else loss).backward()
            loss_sum += loss.detach().double() * len(chunk)
        self._prefetch(step + 1)
        clip = spec.grad_clip if spec.grad_clip is not None else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        packed = torch.cat([loss_sum.reshape(1), torch.tensor(signal_flags(), dtype=torch.float64, device=self.dev)])
        packed = all_reduce_sum(packed, d)
        # one transfer to the host per step: the loss, the signal flags and the (already global) gradient norm
        host = torch.cat([packed, grad_norm.detach().reshape(1).to(packed.dtype)]).cpu()
        loss_mean = float(host[0]) / self.S
        return loss_mean, float(host[-1]), [float(x) for x in host[1:-1]]

    @torch.no_grad()
    def evaluate(self) -> EvalLoss:
        """Mean next-token loss over the first ``n_eval`` validation windows (split over ranks, summed back), and
        apart on the targets that repeat their window's earlier text and on the others
        (:mod:`ladder.model.data.repeats`)."""
        d = self.d
        self.model.eval()
        idx = list(range(d.rank, self.n_eval, d.world_size))
        if self._repeats is None:  # a property of the validation windows: found once per run
            self._repeats = repeat_mask(self.data.val.batch(idx)) if idx else np.zeros((0, 0), dtype=bool)
        m = max(1, self.spec.micro_batch_size)
        total = torch.zeros(4, dtype=torch.float64, device=self.dev)  # loss sum, targets, repeats' loss, repeats
        for i in range(0, len(idx), m):
            rows = idx[i : i + m]
            windows = self._windows(self.data.val, rows)
            with self.autocast():
                losses = self.loss.token_losses(windows, len(rows) if len(rows) < windows.shape[0] else None)
            losses = losses[: len(rows)].double()
            repeats = torch.from_numpy(self._repeats[i : i + len(rows)]).to(self.dev)
            total += torch.stack([losses.sum(), torch.tensor(float(losses.numel()), dtype=torch.float64,
                                  device=self.dev), losses[repeats].sum(), repeats.sum().double()])  # fmt: skip
        total = all_reduce_sum(total, d)
        self.model.train()
        loss_sum, n, rep_sum, n_rep = (float(x) for x in total.cpu())
        return EvalLoss(
            loss=loss_sum / n,
            repeats=rep_sum / n_rep if n_rep else None,
            novel=(loss_sum - rep_sum) / (n - n_rep) if n > n_rep else None,
            repeat_share=n_rep / n,
        )
