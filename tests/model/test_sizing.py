import math
import random

import pytest

from ladder.model.recipe import (
    micro_batch_for,
    olmo_batch_tokens,
    olmo_lr,
    plan_steps,
    round_batch,
)
from ladder.model.sizing import FamilyRules, shape_for_depth, shape_for_params


def _valid(shape, rules):
    assert shape.d_model % rules.head_dim == 0
    assert shape.n_heads * shape.head_dim == shape.d_model
    assert shape.n_heads % shape.n_kv_heads == 0
    assert shape.n_heads // shape.n_kv_heads == rules.kv_ratio
    assert shape.ffn_dim % rules.ffn_multiple == 0


def test_smollm2_shape_found_from_its_size():
    rules = FamilyRules(vocab_size=49152, head_dim=64, kv_ratio=3, ffn_multiple=64, rope_theta=1e5)
    s = shape_for_params(134_515_008, "total", 576 / 30, rules, tied=True)
    assert (s.d_model, s.n_layers, s.n_heads, s.n_kv_heads, s.ffn_dim) == (576, 30, 9, 3, 1536)
    assert s.params_total == 134_515_008


@pytest.mark.parametrize("convention", ["total", "non_embedding"])
def test_randomized_targets_land_close_and_valid(convention):
    rng = random.Random(0)
    for _ in range(150):
        rules = FamilyRules(
            vocab_size=rng.choice([256, 512, 1024, 32000]),
            head_dim=rng.choice([16, 32, 64]),
            kv_ratio=rng.choice([1, 2, 4]),
            ffn_multiple=rng.choice([8, 16, 64]),
        )
        tied = rng.random() < 0.5
        step = rules.head_dim * rules.kv_ratio
        # smallest sizes a shape of this family can take are ~1 layer of one head group
        floor = 12 * step * step + (rules.vocab_size * step * (1 if tied else 2) if convention == "total" else 0)
        target = int(floor * math.exp(rng.uniform(math.log(30), math.log(3000))))
        aspect = rng.choice([8, 16, 32, 64, 128])
        s = shape_for_params(target, convention, aspect, rules, tied)
        _valid(s, rules)
        # ffn_dim moves in steps of ffn_multiple: within 5%, or within that rounding for coarse tiny shapes
        granule = 3 * s.d_model * s.n_layers * rules.ffn_multiple
        assert abs(s.params(convention) - target) <= max(0.05 * target, 0.5 * granule), (target, s)


def test_depth_vs_width_variants_within_5_percent():
    rules = FamilyRules(vocab_size=512, head_dim=16, ffn_multiple=8)
    for target in [50_000, 100_000, 200_000, 400_000, 1_000_000, 10_000_000]:
        counts = [shape_for_params(target, "non_embedding", a, rules, True).params_non_embedding for a in (8, 16, 32)]
        assert max(counts) / min(counts) < 1.05, (target, counts)
        shapes = [shape_for_params(target, "non_embedding", a, rules, True) for a in (8, 32)]
        assert shapes[0].n_layers > shapes[1].n_layers  # a lower aspect ratio really is deeper


@pytest.mark.parametrize("convention", ["total", "non_embedding"])
def test_aspect_depth_rule_never_lets_depth_or_width_fall_as_the_size_grows(convention):
    # the old default study's sizes under the count-first rule bounce: 2, 3, 2, 3, 4, 3, 4 layers
    grid = [24_000, 35_000, 50_000, 71_000, 100_000, 141_000, 200_000]
    count_first = FamilyRules(vocab_size=512, head_dim=16, ffn_multiple=8, ffn_band=1.2)
    depths = [shape_for_params(t, "non_embedding", 16, count_first, True).n_layers for t in grid]
    assert depths == [2, 3, 2, 3, 4, 3, 4]
    for head_dim, aspect in ((16, 16), (16, 24), (32, 32), (64, 64)):
        rules = FamilyRules(vocab_size=512, head_dim=head_dim, ffn_multiple=8, ffn_band=1.5, depth_rule="aspect")
        floor = 12 * head_dim * head_dim * 2
        shapes = [shape_for_params(int(floor * 2 ** (k / 2)), convention, aspect, rules, False) for k in range(14)]
        for a, b in zip(shapes, shapes[1:]):
            assert b.n_layers >= a.n_layers and (b.n_layers, b.d_model) >= (a.n_layers, a.d_model), (a, b)
            assert b.params(convention) >= a.params(convention)
        for s in shapes:
            _valid(s, rules)
            # the depth is the one whose exact-aspect model is nearest the count: its aspect within 2x either way
            assert 0.5 <= s.aspect_ratio / aspect <= 2 or s.d_model == head_dim, s


def test_aspect_depth_rule_matches_a_published_shape():
    # Llama-2 7B: 4096 wide, 32 deep (aspect 128), 11008 ffn, 32000 vocabulary, untied: 6.74B in total
    rules = FamilyRules(vocab_size=32000, head_dim=128, ffn_multiple=256, ffn_band=1.1, depth_rule="aspect")
    s = shape_for_params(6_738_415_616, "total", 128, rules, tied=False)
    assert (s.d_model, s.n_layers, s.n_heads) == (4096, 32, 32)
    assert abs(s.params_total / 6_738_415_616 - 1) < 0.01


def test_depth_sizing():
    rules = FamilyRules(vocab_size=1024, head_dim=16)
    s = shape_for_depth(4, 16, rules, tied=False)
    assert (s.n_layers, s.d_model) == (4, 64)
    assert s.ffn_dim == 176  # 8/3 * 64 = 170.7 -> nearest multiple of 16


def test_recipe_rules_match_their_sources():
    # at the OLMo reference size the rules give their published constants
    assert olmo_lr(108e6) == pytest.approx(0.0047)
    assert olmo_batch_tokens(108e6) == pytest.approx(160 * 2048)
    assert olmo_lr(8 * 108e6) == pytest.approx(0.0047 / 2)
    assert round_batch(5000, 256, 8, None) == 20 * 256
    assert round_batch(100, 256, 8, None) == 8 * 256
    assert micro_batch_for(24, 256, 2048) == 8
    assert micro_batch_for(7, 256, 1024) == 4  # need not divide the batch: chunks of 4 and 3, not 7 of 1
    st = plan_steps(1_000_000, 4096, 256, 0.05, 16384)
    assert st.steps == 244 and st.tokens == 244 * 4096 and st.warmup_steps == 12
