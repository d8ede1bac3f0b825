"""The plan's memory estimate against what autograd really saves, and the peaks a run records in result.json."""

from __future__ import annotations

import json

import pytest
import torch

from ladder.model.memory import activation_floats_per_token, run_memory
from ladder.model.shape import ModelShape
from ladder.model.training.llama import build_model
from ladder.model.training.loss import CausalLMLoss


def saved_activation_bytes(model: torch.nn.Module, windows: torch.Tensor) -> int:
    """Bytes of the distinct storages autograd saves for the backward pass, parameters excluded."""
    seen: dict[int, int] = {}

    def pack(t):
        st = t.untyped_storage()
        seen[st.data_ptr()] = st.nbytes()
        return t

    loss = CausalLMLoss(model)  # outside the hooks: its one-time exactness check saves tensors of its own
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss(windows)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    buffers = {b.untyped_storage().data_ptr() for b in model.buffers()}
    return sum(n for k, n in seen.items() if k not in params and k not in buffers)


@pytest.mark.parametrize("kv", [4, 1])
def test_activation_formula_matches_what_autograd_saves(kv):
    shape = ModelShape(d_model=64, n_layers=3, n_heads=4, n_kv_heads=kv, head_dim=16, ffn_dim=176, vocab_size=512,
                       tied=True, max_seq_len=128)  # fmt: skip
    windows = torch.randint(0, 512, (6, 129), generator=torch.Generator().manual_seed(0))
    measured = saved_activation_bytes(build_model(shape, seed=0), windows)
    # the loss saves its hidden-state gradient (d per token) and the head's weight gradient (V x d) once
    loss_saved = 6 * 128 * 64 * 4 + 512 * 64 * 4
    predicted = 6 * 128 * activation_floats_per_token(shape) * 4
    assert abs(measured - loss_saved - predicted) / predicted < 0.05


def test_estimate_terms():
    shape = ModelShape(d_model=64, n_layers=4, n_heads=4, n_kv_heads=4, head_dim=16, ffn_dim=176, vocab_size=512,
                       tied=True, max_seq_len=256)  # fmt: skip
    fp32, bf16 = run_memory(shape, 19, 256, "fp32"), run_memory(shape, 19, 256, "bf16")
    assert fp32.state == 16 * shape.params_total and bf16.state == 18 * shape.params_total
    assert fp32.activations == 19 * 256 * activation_floats_per_token(shape) * 4
    assert bf16.activations < fp32.activations
    assert fp32.total > fp32.state + fp32.activations  # transient, loss buffers and allocator slack on top
    assert run_memory(shape, 38, 256, "fp32").activations == 2 * fp32.activations


def test_result_records_peak_memory(tmp_path):
    from ladder.model.training.loop import train
    from tests.model.training.tiny_runs import make_run, make_spec, tiny_data

    result = train(make_run(tmp_path, make_spec(steps=3)), dataset=tiny_data())
    assert result["peak_rss_bytes"] > 50 * 2**20  # the interpreter, torch and transformers at least
    assert result["peak_gpu_allocated_bytes"] is None  # CPU
    assert json.loads((tmp_path / result["run_id"] / "result.json").read_text())["peak_rss_bytes"] > 0


def test_resetting_the_gpu_peak_before_cuda_starts_is_a_no_op():
    # A fresh node job resets the peak before its first CUDA allocation; torch raises there ("Invalid device
    # argument" on a GPU, a missing binding on a CPU build), and every GPU run failed at its first line
    # (found by benchmarks/gpu_check.py --packing on an H200).
    import torch

    from ladder.model.hardware import reset_peak_memory

    assert not torch.cuda.is_initialized()
    reset_peak_memory("cuda:0")
    reset_peak_memory(torch.device("cuda", 0))
