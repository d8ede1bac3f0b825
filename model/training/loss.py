"""The next-token loss the trainer optimises and evaluates, computed from the last hidden states chunk by chunk
without ever holding the logits of a whole micro-batch.

Why not ``model(input_ids).logits`` and ``F.cross_entropy``: at ladder sizes (d_model 32-64, vocab 512, 4-5k
tokens per micro-batch) the logits are 8-16x larger than the hidden states, and the generic loss streams them
through memory five times (logits, log-probabilities, a zero-filled gradient and its scatter, the softmax
gradient), each time out of cache; on the default study's smallest rung that was a fifth of a training step
(benchmarks/README.md). Here the rows go in chunks whose logits stay in a core's L2 cache, and the gradient of a
chunk is computed right after its loss, while the chunk is still there (the trick of Liger-Kernel's fused linear
cross-entropy). On a GPU the same code never makes the full fp32 copy of bf16 logits: only one chunk is upcast.

What this changes in the numbers: the hidden states, and every gradient upstream of them, come from the same
transformers modules as before; the loss adds the chunks' sums one after another, the hidden-state gradient is
scaled after its matmul instead of before, and the LM head's weight gradient adds the chunks' contributions
instead of summing all rows in one matmul. All three are fp32 round-off (tests/model/training/test_loss.py bounds
them); a run is still bit-reproducible at a fixed thread count and chunk size, and so is its resume.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

IGNORE = -100
"""Label of a target that counts for nothing (the padding rows of a fixed-shape micro-batch)."""

CPU_CHUNK_BYTES = 1 << 20  # fp32 logits of one chunk on CPU: half a Sapphire Rapids core's 2 MiB L2


def chunk_rows(n_rows: int, vocab: int, d_model: int, device: torch.device) -> int:
    """Rows per chunk: on CPU as many as keep a chunk's fp32 logits within :data:`CPU_CHUNK_BYTES`; on GPUs the
    rows that make a chunk's logits about as big as the hidden states of the whole micro-batch (at least 256)."""
    if device.type == "cpu":
        return max(1, CPU_CHUNK_BYTES // (4 * vocab))
    rows = math.ceil(n_rows / max(1, math.ceil(vocab / max(1, d_model))))
    return max(256, 1 << (rows - 1).bit_length())


class _LinearCrossEntropy(torch.autograd.Function):
    """``sum_i -log softmax(h_i W^T)[y_i]`` over the rows with ``y_i != IGNORE``; the gradient is computed in the
    forward pass, chunk by chunk, and only scaled in the backward pass."""

    @staticmethod
    def forward(ctx, h, weight, labels, rows, compute_dtype):  # type: ignore[override]
        n = h.shape[0]
        need_grad = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        w = weight if compute_dtype is None else weight.to(compute_dtype)
        total = torch.zeros((), dtype=torch.float32, device=h.device)
        if need_grad:
            dh = torch.empty_like(h)
            dw = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
            masked = bool((labels < 0).any())
        for i in range(0, n, rows):
            hc = h[i : i + rows] if compute_dtype is None else h[i : i + rows].to(compute_dtype)
            yc = labels[i : i + rows]
            logits = torch.mm(hc, w.t())
            logp = torch.log_softmax(logits if logits.dtype == torch.float32 else logits.float(), dim=-1)
            total += F.nll_loss(logp, yc, ignore_index=IGNORE, reduction="sum")
            if not need_grad:
                continue
            g = logp.exp_()  # softmax, in place of the log-probabilities
            if masked:
                keep = yc >= 0
                g.scatter_add_(1, torch.where(keep, yc, 0)[:, None], -keep[:, None].to(g.dtype))
                g.mul_(keep[:, None])
            else:
                g.scatter_add_(1, yc[:, None], torch.full((len(yc), 1), -1.0, dtype=g.dtype, device=g.device))
            if compute_dtype is None:
                dh[i : i + rows] = torch.mm(g, w)
                dw.addmm_(g.t(), hc)
            else:  # the matmuls in the autocast dtype, their sum over chunks in fp32
                gc = g.to(compute_dtype)
                dh[i : i + rows] = torch.mm(gc, w)
                dw.add_(torch.mm(gc.t(), hc))
        if need_grad:
            ctx.save_for_backward(dh, dw.to(weight.dtype))
        return total

    @staticmethod
    def backward(ctx, grad_out):  # type: ignore[override]
        dh, dw = ctx.saved_tensors
        return dh * grad_out.to(dh.dtype), dw * grad_out.to(dw.dtype), None, None, None


def linear_cross_entropy(h: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, *,
                         rows: int | None = None) -> torch.Tensor:  # fmt: skip
    """Summed next-token loss of hidden states ``h`` (``[N, d]``) under the LM head ``weight`` (``[V, d]``) at
    ``labels`` (``[N]``; :data:`IGNORE` counts for nothing). Under autocast the matmuls run in the autocast dtype
    and the softmax in fp32, one chunk at a time."""
    compute_dtype = None
    if torch.is_autocast_enabled(h.device.type):
        compute_dtype = torch.get_autocast_dtype(h.device.type)
    if rows is None:
        rows = chunk_rows(h.shape[0], weight.shape[0], weight.shape[1], h.device)
    with torch.autocast(h.device.type, enabled=False):
        return _LinearCrossEntropy.apply(h, weight, labels, rows, compute_dtype)


@torch.no_grad()
def linear_token_losses(h: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, *,
                        rows: int | None = None) -> torch.Tensor:  # fmt: skip
    """Per-row next-token losses (``[N]``, fp32) of hidden states ``h`` under the LM head ``weight`` at ``labels``
    (:data:`IGNORE` rows get 0), chunked like :func:`linear_cross_entropy`; for evaluation, no gradient."""
    compute_dtype = torch.get_autocast_dtype(h.device.type) if torch.is_autocast_enabled(h.device.type) else None
    if rows is None:
        rows = chunk_rows(h.shape[0], weight.shape[0], weight.shape[1], h.device)
    w = weight if compute_dtype is None else weight.to(compute_dtype)
    out = torch.empty(h.shape[0], dtype=torch.float32, device=h.device)
    with torch.autocast(h.device.type, enabled=False):
        for i in range(0, h.shape[0], rows):
            hc = h[i : i + rows] if compute_dtype is None else h[i : i + rows].to(compute_dtype)
            logits = torch.mm(hc, w.t())
            logp = torch.log_softmax(logits if logits.dtype == torch.float32 else logits.float(), dim=-1)
            out[i : i + rows] = F.nll_loss(logp, labels[i : i + rows], ignore_index=IGNORE, reduction="none")
    return out


def is_causal_lm(model: torch.nn.Module) -> bool:
    """Whether ``model`` is a transformers causal LM with a decoder stack ``model.model`` and a linear ``lm_head``
    without bias (the shape of every model this package builds)."""
    head = getattr(model, "lm_head", None)
    return (
        isinstance(getattr(model, "model", None), torch.nn.Module)
        and isinstance(head, torch.nn.Linear)
        and head.bias is None
    )


def _rope_tables(cos: torch.Tensor, sin: torch.Tensor, heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``cos`` and the signed ``sin`` for RoPE on ``[B, T, heads * head_dim]`` projections: ``x * cos +
    swap_halves(x) * sin_signed`` rounds exactly like transformers' ``x * cos + rotate_half(x) * sin`` (the
    products are the same numbers, ``-(a b) = (-a) b``), in contiguous memory instead of per-head strides."""
    half = cos.shape[-1] // 2
    signed = torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)
    return cos.repeat(1, 1, heads), signed.repeat(1, 1, heads)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, heads: int, head_dim: int) -> torch.Tensor:
    b, t, _ = x.shape
    swapped = x.view(b, t, heads, 2, head_dim // 2).roll(1, dims=3).reshape(b, t, heads * head_dim)
    return (x * cos + swapped * sin).view(b, t, heads, head_dim).transpose(1, 2)


def llama_hidden(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """The last hidden states of transformers' ``LlamaModel`` (``model.model``) for ``ids`` without padding or
    cache, computed with its own modules in its order of operations, RoPE applied in contiguous memory; bit-identical
    to ``model.model(ids).last_hidden_state`` (:class:`CausalLMLoss` checks that once per model)."""
    inner = model.model
    b, t = ids.shape
    h = inner.embed_tokens(ids)
    cos, sin = inner.rotary_emb(h, position_ids=torch.arange(t, device=ids.device)[None])
    first = inner.layers[0].self_attn
    n_q, n_kv, hd = first.config.num_attention_heads, first.config.num_key_value_heads, first.head_dim
    q_tables, kv_tables = _rope_tables(cos, sin, n_q), _rope_tables(cos, sin, n_kv)
    for layer in inner.layers[: inner.config.num_hidden_layers]:
        a = layer.self_attn
        residual = h
        x = layer.input_layernorm(h)
        q = _rope(a.q_proj(x), *q_tables, n_q, hd)
        k = _rope(a.k_proj(x), *kv_tables, n_kv, hd)
        v = a.v_proj(x).view(b, t, n_kv, hd).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=a.scaling, enable_gqa=n_q != n_kv)
        o = o.transpose(1, 2).contiguous().reshape(b, t, -1).contiguous()
        h = residual + a.o_proj(o)
        residual = h
        h = residual + layer.mlp(layer.post_attention_layernorm(h))
    return inner.norm(h)


def _llama_hidden_is_exact(model: torch.nn.Module) -> bool:
    """Whether :func:`llama_hidden` reproduces ``model.model`` bit for bit on a small random batch, forward and
    backward (false for anything that is not transformers' plain Llama: another RoPE, attention, mask)."""
    cfg = getattr(model, "config", None)
    if cfg is None or getattr(cfg, "model_type", None) != "llama" or getattr(cfg, "_attn_implementation", "") != "sdpa":
        return False
    if (getattr(cfg, "rope_parameters", None) or {}).get("rope_type", "default") != "default":
        return False
    if cfg.attention_bias or cfg.mlp_bias or cfg.attention_dropout:
        return False
    dev = model.lm_head.weight.device
    ids = torch.randint(0, cfg.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0)).to(dev)
    was_training = model.training
    try:
        results = []
        for fn in (
            lambda: model.model(input_ids=ids, use_cache=False).last_hidden_state,
            lambda: llama_hidden(model, ids),
        ):
            model.zero_grad(set_to_none=True)
            h = fn()
            (h.double().sin().sum()).backward()
            results.append([h.detach()] + [p.grad.clone() for p in model.parameters() if p.grad is not None])
        return len(results[0]) == len(results[1]) and all(torch.equal(x, y) for x, y in zip(*results))
    except Exception:  # noqa: BLE001 - anything unexpected: use transformers' own forward
        return False
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was_training)


class CausalLMLoss(torch.nn.Module):
    """The summed next-token loss of a batch of windows of ``seq_len + 1`` tokens (every position a target).

    The module that DDP wraps (its forward runs the model, so DDP sees every parameter used); it holds the model as
    its only child. ``real_rows`` (< the number of windows) marks the windows after it as padding, whose targets
    count for nothing: what keeps a compiled micro-batch at one shape. ``fused=False`` computes
    ``F.cross_entropy`` on the full logits instead (what the trainer computed before the chunked loss; tests
    compare the two). The hidden states come from :func:`llama_hidden` when it is bit-identical to the model's own
    forward (checked once, here), else from ``model.model``."""

    def __init__(self, model: torch.nn.Module, fused: bool = True):
        super().__init__()
        self.model = model
        self.fused = fused and is_causal_lm(model)
        self.exact_llama = self.fused and _llama_hidden_is_exact(model)

    def _inputs(self, windows: torch.Tensor, real_rows: int | None) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = windows[:, :-1], windows[:, 1:]
        if real_rows is not None and real_rows < windows.shape[0]:
            rows = torch.arange(windows.shape[0], device=windows.device)[:, None]
            y = torch.where(rows < real_rows, y, IGNORE)
        return x, y

    def _hidden(self, x: torch.Tensor) -> torch.Tensor:
        if self.exact_llama:
            return llama_hidden(self.model, x)
        return self.model.model(input_ids=x, use_cache=False).last_hidden_state

    @torch.no_grad()
    def token_losses(self, windows: torch.Tensor, real_rows: int | None = None) -> torch.Tensor:
        """``[B, T]`` fp32 loss of every target (0 on padding rows): what an evaluation splits by token kind."""
        x, y = self._inputs(windows, real_rows)
        if self.fused:
            h = self._hidden(x)
            flat = linear_token_losses(h.reshape(-1, h.shape[-1]), self.model.lm_head.weight, y.reshape(-1))
            return flat.view(y.shape)
        logits = self.model(input_ids=x, use_cache=False).logits.float()
        return F.cross_entropy(logits.transpose(1, 2), y, ignore_index=IGNORE, reduction="none")

    def forward(self, windows: torch.Tensor, real_rows: int | None = None) -> torch.Tensor:
        x, y = self._inputs(windows, real_rows)
        if self.fused:
            h = self._hidden(x)
            return linear_cross_entropy(h.reshape(-1, h.shape[-1]), self.model.lm_head.weight, y.reshape(-1))
        logits = self.model(input_ids=x, use_cache=False).logits
        logits = logits if logits.dtype == torch.float32 else logits.float()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=IGNORE,
                               reduction="sum")  # fmt: skip
