"""From a target size to a concrete Llama shape.

A rung is asked for as "about N parameters (in a stated convention) at aspect ratio d_model/n_layers", or as
"n_layers deep at that aspect ratio". Width moves in steps of ``head_dim * kv_ratio`` (whole heads, whole
GQA groups), so hitting N exactly with d_model alone is impossible at small sizes (one step changes N by
~50% when d_model is 64); the SwiGLU width ``ffn_dim`` is the fine knob: it is chosen to land on the target
within its rounding, inside a band around the usual 8/3 x d_model. Pure arithmetic, no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ladder.errors import SpecError
from ladder.model.shape import ModelShape


@dataclass(frozen=True)
class FamilyRules:
    """How shapes of one family are drawn (the study's ``model`` section)."""

    vocab_size: int
    head_dim: int = 64
    kv_ratio: int = 1
    ffn_ratio: float = 8 / 3
    ffn_multiple: int = 16
    ffn_band: float = 1.5  # ffn_dim may move this factor either way from ffn_ratio * d_model to hit a size
    max_seq_len: int = 2048
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    init_std: float = 0.02
    max_layers: int = 128
    depth_rule: str = "count"  # "count": any depth, nearest count first; "aspect": the depth the aspect ratio gives

    @property
    def width_step(self) -> int:
        return self.head_dim * self.kv_ratio

    def shape(self, d_model: int, n_layers: int, ffn_dim: int, tied: bool) -> ModelShape:
        n_heads = d_model // self.head_dim
        return ModelShape(
            d_model=d_model,
            n_layers=n_layers,
            n_heads=n_heads,
            n_kv_heads=n_heads // self.kv_ratio,
            head_dim=self.head_dim,
            ffn_dim=ffn_dim,
            vocab_size=self.vocab_size,
            tied=tied,
            max_seq_len=self.max_seq_len,
            rope_theta=self.rope_theta,
            norm_eps=self.norm_eps,
            init_std=self.init_std,
        )


def _round_to(x: float, multiple: int) -> int:
    return max(multiple, int(round(x / multiple)) * multiple)


def shape_for_depth(n_layers: int, aspect_ratio: float, rules: FamilyRules, tied: bool) -> ModelShape:
    """nanochat-style sizing: depth fixes everything, d_model = aspect_ratio x n_layers (whole heads)."""
    if n_layers < 1:
        raise SpecError(f"depth must be a positive number of layers, got {n_layers}")
    d_model = _round_to(aspect_ratio * n_layers, rules.width_step)
    ffn_dim = _round_to(rules.ffn_ratio * d_model, rules.ffn_multiple)
    return rules.shape(d_model, n_layers, ffn_dim, tied)


def _count_quadratic(n_layers: int, convention: str, rules: FamilyRules, tied: bool) -> tuple[float, float]:
    """``(a, b)`` of the parameter count ``a d^2 + b d`` of a model this deep, d_model ``d``, ffn at ffn_ratio."""
    per_layer_d2 = 2 + 2 / rules.kv_ratio + 3 * rules.ffn_ratio  # q, o; k, v; gate, up, down
    b = 2 * n_layers + 1  # norms
    if convention == "total":
        b += rules.vocab_size * (1 if tied else 2)
    return n_layers * per_layer_d2, b


def _width_for(target: int, n_layers: int, convention: str, rules: FamilyRules, tied: bool) -> float:
    """The d_model at which a model of this depth, with ffn at ffn_ratio, has ``target`` parameters
    (the positive root of the quadratic count in d_model)."""
    a, b = _count_quadratic(n_layers, convention, rules, tied)
    return (-b + math.sqrt(b * b + 4 * a * target)) / (2 * a)


def aspect_depth(target: int, convention: str, aspect_ratio: float, rules: FamilyRules, tied: bool) -> int:
    """The depth whose model at exactly ``aspect_ratio`` (unrounded width, ffn at ffn_ratio) has the count nearest
    ``target`` in log: a count that grows with depth, so the depth never falls as the target grows.

    Why a rule of its own: with whole-head widths, "nearest count first" lets depth bounce along a ladder (2, 3, 2,
    3, 4, 3, 4 layers on the default study's sizes), and at these sizes depth moves the loss more than the
    count does, so a ladder whose depth bounces has a bumpy loss that no law extrapolates."""

    def miss(n_layers: int) -> float:
        a, b = _count_quadratic(n_layers, convention, rules, tied)
        d = aspect_ratio * n_layers
        return abs(math.log((a * d * d + b * d) / target))

    return min(range(1, rules.max_layers + 1), key=miss)


def shape_for_params(target: int, convention: str, aspect_ratio: float, rules: FamilyRules, tied: bool) -> ModelShape:
    """The valid shape whose parameter count (in ``convention``) is nearest ``target`` and whose
    d_model/n_layers is nearest ``aspect_ratio``, preferring the count: it is what the ladder's x-axis is.

    Search: every depth, the two or three whole-head widths around aspect_ratio x depth, and for each the
    ffn_dim (a multiple of ffn_multiple within the band) that lands closest to the target.
    """
    if target <= 0:
        raise SpecError(f"target size must be positive, got {target}")
    step = rules.width_step
    best: tuple[float, ModelShape] | None = None
    depths = range(1, rules.max_layers + 1)
    if rules.depth_rule == "aspect":
        depths = [aspect_depth(target, convention, aspect_ratio, rules, tied)]
    for n_layers in depths:
        centre = max(1, round(aspect_ratio * n_layers / step))
        hit = max(1, round(_width_for(target, n_layers, convention, rules, tied) / step))
        for k in {max(1, centre - 1), centre, centre + 1, max(1, hit - 1), hit, hit + 1}:
            d_model = k * step
            base = rules.shape(d_model, n_layers, rules.ffn_multiple, tied)
            per_ffn_unit = 3 * d_model * n_layers  # params added per unit of ffn_dim
            fixed = base.params(convention) - per_ffn_unit * rules.ffn_multiple
            lo = max(rules.ffn_multiple, _round_to(rules.ffn_ratio * d_model / rules.ffn_band, rules.ffn_multiple))
            hi = max(lo, _round_to(rules.ffn_ratio * d_model * rules.ffn_band, rules.ffn_multiple))
            wanted = (target - fixed) / per_ffn_unit
            ffn_dim = min(hi, max(lo, _round_to(wanted, rules.ffn_multiple)))
            shape = rules.shape(d_model, n_layers, ffn_dim, tied)
            miss = abs(math.log(shape.params(convention) / target))
            score = (
                10 * miss
                + abs(math.log(shape.aspect_ratio / aspect_ratio))
                + 0.25 * abs(math.log(ffn_dim / (rules.ffn_ratio * d_model)))
            )
            if best is None or score < best[0]:
                best = (score, shape)
        if hit == 1 and n_layers > 1 and centre > 2:
            break  # deeper still would need d_model below one head group for this target
    assert best is not None
    return best[1]
