"""The hero recommendation: one block with the configuration to train, and where each choice came from.

Each choice takes the fitted answer when the ladder measured it, else the study's own default:

* ``tied``: the tied-vs-untied ablation's winner at the hero's compute (``TieAblation.hero["winner"]``, the
  sign of its one gap there, with its call); else ``hero.tied``; else ``model.tie_embeddings``.
* ``aspect_ratio`` (d_model / n_layers): the depth-vs-width trend's calibrated forecast at the hero's compute
  (``DepthWidthResult.hero``); else ``hero.aspect_ratio``; else ``model.aspect_ratio``.
* shape: :func:`ladder.model.sizing.shape_for_params` at the hero's parameter count (in the study's
  ``param_count`` convention) with that aspect ratio, tying and the study's family rules, exactly as
  ``ladder plan`` sizes a rung.
* tokens: given by the study, the compute-optimal allocation of the fit, or the study's tokens-per-param rule
  (decided by :mod:`ladder.reports.fits.study`, passed in).
* peak LR and batch tokens: the hyperparameter laws at the hero (``LR*(N, D)``, ``B*(D)``, or their laws in
  compute); with a sweep at one size only, its optimum as a multiple of the study's rule there, carried to the
  hero by that rule (cited); else the study's recipe rule at the hero's size (``ladder.model.recipe``, as
  ``ladder plan`` applies it, ``lr_max`` clamp included). The batch is rounded to whole sequences.
* warmup and schedule: the study's ``training.schedule`` (steps from ``plan_steps`` at the chosen batch).
* loss: the forecast of the fit (``FitResult.hero``), with its 90% interval.

``Recommendation.sources`` names the origin of every choice ("fit: lr law over 3 rungs ...", "study
default ..."). Pure arithmetic: no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import yaml

from ladder.layout import jsonable
from ladder.model.config import format_count, format_multiple
from ladder.model.recipe import plan_steps, round_batch, rule_batch_tokens, rule_lr
from ladder.model.shape import ModelShape
from ladder.model.sizing import shape_for_params
from ladder.studies.spec import StudySpec

__all__ = [
    "Recommendation",
    "choose_aspect",
    "choose_tied",
    "hero_shape",
    "recommend",
]


# ------------------------------------------------------------------------------------------ the choices


SURE_P = 0.9  # below this probability that the winner wins, the tied-vs-untied choice is shown as uncertain


def tied_uncertainty(hero_call: Any) -> str | None:
    """Why the tied-vs-untied choice is uncertain, in a few words, when the ablation's call at the hero gives its
    winner a probability below :data:`SURE_P` (``hero_call``: ``TieAblation.hero`` or fit.json's
    ``tied_vs_untied.hero``); None when it is sure enough or there is no call."""
    if not isinstance(hero_call, dict) or hero_call.get("winner") not in ("tied", "untied"):
        return None
    p = hero_call.get("p_winner")
    if not isinstance(p, (int, float)) or not math.isfinite(p) or p >= SURE_P:
        return None
    other = "untied" if hero_call["winner"] == "tied" else "tied"
    flip = " (close to a coin flip)" if p < 0.6 else ""
    return (
        f"uncertain: P = {p:.2f} that {hero_call['winner']} beats {other} at the hero{flip}, below "
        f"{SURE_P:g}; either choice is within the ablation's noise"
    )


def choose_tied(study: StudySpec, tie: Any | None) -> tuple[bool, str]:
    """Tied or untied for the hero, and why. ``tie``: a ``TieAblation`` (or None). The fit's winner is the sign
    of its one gap at the hero (``TieAblation.hero``), with the call it made (certain, likely, undetermined)
    and the same numbers fit.json and the report show; a winner with P < :data:`SURE_P` is said to be uncertain
    first."""
    hero = getattr(tie, "hero", None) if tie is not None else None
    if hero and hero.get("winner") in ("tied", "untied"):
        n = sum(1 for s in tie.scales if s.gap is not None)
        doubt = tied_uncertainty(hero)
        return hero["winner"] == "tied", (
            f"fit: tied-vs-untied ablation over {n} rungs: "
            + (f"{doubt.upper()[:9]}{doubt[9:]}; " if doubt else "")
            + hero["message"]
        )
    if study.hero.tied is not None:
        why = "" if tie is None else f" (the ablation gives no hero prediction: {getattr(tie, 'reason', None)})"
        return bool(study.hero.tied), "study: hero.tied" + why
    return bool(study.model.tie_embeddings), "study default: model.tie_embeddings"


def choose_aspect(study: StudySpec, depth_width: Any | None) -> tuple[float, str]:
    """The hero's d_model / n_layers target, and why. ``depth_width``: a ``DepthWidthResult`` (or None)."""
    hero = depth_width.hero if depth_width is not None else {}
    value = hero.get("aspect_ratio")
    if value is not None and math.isfinite(value):
        n = len(depth_width.aspect.data)
        return float(value), f"fit: best aspect ratio vs compute over {n} rungs: {hero['message']}"
    why = ""
    if depth_width is not None and depth_width.aspect is None:
        why = f" (no aspect-ratio trend: {depth_width.reason})"
    if study.hero.aspect_ratio is not None:
        return float(study.hero.aspect_ratio), "study: hero.aspect_ratio" + why
    return float(study.model.aspect_ratio), "study default: model.aspect_ratio" + why


def hero_shape(study: StudySpec, params: float, *, tied: bool, aspect_ratio: float) -> ModelShape:
    """The shape ``ladder plan`` would give the hero: ``shape_for_params`` with the study's family rules."""
    seq_len = study.hero.seq_len or study.data.seq_len
    rules = study.model.rules(seq_len)
    return shape_for_params(int(round(params)), study.ladder.param_count, aspect_ratio, rules, tied)


RULE_SOURCES = {  # where the recipe's rules come from (ladder.model.recipe)
    ("lr", "olmo"): "Porian et al. 2024, as in the OLMo ladder, Bhagia et al. 2024",
    ("batch", "olmo"): "the OLMo ladder, Bhagia et al. 2024",
    ("lr", "deepseek"): "DeepSeek LLM 2024, eq. 1",
    ("batch", "deepseek"): "DeepSeek LLM 2024, eq. 1",
}


def _law_value(law: Any | None, what: str) -> tuple[float | None, list | None, str | None]:
    """(hero value, 90% interval, source) of an ``hparams.OptimumLaw``; value None when there is no law."""
    if law is None:
        return None, None, None
    v = law.hero_value
    if law.law is None or v is None or not math.isfinite(v) or v <= 0:
        return None, None, law.reason or (law.hero or {}).get("reason")
    text = f"fit: {what} law {law.formula} over {law.n_points} rungs" + _extrapolated(law)
    if law.form == "compute" and any("cannot separate" in n for n in law.notes):
        text += "; in compute, as the rungs cannot separate N from D"
    if law.rollout is None:
        text += "; no backtest (too few rungs)"
    elif law.extrapolation and law.extrapolation > (law.rollout.get("reach") or 1.0):
        reach = law.rollout.get("reach")
        text += f"; beyond its backtest's reach ({f'{format_multiple(reach)}' if reach else 'none'})"
    ci = law.hero_ci90
    return float(v), (list(ci) if ci else None), text


def _transfer(
    study: StudySpec, law: Any | None, what: str, rule, hero_value: float, hero_text: str
) -> tuple[float, list | None, str] | None:
    """A sweep at one size only: its optimum as a multiple of the study's rule there, carried to the hero by
    that rule (value, 90% interval, source), or None when there is no such sweep."""
    one = getattr(law, "single", None) if law is not None else None
    if not one:
        return None
    ne = one.get("params_non_embedding")
    if not ne:
        ne = (
            one["params"]
            if study.ladder.param_count == "non_embedding"
            else hero_shape(
                study, one["params"], tied=study.model.tie_embeddings, aspect_ratio=study.model.aspect_ratio
            ).params_non_embedding
        )
    at_rung, rule_text = rule(study.training, ne, one["flops"])
    m = one["y"] / at_rung
    ci = one.get("y_ci90")
    ci = [None if b is None else b / at_rung * hero_value for b in ci] if ci else None
    # the sweep may span every size: what it has at one size only is a usable optimum
    head = f"transfer by rule: the {what} sweep has a usable optimum at one size only ({one['scale']}, optimum "
    head += format_count(one["y"]) if what == "batch" else f"{one['y']:.3g}"
    if rule_text.startswith("study rule"):
        rule_name = study.training.lr_rule if what == "lr" else study.training.batch_rule
        rule_at_hero = hero_text[len("study rule: ") :]
        text = (
            f"{head} = {format_multiple(m)} the rule there), carried to the hero by the study's rule {rule_at_hero}"
            f" ({RULE_SOURCES[what, rule_name]}) x {m:.3g}"
        )
    else:
        text = f"{head}); the study's {rule_text[len('study: ') :]} is fixed, so the optimum is used as is"
    return m * hero_value, ci, text


def _every_rungs(study: StudySpec, what: str, value: float, rule_text: str) -> tuple[float, str] | None:
    """An ablation of one value (``lr_multipliers: [2]``, ``batch_tokens: [4096]``) is no sweep but the recipe
    every rung trained with, and the loss forecast is of that recipe: the hero gets it too, (value, source);
    None for no such ablation. (The hero got the bare rule, an LR or batch no rung trained at, in silence.)"""
    a = study.ablations
    absolute, multipliers = (a.lr, a.lr_multipliers) if what == "lr" else (a.batch_tokens, a.batch_multipliers)
    field = "lr" if what == "lr" else "batch_tokens"
    if absolute is not None and len(absolute) == 1:
        v = float(absolute[0])
        return v, f"study: ablations.{field} [{v:g}], a single value that every rung trained with, so the hero does"
    if multipliers is not None and len(multipliers) == 1 and float(multipliers[0]) != 1.0:
        m = float(multipliers[0])
        return m * value, (
            f"{rule_text} at the hero's size x {m:g}: ablations.{what}_multipliers [{m:g}], a single value that "
            "every rung trained with, so the hero does"
        )
    return None


def beyond_every_sweep(hparams: Any | None, what: str, value: float) -> str | None:
    """A note when every rung that swept ``what`` (``lr`` or ``batch``; two or more) found its optimum beyond the
    same end of its grid, and ``value`` (the hero's, from the study's rule or setting) lies on the wrong side of
    what they tried: a peak LR above the lowest LR at which each rung's loss was still falling, say. The rule is
    then the one choice the ladder measured against; else None."""
    opts = [
        (sc.scale, getattr(sc.fit, what))
        for sc in getattr(hparams, "scales", ()) or ()
        if sc.fit is not None and getattr(sc.fit, what) is not None
    ]
    if len(opts) < 2 or any(o.status == "ok" or not o.grid for _, o in opts):
        return None  # one rung beyond its grid may be its noise
    sides = {o.edge_side for _, o in opts}
    if sides not in ({"low"}, {"high"}):
        return None
    low = sides == {"low"}
    ends = [(scale, min(o.grid) if low else max(o.grid)) for scale, o in opts]
    if (value <= min(e for _, e in ends)) if low else (value >= max(e for _, e in ends)):
        return None
    fmt = format_count if what == "batch" else (lambda x: f"{x:.3g}")
    name, axis = (
        ("peak LR", "lr_multipliers (or lr)") if what == "lr" else ("batch", "batch_multipliers (or batch_tokens)")
    )
    end = "lowest" if low else "highest"
    tried = ", ".join(f"{fmt(e)} at {scale}" for scale, e in ends)
    diverged = _diverged_above(hparams, dict(ends)) if what == "lr" and not low else None
    said = (
        f"the {name} the study gives the hero, {fmt(value)}, is {'above' if low else 'below'} the {end} {name} "
        f"every rung's sweep {'trained to the end' if diverged else 'tried'} ({tried}), and each rung found its "
        f"optimum beyond that end of its grid: the ladder says {'lower' if low else 'higher'}. "
    )
    if diverged:  # upwards is where the LR diverged: "widen upwards" led into it
        return said + (
            f"Each rung diverged at the next LR it tried ({diverged}): add LRs between the two to "
            f"ablations.{axis} and fit again before training the hero"
        )
    return said + f"Widen ablations.{axis} {'downwards' if low else 'upwards'} and fit again before training the hero"


def _diverged_above(hparams: Any, tops: dict) -> str | None:
    """The "0.08 at 25K, ..." when every rung in ``tops`` (rung -> its highest finite LR) has a run without a finite
    loss (diverged) at a higher LR, the lowest such LR of each; else None."""
    found = []
    for sc in getattr(hparams, "scales", ()) or ():
        if sc.scale not in tops:
            continue
        above = [
            float(p["lr"])
            for p in sc.points or ()
            if p.get("lr") is not None
            and float(p["lr"]) > tops[sc.scale] * (1 + 1e-9)
            and not (isinstance(p.get("loss"), (int, float)) and math.isfinite(p["loss"]))
        ]
        if not above:
            return None
        found.append(f"{min(above):.3g} at {sc.scale}")
    return ", ".join(found) if len(found) == len(tops) else None


def _extrapolated(trend: Any) -> str:
    """How far a ``Trend`` reaches to the hero, and its 90% interval there: the tail of a source text."""
    text = ""
    if trend.extrapolation:
        text += f", extrapolated {format_multiple(trend.extrapolation)} in compute"
    ci = trend.hero_ci90
    if ci and ci[0] is not None and ci[1] is not None:
        text += f" (90% [{_bound(ci[0])}, {_bound(ci[1])}])"
    return text


def _bound(x: float) -> str:
    # a batch's bounds in the digits fit and the report give the batch itself (5.243K), never g's 5.24e+03
    return format_count(x) if abs(x) >= 1000 else f"{x:.3g}"


# --------------------------------------------------------------------------------------- the recommendation


@dataclass(frozen=True)
class Recommendation:
    """The recommended hero configuration. ``params`` is in ``param_convention`` (the law's N)."""

    study: str
    param_convention: str
    params: int  # the shape's count in the convention (the target was ``params_target``)
    params_target: float
    params_total: int
    params_non_embedding: int
    tokens: int
    tokens_per_param: float
    allocation: str  # "given", "compute_optimal" or "rule"
    compute: float  # 6 N D in the param_count convention (the law's C)
    flops: float  # the shape's FLOPs per token x tokens (the ladder's flops column convention)
    shape: ModelShape
    tied: bool
    aspect_ratio_target: float
    seq_len: int
    batch_tokens: int
    lr: float
    lr_ci90: list | None
    batch_tokens_ci90: list | None
    steps: int
    warmup_steps: int
    warmup_fraction: float
    micro_batch_size: int
    schedule: dict
    loss: float | None
    loss_lo: float | None
    loss_hi: float | None
    sources: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def aspect_ratio(self) -> float:
        return self.shape.aspect_ratio

    def to_dict(self) -> dict:
        return jsonable(
            {
                "study": self.study,
                "param_convention": self.param_convention,
                "params": self.params,
                "params_target": self.params_target,
                "params_total": self.params_total,
                "params_non_embedding": self.params_non_embedding,
                "tokens": self.tokens,
                "tokens_per_param": self.tokens_per_param,
                "allocation": self.allocation,
                "compute": self.compute,
                "flops": self.flops,
                "d_model": self.shape.d_model,
                "n_layers": self.shape.n_layers,
                "n_heads": self.shape.n_heads,
                "n_kv_heads": self.shape.n_kv_heads,
                "head_dim": self.shape.head_dim,
                "ffn_dim": self.shape.ffn_dim,
                "vocab_size": self.shape.vocab_size,
                "tied": self.tied,
                "aspect_ratio": self.aspect_ratio,
                "aspect_ratio_target": self.aspect_ratio_target,
                "seq_len": self.seq_len,
                "batch_tokens": self.batch_tokens,
                "batch_tokens_ci90": self.batch_tokens_ci90,
                "lr": self.lr,
                "lr_ci90": self.lr_ci90,
                "steps": self.steps,
                "warmup_steps": self.warmup_steps,
                "warmup_fraction": self.warmup_fraction,
                "micro_batch_size": self.micro_batch_size,
                "schedule": dict(self.schedule),
                "loss": self.loss,
                "loss_interval": [self.loss_lo, self.loss_hi],
                "sources": dict(self.sources),
                "notes": list(self.notes),
            }
        )

    def to_yaml_snippet(self) -> str:
        """The recommendation as ``hero:`` and ``training:`` sections a user can paste into a study YAML
        (both validate as ``HeroSpec`` / ``TrainingSpec``), with the shape and forecast as comments.
        Note: in a study, ``training`` values apply to every run, ladder rungs included."""
        loss = "-" if self.loss is None else f"{self.loss:.4g}"
        interval = (
            ""
            if self.loss_lo is None or self.loss_hi is None
            else f", 90% interval [{self.loss_lo:.4g}, {self.loss_hi:.4g}]"
        )
        s = self.shape
        head = [
            f"# ladder hero recommendation for study {self.study!r}",
            f"# predicted loss {loss}{interval}",
            f"# shape: d_model {s.d_model}, n_layers {s.n_layers}, n_heads {s.n_heads}, n_kv_heads {s.n_kv_heads}, "
            f"head_dim {s.head_dim}, ffn_dim {s.ffn_dim}, vocab {s.vocab_size}, "
            f"{'tied' if self.tied else 'untied'} (aspect {self.aspect_ratio:.3g})",
            f"# params: {format_count(self.params)} {self.param_convention} "
            f"({format_count(self.params_total)} total, {format_count(self.params_non_embedding)} non-embedding); "
            f"tokens {format_count(self.tokens)} ({self.tokens_per_param:.3g}/param, allocation {self.allocation})",
            f"# steps {self.steps}, warmup {self.warmup_steps} steps ({self.warmup_fraction:g}), "
            f"micro-batch {self.micro_batch_size} sequences",
        ]
        for key in ("tied", "aspect_ratio", "tokens", "lr", "batch_tokens"):
            if key in self.sources:
                head.append(f"#   {key}: {self.sources[key]}")
        body = {
            "hero": {
                "params": int(self.params),
                "tokens": int(self.tokens),
                "tied": bool(self.tied),
                "aspect_ratio": float(round(self.aspect_ratio, 4)),
                "seq_len": int(self.seq_len),
            },
            "training": {
                "lr": float(f"{self.lr:.4g}"),
                "batch_tokens": int(self.batch_tokens),
                "schedule": jsonable(dict(self.schedule)),
            },
        }
        return "\n".join(head) + "\n" + yaml.safe_dump(body, sort_keys=False)


def recommend(
    study: StudySpec,
    *,
    params: float,
    tokens: float,
    allocation: str,
    allocation_source: str,
    tied: bool,
    tied_source: str,
    aspect_ratio: float,
    aspect_source: str,
    hparams: Any | None = None,
    loss: dict | None = None,
    shape: ModelShape | None = None,
) -> Recommendation:
    """Assemble the recommendation. ``params``/``tokens``: the hero's N (in the study's convention) and D;
    ``hparams``: a ``HparamResult`` whose ``lr``/``batch`` laws were evaluated at the hero (or None); ``loss``: the hero forecast, a dict with ``loss``, ``lo``, ``hi`` and ``source``."""
    conv = study.ladder.param_count
    seq_len = study.hero.seq_len or study.data.seq_len
    shape = shape or hero_shape(study, params, tied=tied, aspect_ratio=aspect_ratio)
    t = study.training
    flops0 = float(shape.flops_per_token(seq_len)) * tokens
    notes: list[str] = []
    sources = {
        "tied": tied_source,
        "aspect_ratio": aspect_source,
        "shape": (
            f"shape_for_params({format_count(params)} {conv}, aspect {aspect_ratio:.3g}, "
            f"{'tied' if tied else 'untied'}) with the study's model rules (head_dim {shape.head_dim}, "
            f"kv_ratio {study.model.kv_ratio}, ffn_ratio {study.model.ffn_ratio:.3g})"
        ),
        "tokens": allocation_source,
    }

    lr_fit, lr_ci, lr_text = _law_value(None if hparams is None else hparams.lr, "lr")
    if lr_fit is not None:
        lr, sources["lr"] = lr_fit, lr_text
    else:
        lr, text = rule_lr(study.training, shape.params_non_embedding, flops0)
        moved = _transfer(study, None if hparams is None else hparams.lr, "lr", rule_lr, lr, text)
        if moved is not None:
            lr, lr_ci, sources["lr"] = moved
        elif (one := _every_rungs(study, "lr", lr, text)) is not None:
            lr, sources["lr"] = one
            lr_ci = None
        else:
            sources["lr"] = text + " at the hero's size" + (f" (no LR law: {lr_text})" if lr_text else "")
            lr_ci = None
    b_fit, b_ci, b_text = _law_value(None if hparams is None else hparams.batch, "batch_tokens")
    if b_fit is not None:
        raw_batch, sources["batch_tokens"] = b_fit, b_text + ", rounded to whole sequences"
    else:
        raw_batch, text = rule_batch_tokens(study.training, shape.params_non_embedding, flops0)
        moved = _transfer(
            study, None if hparams is None else hparams.batch, "batch", rule_batch_tokens, raw_batch, text
        )
        if moved is not None:
            raw_batch, b_ci, src = moved
            sources["batch_tokens"] = src + ", rounded to whole sequences"
        elif (one := _every_rungs(study, "batch", raw_batch, text)) is not None:
            raw_batch, src = one
            sources["batch_tokens"] = src + ", rounded to whole sequences"
            b_ci = None
        else:
            sources["batch_tokens"] = (
                text
                + " at the hero's size, rounded to whole sequences"
                + (f" (no batch law: {b_text})" if b_text else "")
            )
            b_ci = None
    batch = round_batch(raw_batch, seq_len, t.batch_min_sequences, t.batch_max_tokens)
    for what, value, source in (("lr", lr, "lr"), ("batch", batch, "batch_tokens")):
        if sources[source].startswith("study") and (note := beyond_every_sweep(hparams, what, value)):
            notes.append(note)
    if batch != raw_batch and abs(math.log(batch / raw_batch)) > math.log(1.5):
        notes.append(
            f"batch {raw_batch:.4g} tokens rounded to {batch} (batch_min_sequences {t.batch_min_sequences}, "
            f"batch_max_tokens {t.batch_max_tokens}, seq_len {seq_len})"
        )
    st = plan_steps(tokens, batch, seq_len, t.schedule.warmup_fraction, t.micro_batch_tokens)
    sources["warmup"] = f"study: training.schedule.warmup_fraction {t.schedule.warmup_fraction:g} of the steps"
    sources["schedule"] = f"study: training.schedule ({t.schedule.kind})"
    if loss is not None and loss.get("source"):
        sources["loss"] = loss["source"]
    n_conv = shape.params(conv)
    if abs(math.log(n_conv / params)) > 0.05:
        notes.append(
            f"the nearest valid shape has {format_count(n_conv)} {conv} parameters, "
            f"{100 * (n_conv / params - 1):+.1f}% off the target {format_count(params)}"
        )
    return Recommendation(
        study=study.name,
        param_convention=conv,
        params=int(n_conv),
        params_target=float(params),
        params_total=shape.params_total,
        params_non_embedding=shape.params_non_embedding,
        tokens=int(st.tokens),
        tokens_per_param=st.tokens / n_conv,
        allocation=allocation,
        compute=6.0 * n_conv * st.tokens,
        flops=float(shape.flops_per_token(seq_len)) * st.tokens,
        shape=shape,
        tied=bool(tied),
        aspect_ratio_target=float(aspect_ratio),
        seq_len=int(seq_len),
        batch_tokens=int(st.batch_tokens),
        lr=float(lr),
        lr_ci90=lr_ci,
        batch_tokens_ci90=b_ci,
        steps=int(st.steps),
        warmup_steps=int(st.warmup_steps),
        warmup_fraction=float(t.schedule.warmup_fraction),
        micro_batch_size=int(st.micro_batch_size),
        schedule=t.schedule.model_dump(mode="json"),
        loss=None if loss is None else loss.get("loss"),
        loss_lo=None if loss is None else loss.get("lo"),
        loss_hi=None if loss is None else loss.get("hi"),
        sources=sources,
        notes=tuple(notes),
    )
