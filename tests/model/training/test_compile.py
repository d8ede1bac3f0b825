"""``spec.compile``: the decoder layers compile once (one graph for training, one for evaluation, shared by every
layer) although the last micro-batch is smaller, and the losses stay those of the eager run to fp32 round-off."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from ladder.model.training.loop import train
from tests.model.training.tiny_runs import (
    make_run,
    make_spec,
    metrics,
    tiny_data,
)

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.slow
def test_compiled_run_keeps_one_shape_and_the_eager_losses(tmp_path, monkeypatch):
    import torch._dynamo
    from torch._dynamo.utils import counters

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
    # the kernels went to the test run's one inductor cache (tests/conftest.py, scripts/test.sh), not ~/.cache
    cache = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
    assert cache.is_dir() and any(cache.iterdir())


@pytest.mark.slow
def test_a_compiled_run_stopped_and_resumed_ends_bit_identical(tmp_path, monkeypatch):
    import torch._dynamo

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


@pytest.mark.slow
def test_runs_of_other_shapes_compiled_one_after_another_in_one_process_all_compile(tmp_path, monkeypatch):
    """A local worker trains its queue in one process: each run compiles its own graphs however many shapes came
    before it (dynamo's recompile limit, lowered here to 2, counts them per process unless reset: the first run's
    two graphs reach it, so the second run trains eager without the reset). The first run has the shape and
    micro-batch of the test above, whose kernels the one inductor cache holds (conftest's "inductor" group)."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    from ladder.model.shape import ModelShape

    monkeypatch.setattr(torch._dynamo.config, "recompile_limit", 2)
    base = make_spec(steps=2).shape.model_dump()
    for i, ffn in enumerate((base["ffn_dim"], base["ffn_dim"] + 16)):
        shape = ModelShape(**{**base, "ffn_dim": ffn})
        spec = make_spec(steps=2, micro=3, eval_interval=2, compile=True, shape=shape)
        before = counters["stats"]["unique_graphs"]
        train(make_run(tmp_path / str(i), spec), dataset=tiny_data())
        assert counters["stats"]["unique_graphs"] - before == 2, f"run {i} did not compile (training and evaluation)"
