"""Which runs ``training.compile: auto`` compiles: those whose faster steps pay back their compile time.

``torch.compile`` of the decoder layers (:mod:`ladder.model.training.steps`) makes every step faster and costs a
fixed time per process: the first run of a compiled shape compiles cold, later runs of it load the kernels that
the first left in the ladder's cache. The layers of one shape share one graph, so what compiles once is a
*group*: runs with the same layer (width, heads, head size, FFN width), micro-batch, sequence length and
precision (depth, tied or untied and the recipe do not matter). A group compiles when the time its runs save,
their estimated eager time x (1 - 1 / speedup), exceeds one cold compile plus a warm one per further run.

The costs are ``benchmarks/bench_trainer.py --compile``'s figures, taken on the safe side:

- CPU (2026-12-02, one thread, the default study's six rungs): compiled/eager 1.10-1.24x, cold compile 15-17 s
  (37 s on a slower host the same day), warm 2.8-3.0 s. Here: speedup 1.10, cold 40 s, warm 5 s; a lone run
  compiles when it trains for more than ~7 minutes. A C++ compiler must be on the PATH (inductor builds its CPU
  kernels with it); without one nothing compiles.
- GPUs: no eager-against-compiled measurement yet (``benchmarks/gpu_check.py`` ran compiled on an H200 only,
  benchmarks/README.md), so ``auto`` does not compile there; ``compile: true`` does.

The decision is the plan's (``compile`` is not part of a run's id: the same computation, to fp32 round-off), and
is made again whenever the study is planned.
"""

from __future__ import annotations

import os
import shutil
from collections import defaultdict
from dataclasses import dataclass

from ladder.model.config import RunSpec


@dataclass(frozen=True)
class CompileCosts:
    speedup: float  # compiled over eager steps/s
    cold_s: float  # the first compile of a shape (empty cache)
    warm_s: float  # a later run of the shape (kernels from the cache)

    def saves(self, eager_s: float, runs: int) -> float:
        """Seconds that compiling a group of ``runs`` runs of ``eager_s`` eager seconds in all saves (< 0: costs)."""
        return eager_s * (1.0 - 1.0 / self.speedup) - self.cold_s - self.warm_s * max(0, runs - 1)

    def break_even_s(self) -> float:
        """Eager training time from which a lone run pays back its cold compile."""
        return self.cold_s / (1.0 - 1.0 / self.speedup)


CPU_COSTS = CompileCosts(speedup=1.10, cold_s=40.0, warm_s=5.0)


def cxx_compiler() -> str | None:
    """The C++ compiler inductor would use on CPU (``$CXX``, else the first of g++, c++, clang++ on the PATH)."""
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return name
    return None


def compile_group(run: RunSpec) -> tuple:
    """What one compiled graph serves: runs equal here load each other's kernels."""
    s = run.shape
    return (s.d_model, s.n_heads, s.n_kv_heads, s.head_dim, s.ffn_dim, run.micro_batch_size, run.data.seq_len,
            run.precision)  # fmt: skip


def resolve_compile(
    runs: list[RunSpec], setting: bool | str, hardware: str, estimates_s: dict[str, float]
) -> tuple[list[RunSpec], str | None]:
    """``runs`` with ``compile`` set from the study's ``setting`` (``auto`` decided per group, see the module
    docstring), and a note saying what ``auto`` decided (None for true or false)."""
    if setting != "auto":
        return [
            r if r.compile == bool(setting) else r.model_copy(update={"compile": bool(setting)}) for r in runs
        ], None
    chosen: set[tuple] = set()
    if hardware != "cpu":
        why = f"not measured on a GPU yet (benchmarks/gpu_check.py): {hardware} runs train eager; `compile: true` compiles"
    elif cxx_compiler() is None:
        why = "no C++ compiler on the PATH (inductor needs one on CPU): every run trains eager"
    else:
        groups: dict[tuple, list[RunSpec]] = defaultdict(list)
        for r in runs:
            groups[compile_group(r)].append(r)
        chosen = {k for k, rs in groups.items()
                  if CPU_COSTS.saves(sum(estimates_s.get(r.run_id, 0.0) for r in rs), len(rs)) > 0}  # fmt: skip
        c = CPU_COSTS
        why = (f"compiled where the steps saved pay the compile back: a run group of one layer shape and micro-batch "
               f"saves its eager time x {1 - 1 / c.speedup:.0%} against {c.cold_s:.0f} s cold + {c.warm_s:.0f} s per "
               f"further run (a lone run from ~{c.break_even_s() / 60:.0f} min; benchmarks/bench_trainer.py --compile)")  # fmt: skip
    out = [r.model_copy(update={"compile": compile_group(r) in chosen}) for r in runs]
    n = sum(r.compile for r in out)
    return out, f"compile auto: {n} of {len(out)} run(s) compiled; {why}"
