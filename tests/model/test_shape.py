"""Accounting without torch, held against published numbers and hand counts. (The sweep against
``sum(p.numel())`` of real models lives in test_llama.py.)"""

import pytest

from ladder.model.shape import ModelShape

SMOL = dict(d_model=576, n_layers=30, n_heads=9, n_kv_heads=3, head_dim=64, ffn_dim=1536, vocab_size=49152)


def test_smollm2_135m_anchor_tied_and_untied():
    tied = ModelShape(**SMOL, tied=True)
    untied = ModelShape(**SMOL, tied=False)
    assert tied.params_total == 134_515_008
    assert untied.params_total == 162_826_560
    assert untied.params_embedding - tied.params_embedding == 28_311_552  # the 28.3M LM head
    assert tied.params_non_embedding == untied.params_non_embedding == 134_515_008 - 28_311_552


def test_flops_per_token_by_hand():
    s = ModelShape(
        d_model=64,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        head_dim=16,
        ffn_dim=128,
        vocab_size=100,
        tied=True,
        max_seq_len=32,
    )
    attn = 64 * 64 * 2 + 64 * 32 * 2  # q, o + k, v (2 KV heads of 16)
    mlp = 3 * 64 * 128
    head = 100 * 64
    matmul = 2 * (attn + mlp) + head
    attention_scores = 6 * 2 * 32 * 4 * 16  # causal: 6 L T n_heads head_dim
    assert s.flops_per_token() == 6 * matmul + attention_scores
    assert s.flops_per_token(seq_len=64) == 6 * matmul + 2 * attention_scores
    assert s.flops_per_token_6n == 6 * s.params_total


def test_params_convention_and_errors():
    s = ModelShape(**SMOL, tied=True)
    assert s.params("total") == s.params_total
    assert s.params("non_embedding") == s.params_non_embedding
    with pytest.raises(ValueError, match="convention"):
        s.params("kaplan")


def test_heads_must_divide():
    with pytest.raises(ValueError, match="not divisible"):
        ModelShape(**{**SMOL, "n_kv_heads": 4}, tied=True)
