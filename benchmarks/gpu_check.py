"""Prove the GPU paths of the trainer on a real accelerator in one script of at most a few minutes, and print one
JSON line of results.

    python benchmarks/gpu_check.py                  # on a CUDA machine: the checks below on GPU 0 (+ DDP on 2)
    python benchmarks/gpu_check.py --packing        # also: aggregate tokens/s of 1, 2 and 4 runs sharing GPU 0
    python benchmarks/gpu_check.py --device cpu     # the CPU fallback (what the test suite runs)

On CUDA it trains a ~20M-parameter Llama (d_model 384, 12 layers, GQA 6/2 heads, vocab 8192, seq 1024) and a
SmolLM2-135M-shaped one (d_model 576, 30 layers, 9/3 heads, ffn 1536, vocab 49152, RoPE theta 1e5, tied, seq
2048) with ladder's own trainer (``train()`` on a run directory) the way a GPU study runs: bf16 autocast, the
decoder layers compiled, fused AdamW, SDPA, the chunked loss, two micro-batches per step. For each model:

- the loss falls (the data is a learnable stream of repeated random phrases): mean of the last 5 steps at least
  ``LOSS_DROP`` nats below the first step;
- over the first ``--match-steps`` steps the bf16 + compile losses stay within ``BF16_TOLERANCE`` (relative) of an
  fp32 run of the same spec without compile (fp32 means TF32 matmuls on CUDA, as the trainer sets them);
- resume: the run stopped half-way (checkpoint) and resumed ends with exactly the uninterrupted run's losses.
  The uninterrupted run is repeated once: where GPU kernels are not deterministic (``repeat_bit_exact: false``,
  as on an H200 with torch 2.11), the resumed curve must instead stay within twice the repeat's difference plus
  ``RESUME_NOISE_FLOOR``;
- tokens/s and MFU against the GPU's bf16 dense peak (printed, from ``ladder.model.hardware``): result.json's
  whole-run figure, which includes the compiling first step, and ``steady_*``, the median of the last ten steps;
  peak allocated memory (``result.json``) beside the plan's estimate (``ladder.model.memory``).

With 2+ GPUs visible it also trains the 20M model as a 2-process NCCL DDP run and compares its loss curve with one
process. The CPU fallback runs the same checks on two tiny models in fp32 (the tolerance becomes
``FP32_TOLERANCE``, compile stays off: it would dominate the run time) with a 2-process gloo DDP run. Exit code 0
when every check passed.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

BF16_TOLERANCE = 2e-2  # relative loss difference, bf16 autocast + compile against fp32, over the first steps
FP32_TOLERANCE = 1e-4  # the same on CPU, where both runs are fp32 (only the chunk order of the loss can differ)
RESUME_NOISE_FLOOR = 1e-3  # relative loss difference a resume may add where two plain runs are not bit-exact
PACKING_STEPS = 200  # long enough that the runs sharing a GPU train side by side after their compiles
LOSS_DROP = 0.5  # nats the loss must fall from the first step to the mean of the last five

SHAPES: dict[str, dict[str, Any]] = {
    "20M": dict(d_model=384, n_layers=12, n_heads=6, n_kv_heads=2, head_dim=64, ffn_dim=1024, vocab_size=8192,
                tied=True, seq_len=1024, sequences=32, micro=16, steps=40, lr=3e-3),
    "smollm2-135m": dict(d_model=576, n_layers=30, n_heads=9, n_kv_heads=3, head_dim=64, ffn_dim=1536,
                         vocab_size=49152, tied=True, rope_theta=1e5, init_std=0.0417, seq_len=2048, sequences=16,
                         micro=8, steps=30, lr=3e-3),
}  # fmt: skip
CPU_SHAPES: dict[str, dict[str, Any]] = {
    "tiny": dict(d_model=32, n_layers=2, n_heads=2, n_kv_heads=1, head_dim=16, ffn_dim=64, vocab_size=128, tied=True,
                 seq_len=32, sequences=8, micro=4, steps=30, lr=1e-2),
    "tiny-untied": dict(d_model=48, n_layers=2, n_heads=3, n_kv_heads=3, head_dim=16, ffn_dim=96, vocab_size=160,
                        tied=False, seq_len=32, sequences=6, micro=4, steps=24, lr=1e-2),
}  # fmt: skip


def phrase_stream(vocab: int, n_tokens: int, seed: int = 0) -> np.ndarray:
    """A learnable token stream: random phrases of 4-16 tokens (256 of them, fewer for a tiny vocabulary),
    repeated in random order."""
    rng = np.random.default_rng(seed)
    phrases = [rng.integers(1, vocab, size=int(rng.integers(4, 17))) for _ in range(min(256, vocab // 8))]
    out, total = [], 0
    while total < n_tokens:
        p = phrases[int(rng.integers(0, len(phrases)))]
        out.append(p)
        total += len(p)
    return np.concatenate(out)[:n_tokens].astype(np.int64)


def make_spec(name: str, cfg: dict[str, Any], *, precision: str, compile: bool, steps: int | None = None):
    from ladder.model.config import DataConfig, OptimizerConfig, RunSpec, ScheduleConfig
    from ladder.model.shape import ModelShape

    keys = ("d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim", "ffn_dim", "vocab_size", "tied",
            "rope_theta", "init_std")  # fmt: skip
    shape = ModelShape(**{k: cfg[k] for k in keys if k in cfg}, max_seq_len=cfg["seq_len"])
    seq, S = cfg["seq_len"], cfg["sequences"]
    steps = steps or cfg["steps"]
    return RunSpec(
        study="gpu-check", run_id="", param_convention="total", params=shape.params_total, shape=shape,
        data=DataConfig(seq_len=seq, validation_tokens=4 * seq), tokens=steps * S * seq, batch_tokens=S * seq,
        micro_batch_size=cfg["micro"], steps=steps, lr=cfg["lr"], warmup_steps=max(1, steps // 10),
        schedule=ScheduleConfig(kind="cosine"), optimizer=OptimizerConfig(), precision=precision, compile=compile,
        eval_interval=10**9, eval_tokens=2 * seq, log_interval=1, checkpoint_interval=10**9,
        checkpoint_minutes=1e6, flops_per_token=shape.flops_per_token(seq), flops=1.0, seed=0,
    ).with_id()  # fmt: skip


def dataset(cfg: dict[str, Any]):
    from ladder.model.training.inputs import ArrayWindows, TrainData

    seq = cfg["seq_len"]
    n = (cfg["steps"] * cfg["sequences"] + 64) * (seq + 1)
    toks = phrase_stream(cfg["vocab_size"], n)
    split = len(toks) - 16 * (seq + 1)
    return TrainData(train=ArrayWindows(toks[:split], seq), val=ArrayWindows(toks[split:], seq))


def run_dir(root: Path, spec, label: str) -> Path:
    run = root / label / spec.run_id
    run.mkdir(parents=True, exist_ok=True)
    (run / "spec.json").write_text(spec.model_dump_json())
    return run


def train_records(run: Path) -> list[dict[str, Any]]:
    recs = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in recs if r.get("kind") == "train"]


def losses(run: Path) -> list[float]:
    return [r["loss"] for r in train_records(run)]


def max_rel_diff(a: list[float], b: list[float]) -> float:
    return max((abs(x - y) / abs(y) for x, y in zip(a, b)), default=float("inf"))


def check_model(name: str, cfg: dict[str, Any], root: Path, device: str, fast: dict[str, Any],
                match_steps: int) -> dict[str, Any]:  # fmt: skip
    """The checks of one model (see the module docstring)."""
    from ladder.model.memory import run_memory
    from ladder.model.training.loop import train

    t0 = time.perf_counter()
    data = dataset(cfg)
    spec = make_spec(name, cfg, **fast)
    tol = BF16_TOLERANCE if fast["precision"] == "bf16" else FP32_TOLERANCE
    out: dict[str, Any] = {"params_total": spec.shape.params_total, "precision": fast["precision"],
                           "compile": fast["compile"], "tolerance": tol}  # fmt: skip

    main = run_dir(root, spec, f"{name}-main")
    result = train(main, dataset=data, device=device, handle_signals=False)
    curve = losses(main)
    out["loss_first"], out["loss_last5"] = curve[0], float(np.mean(curve[-5:]))
    out["loss_falls"] = out["loss_last5"] < curve[0] - LOSS_DROP
    for key in ("tokens_per_s", "mfu", "peak_flops", "peak_flops_source", "device_name", "peak_gpu_allocated_bytes",
                "peak_rss_bytes", "train_time_s"):  # fmt: skip
        out[key] = result.get(key)
    # result.json's tokens/s counts every step, the first (compiling) one too; the last log interval is the rate
    # a long run settles at
    steady = [r["interval_tokens_per_s"] for r in train_records(main)[-10:] if r.get("interval_tokens_per_s")]
    out["steady_tokens_per_s"] = float(np.median(steady)) if steady else None
    if out["steady_tokens_per_s"] and result.get("peak_flops"):
        out["steady_mfu"] = out["steady_tokens_per_s"] * spec.flops_per_token / result["peak_flops"]
    out["estimated_memory_bytes"] = run_memory(spec.shape, spec.micro_batch_size, spec.data.seq_len,
                                               fast["precision"]).total  # fmt: skip

    ref_spec = make_spec(name, cfg, precision="fp32", compile=False, steps=cfg["steps"])
    ref = run_dir(root, ref_spec, f"{name}-fp32")
    train(ref, dataset=data, device=device, handle_signals=False, stop_after_steps=match_steps)
    ref_curve = losses(ref)[:match_steps]
    rel = [abs(a - b) / abs(b) for a, b in zip(curve[:match_steps], ref_curve)]
    out["fp32_max_rel_diff"] = max(rel)
    out["matches_fp32"] = max(rel) <= tol

    again = run_dir(root, spec, f"{name}-repeat")
    train(again, dataset=data, device=device, handle_signals=False)
    repeat_curve = losses(again)
    out["repeat_bit_exact"] = repeat_curve == curve
    out["repeat_max_rel_diff"] = max_rel_diff(repeat_curve, curve)

    resumed = run_dir(root, spec, f"{name}-resume")
    half = max(1, spec.steps // 2)
    stopped = train(resumed, dataset=data, device=device, handle_signals=False, stop_after_steps=half)
    assert stopped["status"] == "stopped", stopped
    final = train(resumed, dataset=data, device=device, handle_signals=False)
    resumed_curve = losses(resumed)
    out["resume_bit_exact"] = resumed_curve == curve and final["final_train_loss"] == result["final_train_loss"]
    out["resume_max_rel_diff"] = max_rel_diff(resumed_curve, curve)
    # Where kernels are not deterministic (atomics in the backward pass), two uninterrupted runs already differ; a
    # resume is then judged against that noise: a wrong schedule, data position or optimizer state after the
    # restart moves the loss by far more than RESUME_NOISE_FLOOR.
    out["resume_within_repeat_noise"] = len(resumed_curve) == len(curve) and out["resume_max_rel_diff"] <= (
        2 * out["repeat_max_rel_diff"] + RESUME_NOISE_FLOOR
    )
    out["resume_ok"] = out["resume_bit_exact"] if out["repeat_bit_exact"] else out["resume_within_repeat_noise"]
    out["ok"] = bool(out["loss_falls"] and out["matches_fp32"] and out["resume_ok"])
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ddp_worker(run: str, model: str, device: str) -> None:
    """One rank of the DDP check (started by :func:`check_ddp` with RANK/WORLD_SIZE in the environment)."""
    import torch

    from ladder.model.training.loop import train

    if device == "cpu":
        torch.set_num_threads(1)
    cfg = (SHAPES if device == "cuda" else CPU_SHAPES)[model]
    result = train(run, dataset=dataset(cfg), handle_signals=False)
    print("RESULT " + json.dumps({"status": result["status"], "world_size": result["world_size"]}), flush=True)


def check_ddp(name: str, cfg: dict[str, Any], root: Path, device: str, fast: dict[str, Any]) -> dict[str, Any]:
    """Two processes (NCCL on 2 GPUs, gloo on CPU) against one process on the same global batch."""
    from ladder.model.training.loop import train

    t0 = time.perf_counter()
    spec = make_spec(name, cfg, **fast)
    single = run_dir(root, spec, "ddp-single")
    train(single, dataset=dataset(cfg), device=device if device == "cpu" else "cuda:0", handle_signals=False)
    multi = run_dir(root, spec, "ddp-two")
    port = free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))  # fmt: skip
        if device == "cpu":
            env.update(OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
        procs.append(subprocess.Popen([sys.executable, __file__, "--ddp-worker", str(multi), "--ddp-model", name,
                                       "--device", device], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))  # fmt: skip
    outs = [p.communicate(timeout=600) for p in procs]
    errors = [err[-2000:] for p, (_, err) in zip(procs, outs) if p.returncode != 0]
    out: dict[str, Any] = {"backend": "nccl" if device == "cuda" else "gloo", "world_size": 2}
    if errors:
        out.update(ok=False, error=errors[0])
        return out
    a, b = losses(single), losses(multi)
    tol = BF16_TOLERANCE if fast["precision"] == "bf16" else FP32_TOLERANCE
    out["max_rel_diff"] = max(abs(x - y) / abs(y) for x, y in zip(b, a))
    out["ok"] = len(a) == len(b) and out["max_rel_diff"] <= tol
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def packing_worker(run: str, model: str) -> None:
    from ladder.model.training.loop import train

    result = train(run, dataset=dataset(dict(SHAPES[model], steps=PACKING_STEPS)), handle_signals=False)
    steady = [r["interval_tokens_per_s"] for r in train_records(Path(run))[-20:] if r.get("interval_tokens_per_s")]
    got = {"tokens_per_s": result["tokens_per_s"], "steady_tokens_per_s": float(np.median(steady)) if steady else None}
    print("RESULT " + json.dumps(got), flush=True)


def check_packing(name: str, cfg: dict[str, Any], root: Path, fast: dict[str, Any]) -> dict[str, Any]:
    """Aggregate tokens/s of 1, 2 and 4 copies of a run training at once on GPU 0 (the packing rule's data)."""
    out: dict[str, Any] = {"steps": PACKING_STEPS}
    spec = make_spec(name, dict(cfg, steps=PACKING_STEPS), **fast)
    for k in (1, 2, 4):
        procs = []
        for i in range(k):
            run = run_dir(root, spec, f"pack{k}-{i}")
            env = dict(os.environ, CUDA_VISIBLE_DEVICES=os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0])
            procs.append(subprocess.Popen([sys.executable, __file__, "--packing-worker", str(run), "--ddp-model", name],
                                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))  # fmt: skip
        rates, steady = [], []
        for p in procs:
            so, se = p.communicate(timeout=600)
            if p.returncode == 0 and "RESULT " in so:
                got = json.loads(so.split("RESULT ", 1)[1].splitlines()[0])
                rates.append(got["tokens_per_s"])
                steady.append(got["steady_tokens_per_s"])
            else:
                out.setdefault("errors", []).append(f"{k} runs: exit {p.returncode}: {se[-1500:]}")
        out[f"{k}_runs_tokens_per_s"] = sum(rates) if len(rates) == k else None
        # the sum of each run's rate over its last 20 steps: the runs' compiles differ in length, so their last
        # steps overlap best
        out[f"{k}_runs_steady_tokens_per_s"] = sum(steady) if len(steady) == k and all(steady) else None
    out["ok"] = "errors" not in out
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    p.add_argument("--models", default=None, help="comma-separated subset of the models to check")
    p.add_argument("--match-steps", type=int, default=10, help="first steps compared with the fp32 run")
    p.add_argument("--no-ddp", action="store_true", help="skip the 2-process DDP check")
    p.add_argument("--packing", action="store_true", help="also measure 1, 2 and 4 runs sharing one GPU")
    p.add_argument("--packing-only", action="store_true", help="only the packing measurement (no model checks)")
    p.add_argument("--ddp-worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--packing-worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--ddp-model", default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    device = a.device if a.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if a.ddp_worker:
        ddp_worker(a.ddp_worker, a.ddp_model, device)
        return 0
    if a.packing_worker:
        packing_worker(a.packing_worker, a.ddp_model)
        return 0
    import logging

    import transformers

    transformers.logging.set_verbosity_error()
    logging.getLogger("ladder").setLevel(logging.WARNING)
    from ladder.model.hardware import gpu_table_peak, peak_flops

    t0 = time.perf_counter()
    if device == "cpu":
        torch.set_num_threads(1)
    shapes = SHAPES if device == "cuda" else CPU_SHAPES
    if a.models:
        shapes = {k: v for k, v in shapes.items() if k in a.models.split(",")}
    fast = {"precision": "bf16", "compile": True} if device == "cuda" else {"precision": "fp32", "compile": False}
    report: dict[str, Any] = {
        "device": device,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cuda": torch.version.cuda,
        "gpus": torch.cuda.device_count() if device == "cuda" else 0,
    }
    if device == "cuda":
        name = torch.cuda.get_device_name(0)
        report.update(device_name=name, bf16_dense_peak_flops=gpu_table_peak(name, "bf16") or
                      peak_flops("cuda:0", "bf16").flops)  # fmt: skip
        print(f"# {name}: bf16 dense peak {report['bf16_dense_peak_flops'] / 1e12:.0f} TFLOP/s", file=sys.stderr)
    failures = []
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        root = Path(tmp)
        report["models"] = {}
        for name, cfg in ({} if a.packing_only else shapes).items():
            try:
                r = check_model(name, cfg, root, device if device == "cpu" else "cuda:0", fast, a.match_steps)
            except Exception as exc:  # noqa: BLE001 - reported in the JSON line
                r = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            report["models"][name] = r
            if not r["ok"]:
                failures.append(name)
            print(f"# {name}: {json.dumps(r)}", file=sys.stderr)
        first = next(iter(shapes))
        if not a.no_ddp and not a.packing_only and (device == "cpu" or torch.cuda.device_count() >= 2):
            report["ddp"] = check_ddp(first, shapes[first], root, device, fast)
            if not report["ddp"]["ok"]:
                failures.append("ddp")
        else:
            report["ddp"] = None
        if (a.packing or a.packing_only) and device == "cuda":
            report["packing"] = check_packing(first, shapes[first], root, fast)
            if not report["packing"]["ok"]:
                failures.append("packing")
    report["failures"] = failures
    report["ok"] = not failures
    report["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
