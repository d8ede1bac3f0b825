"""What one rank computes for a run: the seeded model and its optimizer, the data order and the precision; the
gradient of one update over this rank's share of the global batch; the loss on the fixed validation windows.

Update ``N + 1`` reads global sequence numbers ``N * S .. N * S + S - 1`` through ``window_order(len(train),
seed)``, so the data position is a function of the step alone. The step's sequences are split in contiguous
slices over ranks, each slice in micro-batches of ``micro_batch_size`` sequences; the loss of each micro-batch
is weighted by its share of the global batch, so that the gradient is that of the mean loss over the whole
batch, whatever the world size or micro-batching.
"""

from __future__ import annotations

import contextlib
import random
from typing import Callable

import numpy as np
import torch

from ladder.model.config import RunSpec
from ladder.model.data.windows import window_order
from ladder.model.training.distributed import Dist, all_reduce_sum
from ladder.model.training.inputs import TrainData, lm_loss
from ladder.model.training.llama import build_model
from ladder.model.training.optim import build_optimizer


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

        torch.manual_seed(spec.seed)
        np.random.seed(spec.seed % 2**32)
        random.seed(spec.seed)
        self.model = build_model(
            spec.shape, seq_len=spec.data.seq_len, seed=spec.seed, device=dev,
            bos_token_id=data.eos_id, eos_token_id=data.eos_id, pad_token_id=data.pad_id,
        )  # fmt: skip
        self.model.train()
        self.optimizer = build_optimizer(self.model, spec.optimizer, lr=spec.lr)
        self.train_model: torch.nn.Module = self.model

    def distribute(self) -> None:
        """Wrap the model in DDP (several ranks) and compile it (``spec.compile``); after a checkpoint is loaded."""
        if self.d.enabled:
            from torch.nn.parallel import DistributedDataParallel as DDP

            self.train_model = DDP(
                self.model, device_ids=[self.dev.index] if self.dev.type == "cuda" else None, broadcast_buffers=False
            )
        if self.spec.compile:
            self.train_model = torch.compile(self.train_model)

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
        mine = self.my_sequences(step)
        m = spec.micro_batch_size
        chunks = [mine[i : i + m] for i in range(0, len(mine), m)]
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.dev)
        for j, chunk in enumerate(chunks):
            windows = torch.from_numpy(self.data.train.batch(chunk)).to(self.dev, non_blocking=True)
            sync = contextlib.nullcontext()
            if d.enabled and j < len(chunks) - 1:
                sync = self.train_model.no_sync() if hasattr(self.train_model, "no_sync") else sync
            with sync:
                with self.autocast():
                    loss = lm_loss(self.train_model, windows)
                if force_nan:
                    loss = loss * float("nan")
                weight = len(chunk) * d.world_size / self.S
                (loss * weight if weight != 1.0 else loss).backward()
            loss_sum += loss.detach().double() * len(chunk)
        clip = spec.grad_clip if spec.grad_clip is not None else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        packed = torch.cat([loss_sum.reshape(1), torch.tensor(signal_flags(), dtype=torch.float64, device=self.dev)])
        packed = all_reduce_sum(packed, d).cpu()
        loss_mean = float(packed[0]) / self.S
        return loss_mean, float(grad_norm), [float(x) for x in packed[1:]]

    @torch.no_grad()
    def evaluate(self) -> float:
        """Mean next-token loss over the first ``n_eval`` validation windows (split over ranks, summed back)."""
        d = self.d
        model = self.model
        model.eval()
        idx = list(range(d.rank, self.n_eval, d.world_size))
        m = max(1, self.spec.micro_batch_size)
        total = torch.zeros(2, dtype=torch.float64, device=self.dev)
        for i in range(0, len(idx), m):
            windows = torch.from_numpy(self.data.val.batch(idx[i : i + m])).to(self.dev)
            with self.autocast():
                s = lm_loss(model, windows, reduction="sum")
            total[0] += s.double()
            total[1] += windows.shape[0] * (windows.shape[1] - 1)
        total = all_reduce_sum(total, d)
        model.train()
        return float(total[0] / total[1])
