"""The hero the ladder rehearses, as the plan sizes it: its params, tokens, shape and compute, in EXACT counted
FLOPs (``flops_per_token x tokens`` of its shape). A ``hero.compute`` given by the study is read as exact FLOPs:
the hero's size is the one that spends it at the ladder's tokens_per_param (:func:`params_for_compute`), its
tokens the compute over its shape's FLOPs per token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ladder.console import sci
from ladder.errors import SpecError
from ladder.model.config import format_count
from ladder.model.recipe import params_for_compute
from ladder.model.shape import ModelShape
from ladder.model.sizing import shape_for_params
from ladder.studies.spec import MAX_TOKENS_PER_PARAM, StudySpec

MAX_COMPUTE = 1e35  # FLOPs: ~1e9 times the largest runs trained so far; beyond it a number is a typo


@dataclass(frozen=True)
class HeroPlan:
    params: int | None
    tokens: int | None
    compute: float
    shape: ModelShape | None
    tokens_per_param: float | None
    allocation: str  # "given" or "rule" (tokens_per_param) until a fit refines it

    def to_dict(self) -> dict[str, Any]:
        return {
            "params": self.params,
            "tokens": self.tokens,
            "compute": self.compute,
            "tokens_per_param": self.tokens_per_param,
            "allocation": self.allocation,
            "shape": self.shape.public_dict() if self.shape else None,
            "compute_convention": "exact counted FLOPs (flops_per_token x tokens of the hero's shape)",
        }


def plan_hero(study: StudySpec) -> HeroPlan:
    """The hero as the study gives it: params (tokens given or by tokens_per_param), or an exact compute budget
    split by tokens_per_param (a fit refines that split later)."""
    from ladder.plan.plausibility import check_target

    h, lad = study.hero, study.ladder
    seq_len = h.seq_len or study.data.seq_len
    rules = study.model.rules(seq_len)
    tied = study.model.tie_embeddings if h.tied is None else h.tied
    aspect = h.aspect_ratio or study.model.aspect_ratio
    where = dict(conv=lad.param_count, aspect=aspect, rules=rules, tied=tied)
    if h.params is not None:
        tokens = h.tokens or int(round(lad.tokens_per_param * h.params))
        allocation = "given" if h.tokens else "rule"
        params = h.params
        shape = check_target(f"hero.params = {format_count(params)}", params, None, **where)
    else:  # hero.compute is exact counted FLOPs: the size that spends it at tokens_per_param, and its tokens
        assert h.compute is not None
        smallest = shape_for_params(1, lad.param_count, aspect, rules, tied)
        least = float(smallest.flops_per_token(seq_len)) * seq_len
        if h.compute < least:
            raise SpecError(
                f"hero.compute = {sci(h.compute)} FLOPs: less than one sequence of data.seq_len {seq_len} "
                f"tokens through the smallest model of this family ({sci(least)} FLOPs)"
            )
        if h.compute > MAX_COMPUTE:
            raise SpecError(
                f"hero.compute = {sci(h.compute)} FLOPs: beyond any training run (at most {sci(MAX_COMPUTE)} FLOPs)"
            )
        target = params_for_compute(
            h.compute,
            lad.tokens_per_param,
            lambda n: shape_for_params(n, lad.param_count, aspect, rules, tied),
            lad.param_count,
            seq_len,
        )
        shape = check_target(
            f"hero.compute = {sci(h.compute)} FLOPs (a hero of {format_count(target)} parameters "
            f"at ladder.tokens_per_param {lad.tokens_per_param:g})",
            target,
            None,
            **where,
        )
        params = shape.params(lad.param_count)
        tokens = int(round(h.compute / shape.flops_per_token(seq_len)))
        allocation = "rule"
    if tokens < seq_len:
        field = f"hero.tokens = {h.tokens}" if h.tokens else f"ladder.tokens_per_param {lad.tokens_per_param:g}"
        raise SpecError(f"{field}: the hero would train {tokens} tokens, less than one sequence of {seq_len}")
    if h.tokens and h.tokens > MAX_TOKENS_PER_PARAM * params:
        raise SpecError(
            # the words and digits of `ladder hero --tokens` (ladder.forecast.hero_run): 2.50e9, beyond 100,000
            f"hero.tokens = {format_count(h.tokens)}: {sci(h.tokens / params)} tokens per parameter of its "
            f"{format_count(params)}, beyond {MAX_TOKENS_PER_PARAM:,.0f} (Chinchilla's rule is 20)"
        )
    compute = h.compute if h.compute is not None else float(shape.flops_per_token(seq_len)) * tokens
    return HeroPlan(
        params=params,
        tokens=tokens,
        compute=compute,
        shape=shape,
        tokens_per_param=tokens / params,
        allocation=allocation,
    )
