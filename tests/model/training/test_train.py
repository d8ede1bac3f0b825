"""The trainer on tiny runs: files written, results, divergence, accumulation; helpers shared with test_resume
and test_ddp (which import them from here)."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from ladder.layout import RunDir, read_jsonl
from ladder.model.config import (
    DataConfig,
    DivergenceConfig,
    OptimizerConfig,
    RunSpec,
    ScheduleConfig,
)
from ladder.model.shape import ModelShape
from ladder.model.training.faults import from_environment, nan_at_step
from ladder.model.training.inputs import ArrayWindows, TrainData
from ladder.model.training.loop import train

SEQ = 32
REPO = Path(__file__).resolve().parents[3]


# ============================================================================================ helpers


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


SUBPROCESS_CODE = "from tests.model.training.test_train import subprocess_train_main; subprocess_train_main()"

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


# ============================================================================================ tests


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One torch thread (the CPU is shared; the subprocess tests use one too, for bit-identical results)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_short_run_writes_every_file_and_the_model_loads_in_plain_transformers(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ladder.model.data.tokenizer import load_tokenizer, train_tokenizer

    words = "the a ladder model trains small runs and fits laws of scale over tokens with care".split()
    rng = np.random.default_rng(1)
    texts = [" ".join(rng.choice(words, size=int(rng.integers(5, 15)))) + "." for _ in range(400)]
    tok_dir = train_tokenizer(texts, 300, tmp_path / "tok")
    tok = load_tokenizer(tok_dir)
    eos = tok.token_to_id("<|endoftext|>")
    stream = np.concatenate([np.array(e.ids + [eos]) for e in tok.encode_batch(texts)])
    split = int(0.8 * len(stream))
    data = TrainData(train=ArrayWindows(stream[:split], SEQ), val=ArrayWindows(stream[split:], SEQ),
                     tokenizer_dir=tok_dir, eos_id=eos, pad_id=tok.token_to_id("<|pad|>"))  # fmt: skip
    spec = make_spec(steps=30, shape=tiny_shape(vocab=300, tied=False), log_interval=1)
    run = make_run(tmp_path / "runs", spec)

    result = train(run, dataset=data)

    rd = RunDir(run)
    assert result["status"] == "done" and json.loads(rd.result.read_text()) == result
    for key in ("run_id", "final_train_loss", "final_eval_loss", "tokens", "steps", "flops", "wall_time_s",
                "tokens_per_s", "mfu", "restarts", "device", "precision", "world_size"):  # fmt: skip
        assert result[key] is not None, key
    assert result["run_id"] == spec.run_id and result["steps"] == 30 and result["tokens"] == 30 * 8 * SEQ
    assert result["flops"] == spec.flops_per_token * result["tokens"]
    assert (result["device"], result["precision"], result["world_size"], result["restarts"]) == ("cpu", "fp32", 1, 0)
    assert 0 < result["mfu"] < 1

    train_recs, eval_recs = metrics(run, "train"), metrics(run, "eval")
    assert [r["step"] for r in train_recs] == list(range(1, 31))
    assert set(train_recs[0]) == {
        "kind",
        "step",
        "tokens",
        "loss",
        "lr",
        "grad_norm",
        "tokens_per_s",
        "interval_tokens_per_s",
        "mfu",
        "elapsed_s",
        "train_time_s",
    }
    # one throughput: the last record's tokens_per_s is the result's (tokens trained / seconds in steps so far)
    last = train_recs[-1]
    assert last["tokens_per_s"] == pytest.approx(result["tokens_per_s"], rel=1e-3)
    assert last["train_time_s"] == result["train_time_s"]
    assert [r["step"] for r in eval_recs] == [10, 20, 30]
    assert eval_recs[-1]["eval_loss"] == result["final_eval_loss"]
    # final_train_loss: mean of the per-step losses of the last ceil(10%) of steps (here: log_interval = 1)
    assert result["final_train_loss"] == pytest.approx(np.mean([r["loss"] for r in train_recs[-3:]]), rel=1e-12)
    assert train_recs[0]["loss"] == pytest.approx(math.log(300), rel=0.1)  # starts near ln(vocab)
    assert result["final_train_loss"] < train_recs[0]["loss"] - 1.0  # and learns

    assert not rd.checkpoint_pointer.exists() and not rd.checkpoint_dirs()  # cleaned up when done
    model = AutoModelForCausalLM.from_pretrained(rd.model)
    # the final evaluation again, from the saved model's own forward and a plain loop over the windows' trigrams
    windows = torch.from_numpy(data.val.batch(range(math.ceil(spec.eval_tokens / SEQ))))
    with torch.no_grad():
        logits = model(input_ids=windows[:, :-1]).logits
    nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), windows[:, 1:], reduction="none").double()
    repeats = torch.zeros_like(nll, dtype=torch.bool)
    for r, w in enumerate(windows.tolist()):
        seen = set()
        for p in range(2, len(w)):
            repeats[r, p - 1] = tuple(w[p - 2 : p + 1]) in seen
            seen.add(tuple(w[p - 2 : p + 1]))
    assert 0 < repeats.sum() < repeats.numel()  # the text repeats itself: both kinds are there
    assert result["final_eval_loss"] == pytest.approx(float(nll.mean()), rel=1e-5)
    assert result["final_eval_loss_repeats"] == pytest.approx(float(nll[repeats].mean()), rel=1e-5)
    assert result["final_eval_loss_novel"] == pytest.approx(float(nll[~repeats].mean()), rel=1e-5)
    assert result["eval_repeat_share"] == pytest.approx(float(repeats.double().mean()), rel=1e-12)
    assert eval_recs[-1]["eval_loss_repeats"] == result["final_eval_loss_repeats"]
    hf_tok = AutoTokenizer.from_pretrained(rd.model)
    assert model.config.eos_token_id == eos == hf_tok.eos_token_id
    ids = hf_tok("the ladder", return_tensors="pt").input_ids
    out = model.generate(ids, max_new_tokens=5, do_sample=False)
    assert out.shape[1] >= ids.shape[1] + 1
    assert isinstance(hf_tok.decode(out[0]), str)

    # a finished run is returned as is, without training again
    before = rd.metrics.read_text()
    assert train(run, dataset=data) == result
    assert rd.metrics.read_text() == before


def test_forced_nan_marks_the_run_diverged_without_a_checkpoint_from_the_nan_state(tmp_path):
    spec = make_spec(steps=20, checkpoint_interval=5)
    run = make_run(tmp_path, spec)
    result = train(run, dataset=tiny_data(), nan_at=nan_at_step(7))
    assert result["status"] == "diverged" and result["diverged_at_step"] == 7
    assert "non-finite" in result["reason"] and result["steps"] == 6
    assert json.loads((run / "result.json").read_text())["status"] == "diverged"
    assert json.loads((run / "checkpoint.json").read_text())["step"] == 5  # the last good one, untouched
    assert [p.name for p in RunDir(run).checkpoint_dirs()] == ["ckpt-000000005"]
    assert not (run / "model").exists()
    assert all(math.isfinite(r["loss"]) for r in metrics(run, "train"))
    assert train(run, dataset=tiny_data())["status"] == "diverged"  # a diverged run is final


def test_sustained_loss_spike_diverges(tmp_path):
    # a huge constant LR blows the loss up from its early minimum
    spec = make_spec(steps=60, lr=3.0, warmup_steps=0, schedule=ScheduleConfig(kind="constant"), grad_clip=None,
                     divergence=DivergenceConfig(spike_factor=1.5, patience=3))  # fmt: skip
    run = make_run(tmp_path, spec)
    result = train(run, dataset=tiny_data())
    assert result["status"] == "diverged"
    assert result["diverged_at_step"] < 60
    assert "lowest typical loss" in result["reason"]  # finite but far above its minimum (deterministic on CPU)


def test_gradient_accumulation_gives_the_same_curve_as_one_big_micro_batch(tmp_path):
    losses = []
    for micro in (8, 2, 3):  # 3 does not divide 8: a smaller last micro-batch, weighted by its size
        spec = make_spec(steps=10, micro=micro, log_interval=1, eval_interval=100)
        run = make_run(tmp_path / str(micro), spec)
        train(run, dataset=tiny_data())
        losses.append([r["loss"] for r in metrics(run, "train")])
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
    np.testing.assert_allclose(losses[2], losses[0], rtol=1e-5)


def test_failed_run_writes_a_failed_result_and_reraises(tmp_path):
    spec = make_spec(steps=5)
    run = make_run(tmp_path, spec)
    bad = TrainData(train=ArrayWindows(np.full(4000, 500), SEQ), val=ArrayWindows(np.zeros(200), SEQ))  # id >= vocab
    with pytest.raises(IndexError):
        train(run, dataset=bad)
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "failed" and "IndexError" in result["reason"]
    # the next attempt trains again (a failed result is not final)
    assert train(run, dataset=tiny_data())["status"] == "done"


@pytest.mark.slow
def test_training_on_prepared_data_end_to_end(tmp_path):
    """The trainer prepares the spec's data itself (ladder.model.data.prepare) from a folder of text files."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tiny = prepared_tiny_corpus()
    spec = make_spec(steps=10, shape=tiny_shape(vocab=300), eval_interval=5, eval_tokens=2 * SEQ, data=tiny["cfg"])
    run = make_run(tmp_path / "runs", spec)
    result = train(run, data_cache=tiny["cache"])
    assert result["status"] == "done" and math.isfinite(result["final_eval_loss"])
    assert result["eval_tokens"] == 2 * SEQ
    model = AutoModelForCausalLM.from_pretrained(run / "model")
    tok = AutoTokenizer.from_pretrained(run / "model")
    assert model.config.eos_token_id == tiny["prepared"].eos_id == tok.eos_token_id
    ids = tok("kalo mi", return_tensors="pt").input_ids
    assert model.generate(ids, max_new_tokens=3, do_sample=False).shape[1] >= ids.shape[1] + 1


def test_the_nan_hook_comes_from_the_environment_only_through_the_jobs_entry_point(monkeypatch):
    """The loop never reads the environment: faults.from_environment is what a job's entry point installs."""
    import inspect

    from ladder.model.training import loop

    monkeypatch.setenv("LADDER_FORCE_NAN_AT_STEP", "3")
    hook = from_environment()
    assert hook(3) and not hook(2) and not hook(4)
    monkeypatch.delenv("LADDER_FORCE_NAN_AT_STEP")
    assert from_environment() is None
    assert "LADDER_FORCE_NAN_AT_STEP" not in inspect.getsource(loop)
