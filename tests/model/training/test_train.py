"""The trainer on tiny runs: files written, results, divergence, accumulation (the tiny runs themselves are in
tiny_runs.py, shared with the other trainer tests)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from ladder.layout import RunDir
from ladder.model.config import DivergenceConfig, ScheduleConfig
from ladder.model.training.faults import from_environment, nan_at_step
from ladder.model.training.inputs import ArrayWindows, TrainData
from ladder.model.training.loop import train
from tests.model.training.tiny_runs import (
    SEQ,
    make_run,
    make_spec,
    metrics,
    prepared_tiny_corpus,
    tiny_data,
    tiny_shape,
)

pytestmark = pytest.mark.usefixtures("one_thread")


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


def test_a_peak_measured_under_load_is_measured_again_when_the_run_beats_it(tmp_path, monkeypatch):
    """The main job's report gave MFU up to 160%: each process measures the CPU's matmul peak once, in 0.2 s, and
    another worker busy on the same cores at that moment made it a sixth of what the runs then computed. A run
    that computes faster than its measured peak measures it again and keeps the better; a datasheet peak (or
    LADDER_PEAK_FLOPS) is never measured."""
    from ladder.model import hardware

    monkeypatch.delenv("LADDER_PEAK_FLOPS", raising=False)
    key = ("cpu", torch.float32, torch.get_num_threads(), None)
    monkeypatch.setitem(hardware._MEASURED, key, 1e3)  # as if measured while something else held the core
    spec = make_spec(steps=20)
    result = train(make_run(tmp_path / "runs", spec), dataset=tiny_data())
    assert result["peak_flops_source"] == "measured" and result["peak_flops"] > 1e6, result["peak_flops"]
    assert 0 < result["mfu"] < 1
    assert hardware._MEASURED[key] == result["peak_flops"]  # the next run of this process starts from it

    table = hardware.Peak(2e9, "table", "a GPU")
    assert hardware.checked_peak(table, 5e9, "cpu") is table  # a datasheet's peak stands; its MFU says the rest
    measured = hardware.Peak(2e9, "measured", "cpu")
    assert hardware.checked_peak(measured, 1e9, "cpu") is measured  # the run did not beat it: not measured again
