"""The transformers model matches ModelShape's accounting exactly, and its checkpoints load in plain transformers."""

import random

import pytest
import torch

from ladder.model.shape import ModelShape
from ladder.model.training.llama import build_model, count_parameters, llama_config


def random_shapes(n: int, seed: int = 0) -> list[ModelShape]:
    rng = random.Random(seed)
    shapes = []
    while len(shapes) < n:
        n_kv = rng.choice([1, 1, 2, 3, 4, 5])
        n_heads = n_kv * rng.choice([1, 2, 3, 4, 7])  # MHA, GQA ratios, odd group sizes
        d_model = n_heads * rng.randint(1, 40)  # odd sizes too: only divisibility by n_heads is required
        # head_dim may differ from d_model / n_heads; RoPE needs it even
        head_dim = rng.choice([d_model // n_heads + (d_model // n_heads) % 2, 2 * rng.randint(1, 24)])
        shapes.append(
            ModelShape(
                d_model=d_model,
                n_layers=rng.randint(1, 5),
                n_heads=n_heads,
                n_kv_heads=n_kv,
                head_dim=head_dim,
                ffn_dim=rng.randint(1, 300),
                vocab_size=rng.randint(2, 5000),
                tied=rng.random() < 0.5,
                max_seq_len=rng.choice([16, 64, 2048]),
            )
        )
    return shapes


def test_parameter_counts_match_shape_accounting_on_a_random_sweep():
    shapes = random_shapes(240)
    assert {s.tied for s in shapes} == {True, False}
    assert any(s.n_kv_heads < s.n_heads for s in shapes) and any(s.n_kv_heads == s.n_heads for s in shapes)
    for s in shapes:
        model = build_model(s, device="meta")
        counts = count_parameters(model)
        assert sum(p.numel() for p in model.parameters()) == s.params_total, s
        assert counts["embedding"] == s.params_embedding, s
        assert counts["non_embedding"] == s.params_non_embedding, s
        assert (model.lm_head.weight is model.model.embed_tokens.weight) == s.tied
        assert not any(name.endswith(".bias") for name, _ in model.named_parameters())


def test_config_carries_the_shape():
    s = ModelShape(d_model=48, n_layers=3, n_heads=6, n_kv_heads=2, head_dim=12, ffn_dim=100, vocab_size=321,
                   tied=False, max_seq_len=128, rope_theta=1e5, norm_eps=1e-6, init_std=0.03)  # fmt: skip
    c = llama_config(s, seq_len=256, eos_token_id=0, pad_token_id=1)
    assert (c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads, c.head_dim) == (
        48,
        3,
        6,
        2,
        12,
    )
    assert (c.intermediate_size, c.vocab_size, c.tie_word_embeddings) == (100, 321, False)
    assert c.max_position_embeddings == 256
    assert c.rms_norm_eps == 1e-6 and c.initializer_range == 0.03
    assert c.eos_token_id == 0 and c.pad_token_id == 1
    assert c._attn_implementation == "sdpa"


def test_rope_rotates_by_the_shapes_theta():
    """RoPE uses ``shape.rope_theta``: the rotary cos/sin follow ``inv_freq_i = theta^(-2i/d)`` (computed here in
    float64, independently of transformers) for each theta, and the same weights on the same input give other
    logits under another theta."""
    base = dict(d_model=48, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=12, ffn_dim=64, vocab_size=97, tied=True,
                max_seq_len=64)  # fmt: skip
    models = {theta: build_model(ModelShape(**base, rope_theta=theta), seed=7).eval() for theta in (10_000.0, 500.0)}
    a, b = models.values()
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))  # only the rotation differs
    positions = torch.arange(40)
    d = 12
    rotary = {}
    for theta, model in models.items():
        cos, sin = model.model.rotary_emb(torch.zeros(1, len(positions), 48), positions[None, :])
        inv_freq = torch.tensor([theta ** (-2 * i / d) for i in range(d // 2)], dtype=torch.float64)
        angles = positions[:, None].double() * inv_freq[None, :]
        angles = torch.cat([angles, angles], dim=-1)  # transformers' rotate_half layout: both halves share a freq
        torch.testing.assert_close(cos[0].double(), angles.cos(), atol=1e-5, rtol=0)
        torch.testing.assert_close(sin[0].double(), angles.sin(), atol=1e-5, rtol=0)
        rotary[theta] = (cos, sin)
    assert not torch.allclose(rotary[10_000.0][0], rotary[500.0][0])
    assert not torch.allclose(rotary[10_000.0][1], rotary[500.0][1])
    tokens = torch.randint(0, 97, (2, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        la, lb = a(input_ids=tokens).logits, b(input_ids=tokens).logits
    # position 0 is not rotated (and attends only to itself), so the first logits agree; later positions do not
    torch.testing.assert_close(la[:, 0], lb[:, 0])
    assert not torch.allclose(la[:, 1:], lb[:, 1:], atol=1e-4)


def test_shapes_transformers_refuses_cannot_exist():
    with pytest.raises(ValueError, match="not divisible by n_heads"):
        ModelShape(d_model=50, n_layers=1, n_heads=4, n_kv_heads=2, head_dim=16, ffn_dim=8, vocab_size=10, tied=True)
    with pytest.raises(ValueError, match="even head_dim"):
        ModelShape(d_model=68, n_layers=1, n_heads=4, n_kv_heads=2, head_dim=17, ffn_dim=8, vocab_size=10, tied=True)


def test_seeded_init_is_reproducible_and_follows_init_std():
    s = ModelShape(d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, ffn_dim=96, vocab_size=512,
                   tied=False, init_std=0.05)  # fmt: skip
    state = torch.get_rng_state()
    a, b, c = build_model(s, seed=3), build_model(s, seed=3), build_model(s, seed=4)
    assert torch.equal(state, torch.get_rng_state())  # the caller's RNG is left alone
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)
    assert abs(a.model.embed_tokens.weight.std().item() - 0.05) < 0.005
    assert torch.all(a.model.norm.weight == 1)


@pytest.mark.parametrize("tied", [True, False])
def test_save_pretrained_loads_in_plain_transformers(tmp_path, tied):
    from transformers import AutoModelForCausalLM

    from ladder.model.training.llama import save_model

    s = ModelShape(d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=8, ffn_dim=64, vocab_size=100,
                   tied=tied, max_seq_len=64)  # fmt: skip
    model = build_model(s, seed=1, eos_token_id=0, pad_token_id=1)
    save_model(model, tmp_path / "m")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "m")
    assert type(loaded).__name__ == "LlamaForCausalLM"
    assert sum(p.numel() for p in loaded.parameters()) == s.params_total
    x = torch.randint(0, 100, (2, 16))
    with torch.no_grad():
        assert torch.equal(model(x).logits, loaded(x).logits)


def test_transformers_4_is_refused_rather_than_silently_ignoring_rope_theta(monkeypatch):
    """``rope_parameters=`` is v5 API: 4.x keeps it as an unused attribute and trains with the default theta."""
    import importlib.util

    import transformers

    import ladder.model.training.llama as llama

    monkeypatch.setattr(transformers, "__version__", "4.57.1")
    # a second copy of the module, executed as an import would: the loaded one (and its classes) stay as they are
    spec = importlib.util.spec_from_file_location("ladder_llama_on_transformers_4", llama.__file__)
    with pytest.raises(ImportError, match=r"ladder needs transformers>=5\.0 \(found 4\.57\.1\)"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
