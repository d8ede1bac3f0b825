"""``spec.compile``: the decoder layers compile once (one graph for training, one for evaluation, shared by every
layer) although the last micro-batch is smaller, and the losses stay those of the eager run to fp32 round-off."""

from __future__ import annotations

import numpy as np
import pytest

from ladder.model.training.loop import train
from tests.model.training.test_train import (
    make_run,
    make_spec,
    metrics,
    one_thread,  # noqa: F401 - an autouse fixture
    tiny_data,
)


@pytest.mark.slow
def test_compiled_run_keeps_one_shape_and_the_eager_losses(tmp_path, monkeypatch):
    import torch._dynamo
    from torch._dynamo.utils import counters

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    torch._dynamo.reset()
    curves = {}
    for compiled in (False, True):
        spec = make_spec(steps=6, micro=3, log_interval=1, eval_interval=3, compile=compiled)  # 8 = 3 + 3 + 2
        run = make_run(tmp_path / str(compiled), spec)
        before = counters["stats"]["unique_graphs"]
        train(run, dataset=tiny_data())
        graphs = counters["stats"]["unique_graphs"] - before
        curves[compiled] = [r["loss"] for r in metrics(run, "train")], [r["eval_loss"] for r in metrics(run, "eval")]
    assert graphs == 2  # training and evaluation; the padded last micro-batch did not compile again
    np.testing.assert_allclose(curves[True][0], curves[False][0], rtol=1e-5)
    np.testing.assert_allclose(curves[True][1], curves[False][1], rtol=1e-5)
    assert (tmp_path / "inductor").is_dir()


@pytest.mark.slow
def test_a_compiled_run_stopped_and_resumed_ends_bit_identical(tmp_path, monkeypatch):
    import torch._dynamo

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    torch._dynamo.reset()
    spec = make_spec(steps=12, micro=3, log_interval=1, eval_interval=4, checkpoint_interval=5, compile=True)
    whole = make_run(tmp_path / "whole", spec)
    ref = train(whole, dataset=tiny_data())
    run = make_run(tmp_path / "resumed", spec)
    assert train(run, dataset=tiny_data(), stop_after_steps=7)["status"] == "stopped"  # between checkpoints
    got = train(run, dataset=tiny_data())
    assert got["restarts"] == 1
    assert (got["final_train_loss"], got["final_eval_loss"]) == (ref["final_train_loss"], ref["final_eval_loss"])
    assert [r["loss"] for r in metrics(run, "train")] == [r["loss"] for r in metrics(whole, "train")]
