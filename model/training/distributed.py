"""Several devices: the process group a run joins, and the two collectives the loop needs (barrier, sum).

When ``WORLD_SIZE > 1`` (torchrun, or ``submitit.helpers.TorchDistributedEnvironment().export()`` under
submitit), ``train`` initialises ``torch.distributed`` itself (``nccl`` on CUDA, ``gloo`` on CPU) unless it is
already initialised, uses ``cuda:LOCAL_RANK``, wraps the model in DDP and splits every global batch across ranks
(the loss curve is that of one process with the same global batch, up to float summation order). Only rank 0
writes files; every rank returns the result dict.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch


@dataclass
class Dist:
    """This process's place among the ranks of a run (one process: rank 0 of 1)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    initialized_here: bool = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def setup_distributed(device: torch.device | None) -> tuple[Dist, torch.device]:
    """Join the process group that ``WORLD_SIZE`` / ``RANK`` / ``LOCAL_RANK`` describe (initialising it unless it
    is already) and pick this rank's device; one process when ``WORLD_SIZE`` is unset or 1."""
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        if device is None:
            device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
        return Dist(), torch.device(device)
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", str(rank)))
    if device is None:
        device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
    device = torch.device(device)
    here = False
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(backend=backend, rank=rank, world_size=world)
        here = True
    if device.type == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, local_world)))
    ranks = Dist(rank=dist.get_rank(), world_size=dist.get_world_size(), local_rank=local_rank, initialized_here=here)
    return ranks, device


def barrier(d: Dist) -> None:
    """Wait for every rank (nothing with one process)."""
    if d.enabled:
        import torch.distributed as dist

        dist.barrier()


def all_reduce_sum(t: torch.Tensor, d: Dist) -> torch.Tensor:
    """``t`` summed over the ranks, in place (``t`` itself with one process)."""
    if d.enabled:
        import torch.distributed as dist

        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t
