"""The kernels every trainer of a default-study rung has to run, timed alone: how fast a step could be if a trainer
did nothing but them, and so the best ratio any trainer that calls them can reach over the HF Trainer.

    python benchmarks/kernel_floor.py                                # every rung, one thread
    python benchmarks/kernel_floor.py --hf-from trainer.json         # with bench_trainer.py --json's HF rates

Per rung, at its micro-batch shape (``ladder plan default``'s, as ``bench_trainer.py`` takes it), one torch thread,
fp32, the best of ``--repeats`` timings of ``--iters`` calls each:

- attention: ``scaled_dot_product_attention`` (causal; on CPU the flash kernel), forward and backward, per layer;
- matmuls: the decoder's seven projections (q, k, v, o, gate, up, down), forward and both gradients, per layer,
  and the LM head's three (logits, the hidden states' gradient, the weight's gradient).

Both trainers (ladder's and a plain HF ``Trainer``) call exactly these kernels; what they do besides (norms, RoPE,
SwiGLU, residuals, the loss, the optimizer, the framework) is where one can be faster than the other. So
``HF step / floor`` bounds ladder's ratio over HF unless the kernels themselves change (a fused attention,
a compiled graph). Not a test: run on demand on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_trainer import rung_specs  # noqa: E402 - the same rungs as the trainer benchmark


def best_ms(fn, iters: int, repeats: int) -> float:
    fn()  # allocations, one-time dispatch
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        best = min(best, (time.perf_counter() - t0) / iters)
    return best * 1e3


def floor_ms(spec, iters: int, repeats: int) -> dict[str, float]:
    """Milliseconds per optimizer step of the shared kernels at the rung's shapes (every micro-batch of a step)."""
    s, T = spec.shape, spec.data.seq_len
    g = torch.Generator().manual_seed(0)
    out = {"attention": 0.0, "matmuls": 0.0}
    sizes = [spec.micro_batch_size] * (spec.sequences_per_batch // spec.micro_batch_size)
    if spec.sequences_per_batch % spec.micro_batch_size:
        sizes.append(spec.sequences_per_batch % spec.micro_batch_size)
    for B in sizes:
        N, d, hd, ff = B * T, s.d_model, s.head_dim, s.ffn_dim
        q, k, v = (torch.randn(B, s.n_heads, T, hd, generator=g).requires_grad_() for _ in range(3))
        grad = torch.randn(B, s.n_heads, T, hd, generator=g)

        def attention() -> None:
            F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(grad)
            q.grad = k.grad = v.grad = None

        qkv, kv = s.n_heads * hd, s.n_kv_heads * hd
        projections = [(qkv, d), (kv, d), (kv, d), (d, qkv), (ff, d), (ff, d), (d, ff)]  # (out, in) features
        weights = [torch.randn(o, i, generator=g) for o, i in projections]
        inputs = {i: torch.randn(N, i, generator=g) for _, i in projections}
        head, hidden = torch.randn(s.vocab_size, d, generator=g), torch.randn(N, d, generator=g)

        def matmuls(pairs) -> None:
            for w, x in pairs:
                y = x @ w.t()  # forward
                y @ w  # the input's gradient (y stands in for the output's gradient: same shape)
                y.t() @ x  # the weight's gradient

        layer = [(w, inputs[i]) for w, (_, i) in zip(weights, projections)]
        out["attention"] += s.n_layers * best_ms(attention, iters, repeats)
        out["matmuls"] += s.n_layers * best_ms(lambda: matmuls(layer), iters, repeats)
        out["matmuls"] += best_ms(lambda: matmuls([(head, hidden)]), iters, repeats)
    out["floor"] = out["attention"] + out["matmuls"]
    return {k: round(v, 2) for k, v in out.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default=None, help="comma-separated default-study sizes (default: every rung)")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--hf-from",
        type=Path,
        default=None,
        help="bench_trainer.py --json output: adds the HF and ladder step times and the bound",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object only")
    a = p.parse_args()
    torch.set_num_threads(1)
    bench = json.loads(a.hf_from.read_text())["rungs"] if a.hf_from else {}
    rows = {}
    for spec in rung_specs(a.sizes.split(",") if a.sizes else None):
        size = str(spec.axes["size"])
        row: dict = floor_ms(spec, a.iters, a.repeats)
        tokens = spec.sequences_per_batch * spec.data.seq_len
        if size in bench:
            hf, ladder = (1e3 * tokens / bench[size][k] for k in ("hf_tok_s", "ladder_tok_s"))
            row.update(hf_step_ms=round(hf, 1), ladder_step_ms=round(ladder, 1), ladder_rest_ms=round(ladder - row["floor"], 1),
                       hf_rest_ms=round(hf - row["floor"], 1), best_ratio=round(hf / row["floor"], 2),
                       rest_for_target_ms=round(hf / 1.3 - row["floor"], 1))  # fmt: skip
        rows[size] = row
        print(f"# {size}: {row}", file=sys.stderr, flush=True)
    if a.json:
        print(json.dumps({"threads": 1, "rungs": rows}))
        return
    print("| rung | attention ms | matmuls ms | floor ms | HF step ms | ladder step ms | ladder's rest ms | HF's rest ms "
          "| HF / floor | rest allowed at 1.3x ms |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for size, r in rows.items():
        cells = [r.get(k, "") for k in ("hf_step_ms", "ladder_step_ms", "ladder_rest_ms", "hf_rest_ms")]
        bound = f"{r['best_ratio']:.2f}x" if "best_ratio" in r else ""
        print(
            f"| {size} | {r['attention']:.1f} | {r['matmuls']:.1f} | {r['floor']:.1f} | "
            + " | ".join(str(c) for c in cells)
            + f" | {bound} | {r.get('rest_for_target_ms', '')} |"
        )


if __name__ == "__main__":
    main()
