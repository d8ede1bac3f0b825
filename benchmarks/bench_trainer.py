"""Trainer throughput on CPU fp32: ladder's trainer vs the Hugging Face ``Trainer`` on the same model and data.

    python benchmarks/bench_trainer.py                      # three sizes, 2 torch threads
    python benchmarks/bench_trainer.py --threads 1 --steps 12 --warmup 3 --repeats 3   # the recorded table
    python benchmarks/bench_trainer.py --sizes 0.5M --steps 20 --json out.json

For each size (Llama, vocab 4096, seq 256, 16 sequences per step, tied, fp32) both trainers run the same number
of optimizer steps (AdamW, cosine, grad clip 1.0, no accumulation) on the same random-token windows. Throughput is
wall-clock between the end of the warm-up steps and the end of the last step (data loading, logging and callbacks
included on both sides; ladder's final eval and model save come after and are excluded). Each size runs
``--repeats`` times per trainer, alternating which goes first, and the best rate of each is kept (the machine is
shared, so the best is the least disturbed). MFU is flops_per_token (6 x matmul params + attention,
``ModelShape.flops_per_token``) x tokens/s over the best fp32 1024^2 matmul rate measured in the same process
before every timed run.

The machine is shared: the 1-minute load average is printed before and after; another busy process on one of
two cores cuts 2-thread throughput 3-5x, so compare rows measured at similar load (``--threads 1`` is much less
sensitive to one other busy process). Not a test: run on demand.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from ladder.model.config import DataConfig, OptimizerConfig, RunSpec, ScheduleConfig
from ladder.model.hardware import measure_matmul_flops
from ladder.model.shape import ModelShape
from ladder.model.training.inputs import ArrayWindows, TrainData
from ladder.model.training.llama import build_model
from ladder.model.training.loop import train

VOCAB, SEQ, BATCH = 4096, 256, 16
SIZES = {  # label: (d_model, n_layers, n_heads, ffn_dim)
    "0.5M": (128, 2, 4, 512),
    "2.4M": (192, 4, 6, 768),
    "8.4M": (256, 8, 8, 1024),
}


def shape_of(label: str) -> ModelShape:
    d, n_layers, heads, ffn = SIZES[label]
    return ModelShape(d_model=d, n_layers=n_layers, n_heads=heads, n_kv_heads=heads, head_dim=d // heads,
                      ffn_dim=ffn, vocab_size=VOCAB, tied=True, max_seq_len=SEQ)  # fmt: skip


def tokens(n_windows: int) -> np.ndarray:
    return np.random.default_rng(0).integers(0, VOCAB, size=n_windows * (SEQ + 1), dtype=np.int64)


def bench_ladder(shape: ModelShape, steps: int, warmup: int, workdir: Path) -> float:
    spec = RunSpec(
        study="bench", param_convention="non_embedding", params=shape.params_non_embedding, shape=shape,
        data=DataConfig(seq_len=SEQ), tokens=steps * BATCH * SEQ, batch_tokens=BATCH * SEQ, micro_batch_size=BATCH,
        steps=steps, lr=3e-3, warmup_steps=max(1, steps // 10), schedule=ScheduleConfig(kind="cosine"),
        optimizer=OptimizerConfig(), eval_interval=10**9, eval_tokens=SEQ, log_interval=1,
        checkpoint_interval=10**9, checkpoint_minutes=10**6, flops_per_token=shape.flops_per_token(SEQ), flops=1.0,
    ).with_id()  # fmt: skip
    run = workdir / "ladder" / spec.run_id
    run.mkdir(parents=True)
    (run / "spec.json").write_text(spec.model_dump_json())
    toks = tokens(steps * BATCH + 8)
    data = TrainData(train=ArrayWindows(toks, SEQ), val=ArrayWindows(toks[: 2 * (SEQ + 1)], SEQ))
    train(run, dataset=data)
    recs = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    recs = [r for r in recs if r["kind"] == "train"]
    a, b = recs[warmup - 1], recs[-1]
    return (b["tokens"] - a["tokens"]) / (b["elapsed_s"] - a["elapsed_s"])


def bench_hf(shape: ModelShape, steps: int, warmup: int, workdir: Path) -> float:
    from transformers import Trainer, TrainerCallback, TrainingArguments

    toks = tokens(steps * BATCH + 8).reshape(-1, SEQ + 1)

    class Windows(torch.utils.data.Dataset):
        def __len__(self):
            return len(toks)

        def __getitem__(self, i):
            ids = torch.from_numpy(toks[i, :SEQ].copy())  # the model shifts labels itself
            return {"input_ids": ids, "labels": ids}

    ends: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            ends.append(time.perf_counter())

    args = TrainingArguments(
        output_dir=str(workdir / "hf"), per_device_train_batch_size=BATCH, max_steps=steps, learning_rate=3e-3,
        lr_scheduler_type="cosine", warmup_steps=max(1, steps // 10), weight_decay=0.1, adam_beta2=0.95,
        max_grad_norm=1.0, optim="adamw_torch", logging_steps=10**6, save_strategy="no", eval_strategy="no",
        report_to=[], use_cpu=True, dataloader_num_workers=0, disable_tqdm=True, seed=0,
    )  # fmt: skip
    model = build_model(shape, seq_len=SEQ, seed=0)
    from transformers.trainer_callback import PrinterCallback

    trainer = Trainer(model=model, args=args, train_dataset=Windows(), callbacks=[Clock()])
    trainer.remove_callback(PrinterCallback)  # no log dict on stdout
    trainer.train()
    return (len(ends) - warmup) * BATCH * SEQ / (ends[-1] - ends[warmup - 1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default=",".join(SIZES), help=f"comma-separated of {list(SIZES)}")
    p.add_argument("--steps", type=int, default=30, help="optimizer steps per trainer and size")
    p.add_argument("--warmup", type=int, default=5, help="steps excluded from the timing")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=2, help="alternating ladder/HF runs per size; the best is kept")
    p.add_argument("--json", type=Path, default=None, help="also write the rows here")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers

    transformers.logging.set_verbosity_error()
    load0 = os.getloadavg()[0]
    print(f"# {platform.machine()} x{os.cpu_count()}, torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{a.threads} threads; load average before: {load0:.2f}", flush=True)  # fmt: skip
    rows = []
    for label in a.sizes.split(","):
        shape = shape_of(label)
        fpt = shape.flops_per_token(SEQ)
        best = {"ladder": 0.0, "hf": 0.0}
        peaks, loads = [], []
        for rep in range(a.repeats):
            order = ["ladder", "hf"] if rep % 2 == 0 else ["hf", "ladder"]
            for which in order:
                peaks.append(measure_matmul_flops("cpu", torch.float32, seconds=0.5, n=1024, cached=False))
                loads.append(os.getloadavg()[0])
                work = Path(tempfile.mkdtemp(prefix="bench-trainer-"))
                try:
                    fn = bench_ladder if which == "ladder" else bench_hf
                    tps = fn(shape, a.steps, a.warmup, work)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
                print(f"#   {label} rep {rep} {which}: {tps:,.0f} tok/s (load {loads[-1]:.2f}, "
                      f"peak {peaks[-1] / 1e9:.0f} GFLOP/s)", flush=True)  # fmt: skip
                best[which] = max(best[which], tps)
        peak = max(peaks)
        lad, hf = best["ladder"], best["hf"]
        row = {
            "size": label, "params_non_embedding": shape.params_non_embedding, "params_total": shape.params_total,
            "flops_per_token": fpt, "peak_gflops": peak / 1e9, "load": min(loads),
            "ladder_tok_s": lad, "hf_tok_s": hf, "ladder_mfu": fpt * lad / peak, "hf_mfu": fpt * hf / peak,
            "speedup": lad / hf,
        }  # fmt: skip
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"# load average after: {os.getloadavg()[0]:.2f}")
    print()
    print("| size (non-emb) | total params | peak GFLOP/s | min load | ladder tok/s | HF Trainer tok/s | ladder MFU | HF MFU | ladder/HF |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['size']} ({r['params_non_embedding']:,}) | {r['params_total']:,} | {r['peak_gflops']:.0f} | "
              f"{r['load']:.1f} | {r['ladder_tok_s']:,.0f} | {r['hf_tok_s']:,.0f} | {100 * r['ladder_mfu']:.1f}% | "
              f"{100 * r['hf_mfu']:.1f}% | {r['speedup']:.2f}x |")  # fmt: skip
    if a.json:
        a.json.write_text(json.dumps(rows, indent=2))
    if any(r["speedup"] < 0.97 for r in rows):
        print("\nWARNING: ladder's trainer was more than 3% (run-to-run noise) slower than the HF Trainer on some "
              "size; rerun on a quiet machine before concluding", file=sys.stderr)  # fmt: skip


if __name__ == "__main__":
    main()
