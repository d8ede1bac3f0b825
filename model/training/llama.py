"""Build transformers' ``LlamaForCausalLM`` from a :class:`~ladder.model.shape.ModelShape`.

The model is plain transformers: ``save_pretrained`` writes a folder that ``AutoModelForCausalLM.from_pretrained``
loads with no ladder code (and so does lm-evaluation-harness). No biases anywhere; SDPA attention; RoPE with
``shape.rope_theta``; RMSNorm with ``shape.norm_eps``; every linear and embedding weight drawn from
N(0, ``shape.init_std``) by transformers' own initialiser, norm gains set to one.

transformers v5 is required: ``rope_parameters=`` and ``dtype=`` are v5 API, and 4.x would ignore the first
silently (the default theta instead of the shape's), so importing this module under 4.x fails. v5 requires
``d_model`` to be a multiple of ``n_heads`` (``LlamaConfig.validate_architecture``) even when ``head_dim`` is given
explicitly, and RoPE needs an even ``head_dim``: ``ModelShape`` refuses both, so every shape that exists can become
a loadable checkpoint.
"""

from __future__ import annotations

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

from ladder.model.shape import ModelShape

if int(transformers.__version__.split(".")[0]) < 5:  # 4.x keeps rope_parameters as an unused attribute
    raise ImportError(
        f"ladder needs transformers>=5.0 (found {transformers.__version__}): on 4.x the model would silently train "
        "with the default RoPE theta; `pip install 'transformers>=5'`"
    )


def llama_config(
    shape: ModelShape,
    *,
    seq_len: int | None = None,
    bos_token_id: int | None = None,
    eos_token_id: int | None = None,
    pad_token_id: int | None = None,
) -> LlamaConfig:
    """The ``LlamaConfig`` of ``shape``. ``max_position_embeddings`` is the larger of ``shape.max_seq_len`` and
    ``seq_len``; token ids default to none (set them from the tokenizer so that ``generate`` stops at EOS)."""
    max_pos = max(shape.max_seq_len, seq_len or 0)
    return LlamaConfig(
        vocab_size=shape.vocab_size,
        hidden_size=shape.d_model,
        intermediate_size=shape.ffn_dim,
        num_hidden_layers=shape.n_layers,
        num_attention_heads=shape.n_heads,
        num_key_value_heads=shape.n_kv_heads,
        head_dim=shape.head_dim,
        hidden_act="silu",
        max_position_embeddings=max_pos,
        initializer_range=shape.init_std,
        rms_norm_eps=shape.norm_eps,
        rope_parameters={"rope_type": "default", "rope_theta": float(shape.rope_theta)},
        tie_word_embeddings=shape.tied,
        attention_bias=False,
        mlp_bias=False,
        attention_dropout=0.0,
        bos_token_id=bos_token_id,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        attn_implementation="sdpa",
        dtype="float32",
    )


def build_model(
    shape: ModelShape,
    *,
    seq_len: int | None = None,
    seed: int | None = 0,
    device: str | torch.device | None = None,
    bos_token_id: int | None = None,
    eos_token_id: int | None = None,
    pad_token_id: int | None = None,
) -> LlamaForCausalLM:
    """A freshly initialised fp32 ``LlamaForCausalLM`` of ``shape``.

    ``seed`` makes the initialisation reproducible without touching the caller's global RNG state (the draw
    happens inside ``torch.random.fork_rng``); ``seed=None`` draws from the current global state.
    ``device="meta"`` builds without allocating memory (for counting parameters of big shapes)."""
    config = llama_config(
        shape, seq_len=seq_len, bos_token_id=bos_token_id, eos_token_id=eos_token_id, pad_token_id=pad_token_id
    )
    dev = torch.device(device) if device is not None else torch.device("cpu")
    if dev.type == "meta":
        with torch.device("meta"):
            return LlamaForCausalLM(config)
    if seed is None:
        model = LlamaForCausalLM(config)
    else:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = LlamaForCausalLM(config)
    model = model.to(dtype=torch.float32)
    return model.to(dev) if dev.type != "cpu" else model


def save_model(model: torch.nn.Module, folder) -> None:
    """``model.save_pretrained(folder)`` (safetensors) without transformers' per-shard progress bar."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        model.save_pretrained(str(folder), safe_serialization=True)
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def count_parameters(model: torch.nn.Module) -> dict[str, int]:
    """``total`` (shared tensors counted once), ``embedding`` (input embedding plus an untied LM head) and
    ``non_embedding``: the conventions of :class:`ModelShape`."""
    total = sum(p.numel() for p in model.parameters())
    emb_in = model.get_input_embeddings().weight
    emb_out = model.get_output_embeddings().weight
    embedding = emb_in.numel() + (0 if emb_out is emb_in else emb_out.numel())
    return {"total": total, "embedding": embedding, "non_embedding": total - embedding}
