"""How to train a given size: default peak LR and batch as functions of scale, and the step arithmetic.

Kept apart from sizing (what shape) as in OLMo-core's ladder: size -> shape, (N, D, axes) -> recipe.
Every rule names its source; all are clamped for the tiny models of CPU ladders, far below where they
were fitted.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from ladder.model.shape import ModelShape

OLMO_REFERENCE_PARAMS = 108e6
OLMO_REFERENCE_SEQ_LEN = 2048


def olmo_lr(params: float) -> float:
    """Peak LR = 0.0047 (N / 108M)^(-1/3): Porian et al. (2024), as used by the OLMo ladder
    (Bhagia et al. 2024, allenai/OLMo scripts/ladder.py). N counts non-embedding parameters there."""
    return 0.0047 * (params / OLMO_REFERENCE_PARAMS) ** (-1 / 3)


def olmo_batch_tokens(params: float) -> float:
    """Batch = 160 (N / 108M)^(2/3) sequences of 2048 tokens: the OLMo ladder (Bhagia et al. 2024)."""
    return 160 * (params / OLMO_REFERENCE_PARAMS) ** (2 / 3) * OLMO_REFERENCE_SEQ_LEN


def deepseek_lr(flops: float) -> float:
    """Peak LR = 0.3118 C^-0.1250: DeepSeek LLM (2024), eq. 1, fitted for 1e17-2e19 FLOPs.

    ``flops`` is the run's EXACT counted training FLOPs (``flops_per_token x tokens``, model/shape.py). DeepSeek's
    own C = M D counts non-embedding FLOPs per token (attention included, the LM head's matmul not), so on
    small-vocabulary-dominated CPU rungs this C is larger than theirs would be."""
    return 0.3118 * flops ** (-0.1250)


def deepseek_batch_tokens(flops: float) -> float:
    """Batch = 0.2920 C^0.3271 tokens: DeepSeek LLM (2024), eq. 1; ``flops`` in exact counted FLOPs (see
    :func:`deepseek_lr`)."""
    return 0.2920 * flops**0.3271


def params_for_compute(
    compute: float, tokens_per_param: float, shape_at: Callable[[int], ModelShape], convention: str, seq_len: int
) -> int:
    """The size N (in ``convention``) whose shape, trained on ``tokens_per_param x N`` tokens, costs ``compute``
    EXACT counted FLOPs: ``C = flops_per_token(shape(N)) x tokens_per_param x N``. The 6ND guess
    ``sqrt(C / 6 tokens_per_param)`` starts it; each step then uses the exact FLOPs per parameter of the shape
    drawn at the current N (at small sizes the attention and LM-head terms make them several times 6)."""
    n = max(1, int(round(math.sqrt(compute / (6 * tokens_per_param)))))
    seen: set[int] = set()
    for _ in range(32):
        shape = shape_at(n)
        per_param = shape.flops_per_token(seq_len) / shape.params(convention)
        nxt = max(1, int(round(math.sqrt(compute / (per_param * tokens_per_param)))))
        if nxt == n or nxt in seen:  # converged, or cycling between two whole-head shapes
            return nxt
        seen.add(n)
        n = nxt
    return n


class RecipeRules(Protocol):
    """The recipe fields of a study's ``training`` section that the rules read (``ladder.studies.spec.TrainingSpec``)."""

    lr: float | Literal["auto"]
    lr_rule: str
    lr_scale: float
    lr_max: float | None
    batch_tokens: int | Literal["auto"]
    batch_rule: str
    batch_scale: float


def _scaled_rule(
    rule: str,
    olmo: tuple[Callable[[], float], str],
    deepseek: tuple[Callable[[], float], str],
    scale: float,
    scale_field: str,
) -> tuple[float, str]:
    """The study's rule (``olmo``, else ``deepseek``: each a value and its formula) times its scale, and the text
    that says where the number comes from."""
    value, formula = olmo if rule == "olmo" else deepseek
    text = f"study rule: {formula}"
    if scale != 1:
        text += f" x {scale_field} {scale:g}"
    return value() * scale, text


def rule_lr(training: RecipeRules, params_non_embedding: float, flops: float) -> tuple[float, str]:
    """A study's default peak LR at a size, and where it comes from (the plan and the recommendation both use
    it)."""
    t = training
    if t.lr != "auto":
        return float(t.lr), "study: training.lr"
    lr, text = _scaled_rule(
        t.lr_rule,
        (lambda: olmo_lr(params_non_embedding), "olmo LR = 0.0047 (N_non_embedding / 108M)^(-1/3)"),
        (lambda: deepseek_lr(flops), "deepseek LR = 0.3118 C^-0.125 (C: exact counted FLOPs)"),
        t.lr_scale, "lr_scale",
    )  # fmt: skip
    if t.lr_max is not None and lr > t.lr_max:
        lr = t.lr_max
        text += f", clamped at lr_max {t.lr_max:g}"
    return float(lr), text


def rule_batch_tokens(training: RecipeRules, params_non_embedding: float, flops: float) -> tuple[float, str]:
    """A study's default batch in tokens at a size (before rounding to whole sequences), and where it comes
    from."""
    t = training
    if t.batch_tokens != "auto":
        return float(t.batch_tokens), "study: training.batch_tokens"
    batch, text = _scaled_rule(
        t.batch_rule,
        (lambda: olmo_batch_tokens(params_non_embedding),
         "olmo batch = 160 (N_non_embedding / 108M)^(2/3) x 2048 tokens"),
        (lambda: deepseek_batch_tokens(flops), "deepseek batch = 0.292 C^0.3271 tokens (C: exact counted FLOPs)"),
        t.batch_scale, "batch_scale",
    )  # fmt: skip
    return float(batch), text


@dataclass(frozen=True)
class Steps:
    batch_tokens: int
    micro_batch_size: int
    steps: int
    tokens: int
    warmup_steps: int


def round_batch(batch_tokens: float, seq_len: int, min_sequences: int, max_tokens: int | None) -> int:
    """A batch in tokens that is a whole number of sequences, at least ``min_sequences``."""
    sequences = max(min_sequences, int(round(batch_tokens / seq_len)))
    if max_tokens is not None:
        sequences = min(sequences, max(min_sequences, max_tokens // seq_len))
    return sequences * seq_len


def micro_batch_for(sequences: int, seq_len: int, max_micro_tokens: int) -> int:
    """As many sequences per forward pass as fit ``max_micro_tokens`` (at least 1, at most the batch). It need
    not divide the batch: the last chunk is smaller, and the trainer weights each chunk's loss by its size, so
    the gradient is the mean over the whole batch either way."""
    cap = max(1, max_micro_tokens // seq_len)
    return min(sequences, cap)


def steps_for(tokens: float, batch_tokens: int) -> int:
    """Whole steps that cover ``tokens`` at ``batch_tokens`` (at least 1)."""
    return max(1, int(round(tokens / batch_tokens)))


def plan_steps(
    tokens: float,
    batch_tokens: int,
    seq_len: int,
    warmup_fraction: float,
    max_micro_tokens: int,
    warmup_steps: int | None = None,
) -> Steps:
    """Steps to cover ``tokens`` at ``batch_tokens`` (rounded to whole steps, at least 1), the warmup
    share of them (or ``warmup_steps`` when given: a warmup that does not depend on this run's length), and the
    micro-batch that gradient accumulation splits each step into."""
    steps = steps_for(tokens, batch_tokens)
    sequences = batch_tokens // seq_len
    return Steps(
        batch_tokens=batch_tokens,
        micro_batch_size=micro_batch_for(sequences, seq_len, max_micro_tokens),
        steps=steps,
        tokens=steps * batch_tokens,
        warmup_steps=int(round(warmup_fraction * steps)) if warmup_steps is None else warmup_steps,
    )


def every(steps: int, times: int) -> int:
    """An interval that makes something happen about ``times`` times in ``steps`` steps."""
    return max(1, math.ceil(steps / times))
