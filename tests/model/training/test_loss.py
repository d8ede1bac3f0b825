"""The chunked loss computes what ``F.cross_entropy`` on the full logits computes, to fp32 round-off: the loss, the
gradients, a training curve; padding rows count for nothing; under bf16 autocast it stays close to the generic
loss."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ladder.model.shape import ModelShape
from ladder.model.training.llama import build_model
from ladder.model.training.loss import (
    IGNORE,
    CausalLMLoss,
    chunk_rows,
    linear_cross_entropy,
)
from tests.model.training.tiny_runs import (
    make_run,
    make_spec,
    metrics,
    tiny_data,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def generic(h, w, y):
    return F.cross_entropy(h @ w.t(), y, ignore_index=IGNORE, reduction="sum")


@pytest.mark.parametrize("rows", [1, 64, 100, 1000, 4096])
@pytest.mark.parametrize("padded", [False, True])
def test_loss_and_gradients_match_cross_entropy_on_full_logits(rows, padded):
    g = torch.Generator().manual_seed(rows)
    h = torch.randn(1000, 48, generator=g, requires_grad=True)
    w = (0.1 * torch.randn(97, 48, generator=g)).requires_grad_()
    y = torch.randint(0, 97, (1000,), generator=g)
    if padded:
        y[700:] = IGNORE
    n = int((y >= 0).sum())
    got = linear_cross_entropy(h, w, y, rows=rows)
    (got / n).backward()
    got_grads = h.grad.clone(), w.grad.clone()
    h.grad = w.grad = None
    ref = generic(h, w, y)
    (ref / n).backward()
    torch.testing.assert_close(got, ref, rtol=2e-6, atol=0)
    torch.testing.assert_close(got_grads[0], h.grad, rtol=1e-5, atol=1e-9)
    torch.testing.assert_close(got_grads[1], w.grad, rtol=1e-5, atol=1e-8)
    if padded:
        assert torch.all(got_grads[0][700:] == 0)  # padding rows get no gradient at all
    with torch.no_grad():  # evaluation: no gradient is computed, the same loss
        torch.testing.assert_close(linear_cross_entropy(h, w, y, rows=rows), ref, rtol=2e-6, atol=0)


def test_chunk_rows_keep_cpu_chunks_in_cache_and_gpu_chunks_large():
    assert chunk_rows(4864, 512, 64, torch.device("cpu")) == 512  # 512 x 512 fp32 logits = 1 MiB
    assert chunk_rows(10, 50_000, 64, torch.device("cpu")) == 5
    assert chunk_rows(16384, 49152, 576, torch.device("cuda")) == 256
    assert chunk_rows(1 << 20, 512, 64, torch.device("cuda")) == 1 << 17


def tiny_llama(tied: bool) -> torch.nn.Module:
    s = ModelShape(d_model=48, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=12, ffn_dim=96, vocab_size=211,
                   tied=tied, max_seq_len=40)  # fmt: skip
    return build_model(s, seed=3)


@pytest.mark.parametrize("tied", [True, False])
def test_the_models_loss_and_gradients_match_the_generic_path(tied):
    model = tiny_llama(tied)
    windows = torch.randint(0, 211, (6, 41), generator=torch.Generator().manual_seed(1))

    def grads(fused: bool):
        model.zero_grad(set_to_none=True)
        loss = CausalLMLoss(model, fused=fused)(windows)
        (loss / (6 * 40)).backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]

    (fused_loss, fused_grads), (plain_loss, plain_grads) = grads(True), grads(False)
    torch.testing.assert_close(fused_loss, plain_loss, rtol=2e-6, atol=0)
    for a, b in zip(fused_grads, plain_grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)


def test_padding_rows_change_neither_the_loss_nor_the_gradient():
    model = tiny_llama(True)
    windows = torch.randint(0, 211, (5, 41), generator=torch.Generator().manual_seed(2))
    padded = torch.cat([windows, torch.zeros(3, 41, dtype=windows.dtype)])
    loss_fn = CausalLMLoss(model)
    results = []
    for w, rows in ((windows, None), (padded, 5)):
        model.zero_grad(set_to_none=True)
        loss = loss_fn(w, rows)
        loss.backward()
        results.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
    torch.testing.assert_close(results[0][0], results[1][0], rtol=2e-6, atol=0)
    for a, b in zip(results[0][1], results[1][1]):
        # round-off at the tensor's scale: padding rows change how the matmuls block their sums (on an AMD EPYC host
        # an MLP weight's gradient, largest element 0.61, differed by 1.8e-7 in one element)
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5 * float(a.abs().max()))


def test_bf16_autocast_stays_close_to_the_generic_loss():
    model = tiny_llama(False)
    windows = torch.randint(0, 211, (4, 41), generator=torch.Generator().manual_seed(3))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fused = CausalLMLoss(model)(windows).detach()
        plain = CausalLMLoss(model, fused=False)(windows).detach()
    assert fused.dtype == plain.dtype == torch.float32
    assert abs(fused.item() - plain.item()) / plain.item() < 1e-2


def test_a_training_curve_matches_the_generic_loss_to_round_off(tmp_path, monkeypatch):
    """Twenty steps with the chunked loss against the same run with ``F.cross_entropy`` on the full logits (what
    the trainer computed before the chunked loss): the same curve to fp32 round-off, evaluations included."""
    import ladder.model.training.steps as steps_module

    curves = {}
    for fused in (True, False):
        monkeypatch.setattr(steps_module, "CausalLMLoss",
                            lambda model, fused=fused: CausalLMLoss(model, fused=fused))  # fmt: skip
        spec = make_spec(steps=20, micro=3, log_interval=1, eval_interval=5)
        run = make_run(tmp_path / str(fused), spec)
        from ladder.model.training.loop import train

        train(run, dataset=tiny_data())
        curves[fused] = ([r["loss"] for r in metrics(run, "train")], [r["eval_loss"] for r in metrics(run, "eval")])
    np.testing.assert_allclose(curves[True][0], curves[False][0], rtol=1e-5)
    np.testing.assert_allclose(curves[True][1], curves[False][1], rtol=1e-5)


@pytest.mark.parametrize("kv,tied", [(4, True), (2, False), (1, True)])
def test_the_decoder_stack_is_bit_identical_to_transformers_forward_and_backward(kv, tied):
    from ladder.model.training.loss import llama_hidden

    s = ModelShape(d_model=64, n_layers=3, n_heads=4, n_kv_heads=kv, head_dim=16, ffn_dim=96, vocab_size=211,
                   tied=tied, max_seq_len=64, rope_theta=500.0)  # fmt: skip
    model = build_model(s, seed=1)
    ids = torch.randint(0, 211, (3, 40), generator=torch.Generator().manual_seed(4))
    results = []
    for fn in (lambda: model.model(input_ids=ids, use_cache=False).last_hidden_state, lambda: llama_hidden(model, ids)):
        model.zero_grad(set_to_none=True)
        h = fn()
        (h * torch.linspace(-1, 1, h.numel()).view_as(h)).sum().backward()
        results.append([h.detach()] + [p.grad.clone() for p in model.parameters() if p.grad is not None])
    assert all(torch.equal(a, b) for a, b in zip(*results))
    assert CausalLMLoss(model).exact_llama
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(model.model(input_ids=ids, use_cache=False).last_hidden_state, llama_hidden(model, ids))


def test_a_model_the_decoder_stack_does_not_reproduce_uses_its_own_forward():
    model = tiny_llama(True)
    model.config.rope_parameters = {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0}
    assert not CausalLMLoss(model).exact_llama
