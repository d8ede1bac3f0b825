"""Tiny runs for the trainer's tests: a two-layer model, a learnable token stream, a run directory, its metrics,
a trainer in a subprocess (resume, DDP and branch tests start one), a tiny prepared corpus. Shared by the tests under
tests/model/ (the one-thread fixture is in tests/model/conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from ladder.layout import RunDir, read_jsonl
from ladder.model.config import DataConfig, OptimizerConfig, RunSpec, ScheduleConfig
from ladder.model.shape import ModelShape
from ladder.model.training.inputs import ArrayWindows, TrainData
from ladder.model.training.loop import train

SEQ = 32
REPO = Path(__file__).resolve().parents[3]


def tiny_shape(vocab: int = 128, tied: bool = True) -> ModelShape:
    return ModelShape(d_model=32, n_layers=2, n_heads=2, n_kv_heads=1, head_dim=16, ffn_dim=64, vocab_size=vocab,
                      tied=tied, max_seq_len=SEQ)  # fmt: skip


def make_spec(steps: int = 40, *, shape: ModelShape | None = None, seqs_per_step: int = 8, micro: int = 4,
              **overrides) -> RunSpec:  # fmt: skip
    shape = shape or tiny_shape()
    fields = dict(
        study="test", param_convention="total", params=shape.params_total, shape=shape,
        data=DataConfig(seq_len=SEQ, validation_tokens=4 * SEQ),
        tokens=steps * seqs_per_step * SEQ, batch_tokens=seqs_per_step * SEQ, micro_batch_size=micro, steps=steps,
        lr=3e-3, warmup_steps=max(1, steps // 10), schedule=ScheduleConfig(kind="cosine"), optimizer=OptimizerConfig(),
        eval_interval=10, eval_tokens=4 * SEQ, log_interval=5, checkpoint_interval=10, checkpoint_minutes=60,
        flops_per_token=shape.flops_per_token(SEQ), flops=1.0, seed=0,
    )  # fmt: skip
    fields.update(overrides)
    spec = RunSpec(**fields)
    return spec.with_id()


def tiny_tokens(vocab: int = 128, n: int = 20_000, seed: int = 0) -> np.ndarray:
    """A learnable stream: a few hundred random 'phrases' repeated in random order."""
    rng = np.random.default_rng(seed)
    phrases = [rng.integers(2, vocab, size=rng.integers(4, 12)) for _ in range(64)]
    out, total = [], 0
    while total < n:
        p = phrases[int(rng.integers(0, len(phrases)))]
        out.append(p)
        out.append([0])  # an "EOS" between phrases
        total += len(p) + 1
    return np.concatenate(out)[:n].astype(np.int64)


def tiny_data(vocab: int = 128) -> TrainData:
    toks = tiny_tokens(vocab)
    split = int(len(toks) * 0.85)
    return TrainData(train=ArrayWindows(toks[:split], SEQ), val=ArrayWindows(toks[split:], SEQ), eos_id=0)


def make_run(root: Path, spec: RunSpec) -> Path:
    run = Path(root) / spec.run_id
    run.mkdir(parents=True, exist_ok=True)
    (run / "spec.json").write_text(spec.model_dump_json(indent=2))
    return run


def metrics(run: Path, kind: str | None = None) -> list[dict]:
    recs = list(read_jsonl(RunDir(run).metrics))
    return [r for r in recs if kind is None or r["kind"] == kind]


def subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    return env


def subprocess_train_main() -> None:
    """Entry point of the subprocess tests: ``python -c '...subprocess_train_main()' RUN_DIR [USR2_MARKER]``.
    Trains the run on ``tiny_data`` with one thread; exits with ``Preempted.exit_code`` when preempted. With a
    marker path, first installs a submitit-like USR2 handler (writes the marker, exits 42)."""
    import signal

    from ladder.model.training.preemption import Preempted

    torch.set_num_threads(1)
    run = Path(sys.argv[1])
    if len(sys.argv) > 2:
        marker = Path(sys.argv[2])

        def submitit_like(signum, frame):
            assert (run / "checkpoint.json").is_file()  # called after the trainer checkpointed
            marker.write_text(
                json.dumps({"signum": signum, "pointer": json.loads((run / "checkpoint.json").read_text())})
            )
            sys.exit(42)

        signal.signal(signal.SIGUSR2, submitit_like)
    spec = RunSpec.model_validate_json((run / "spec.json").read_text())
    try:
        result = train(run, dataset=tiny_data(spec.shape.vocab_size))
    except Preempted as e:
        print(f"PREEMPTED {e.step}", flush=True)
        sys.exit(e.exit_code)
    print("RESULT " + json.dumps(result), flush=True)


SUBPROCESS_CODE = "from tests.model.training.tiny_runs import subprocess_train_main; subprocess_train_main()"


def start(run: Path, *extra: str) -> subprocess.Popen:
    """The trainer on ``run`` in a subprocess (:func:`subprocess_train_main`), its output piped."""
    return subprocess.Popen(
        [sys.executable, "-c", SUBPROCESS_CODE, str(run), *extra],
        cwd=REPO, env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


_PREPARED: dict = {}


def prepared_tiny_corpus():
    """(corpus folder, cache root, PreparedData) of a tiny text corpus prepared by ladder.model.data.prepare with a
    300-id tokenizer; prepared once per test process (shared by test_train and test_sanity)."""
    if not _PREPARED:
        import atexit
        import shutil
        import tempfile

        from ladder.model.data.prepare import prepare_data

        root = Path(tempfile.mkdtemp(prefix="ladder-test-corpus-"))
        atexit.register(shutil.rmtree, root, True)
        corpus = root / "corpus"
        corpus.mkdir()
        rng = np.random.default_rng(0)
        syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "do", "ge"]
        words = sorted({"".join(rng.choice(syllables, size=int(rng.integers(1, 4)))) for _ in range(400)})
        for i in range(60):
            (corpus / f"doc{i:03d}.txt").write_text(" ".join(rng.choice(words, size=80)).capitalize() + ".\n")
        cfg = DataConfig(corpus=str(corpus), seq_len=SEQ, validation_fraction=0.2, validation_tokens=2 * SEQ)
        prepared = prepare_data(cfg, 300, cache_root=root / "cache", progress=False)
        _PREPARED.update(corpus=corpus, cache=root / "cache", prepared=prepared, cfg=cfg)
    return _PREPARED
