"""Nonsense that a schema cannot see, refused before anything is written, and what a plan changed from what the
study asked for, said out loud.

Refused (a ``SpecError`` naming the field, the value and what would do): a size that the family cannot build
near its target (below its smallest model, or beyond ``model.max_layers`` at a sane aspect ratio), a head wider
than a rung's model, two sizes that become the same model, a batch smaller than one sequence, a model whose
training state does not fit one device of ``executor.hardware``.

Said (plan notes): a size that lands more than 10% from its target, a batch that rounding to whole sequences (or
``batch_min_sequences`` / ``batch_max_tokens``) moved more than 10% from what the rule or the study asked for.
Warned: a ladder that costs more than its hero, a run the plan expects to train for more than a month.

Checked against this machine (``studies validate``, ``plan``, ``run``; :func:`check_machine`): the corpus exists
and the tracker's package is installed.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ladder.errors import DataError, SpecError
from ladder.model.config import RunSpec, format_count, format_flops, format_multiple, share_of_hero
from ladder.model.hardware import device_memory_bytes
from ladder.model.recipe import rule_batch_tokens
from ladder.model.shape import ModelShape
from ladder.model.sizing import FamilyRules, shape_for_params
from ladder.plan.rung_runs import variant_label
from ladder.studies.spec import StudySpec, plain_number

FAR = 2.0  # a size landing beyond 2x its target (either way) is not that size
NOTE_MISS = 0.10  # a landing or a batch more than 10% from what was asked is said in the plan
ASPECT_MISS = 1.5  # a swept aspect ratio whose shape lands this far from it (either way) is said in the plan
ASPECT_FAR = 8.0  # at max_layers, a model this much wider than its aspect ratio is not of the family
STATE_BYTES_PER_PARAM = 16  # fp32 weights and gradients, and AdamW's two moments
LONG_RUN_S = 30 * 86400
TRACKER_PACKAGES = {"tensorboard": ("tensorboard", "ladder[tensorboard]"), "wandb": ("wandb", "ladder[wandb]")}


def _listed(values: Iterable[Any], limit: int = 4) -> str:
    values = list(values)
    more = f" and {len(values) - limit} more" if len(values) > limit else ""
    return ", ".join(str(v) for v in values[:limit]) + more


# ---- before expansion ---------------------------------------------------------------------------------------


def check_study(study: StudySpec) -> None:
    """Refusals that need no expansion: batches below one sequence, heads wider than a depth rung's model."""
    seq, t = study.data.seq_len, study.training
    if t.batch_tokens != "auto" and t.batch_tokens < seq:
        raise SpecError(
            f"training.batch_tokens = {t.batch_tokens}: smaller than one sequence (data.seq_len {seq}); "
            f"a batch holds whole sequences: give at least {seq}"
        )
    for i, b in enumerate(study.ablations.batch_tokens or []):
        if b < seq:
            raise SpecError(f"ablations.batch_tokens[{i}] = {b}: smaller than one sequence (data.seq_len {seq})")
    if t.batch_max_tokens is not None and t.batch_max_tokens < seq:
        raise SpecError(
            f"training.batch_max_tokens = {t.batch_max_tokens}: smaller than one sequence (data.seq_len {seq})"
        )
    rules = study.model.rules(seq)
    for depth in study.ladder.depths or []:
        for aspect in study.ablations.aspect_ratio or [study.model.aspect_ratio]:
            width = aspect * depth
            if rules.width_step > 2 * width:
                raise SpecError(
                    f"model.head_dim = {rules.head_dim}: one head group (head_dim x kv_ratio {rules.kv_ratio} = "
                    f"{rules.width_step}) is wider than rung L{depth}'s model (aspect_ratio {aspect:g} x {depth} "
                    f"layers = d_model {width:g}); use a head_dim of at most {max(2, int(width) // 2 * 2)}"
                )


# ---- after expansion ----------------------------------------------------------------------------------------


def _smallest(rules: FamilyRules, tied: bool) -> ModelShape:
    return rules.shape(rules.width_step, 1, rules.ffn_multiple, tied)


def _target_fields(study: StudySpec) -> list[tuple[str, int]]:
    lad = study.ladder
    if lad.mode == "chinchilla":
        return [(f"ladder.sizes[{i}]", s) for i, s in enumerate(lad.sizes or [])]
    return [(f"ladder.isoflop_sizes[{i}]", s) for i, s in enumerate(lad.isoflop_sizes or [])]


def _shapes_by_target(study: StudySpec) -> dict[tuple[bool, float], list[tuple[str, int, ModelShape]]]:
    """Per (tied, aspect ratio) of the study's axes: the shape each explicit size becomes."""
    rules = study.model.rules(study.data.seq_len)
    conv = study.ladder.param_count
    out: dict[tuple[bool, float], list[tuple[str, int, ModelShape]]] = {}
    for tied in study.ablations.tie_embeddings or [study.model.tie_embeddings]:
        for aspect in study.ablations.aspect_ratio or [study.model.aspect_ratio]:
            out[(tied, aspect)] = [(field, target, shape_for_params(target, conv, aspect, rules, tied))
                                   for field, target in _target_fields(study)]  # fmt: skip
    return out


MAX_TARGET = 1e15  # a size beyond 1P parameters is a typo, not a model (and its shape would overflow the sizing)


def check_target(
    label: str, target: float, shape: ModelShape | None, *, conv: str, aspect: float, rules: FamilyRules, tied: bool
) -> ModelShape:
    """Refuse a size the family cannot build near its target (the same bounds for a rung, the hero of a study and
    ``ladder hero --params``); returns its shape. ``label`` names the field or option and its value."""
    if not 0 < target <= MAX_TARGET:
        raise SpecError(f"{label}: beyond what this family builds (at most {format_count(MAX_TARGET)} parameters)")
    if shape is None:
        shape = shape_for_params(int(round(target)), conv, aspect, rules, tied)
    got = shape.params(conv)
    if got > FAR * target:
        small = _smallest(rules, tied)
        raise SpecError(
            f"{label}: below what this family builds (it lands on a model of {format_count(got)} {conv} "
            f"parameters, {format_multiple(got / target)} the target; its smallest, one layer of one head group of "
            f"model.head_dim {rules.head_dim} x kv_ratio {rules.kv_ratio}, has "
            f"{format_count(small.params(conv))}): raise the size or lower model.head_dim"
        )
    if got * FAR < target:
        raise SpecError(
            f"{label}: the nearest model this family builds has {format_count(got)} {conv} "
            f"parameters ({format_multiple(target / got)} fewer); raise model.max_layers"
        )
    if shape.n_layers == rules.max_layers and shape.aspect_ratio > ASPECT_FAR * aspect:
        raise SpecError(
            f"{label}: beyond what this family builds: at model.max_layers {rules.max_layers} the model "
            f"would be {shape.d_model:,} wide ({shape.n_heads:,} heads, aspect ratio "
            f"{shape.aspect_ratio:,.0f} instead of {aspect:g}); lower the size or raise model.max_layers"
        )
    return shape


def check_sizes(study: StudySpec) -> None:
    """Sizes the family cannot build near their targets, and sizes that become the same model."""
    rules = study.model.rules(study.data.seq_len)
    conv = study.ladder.param_count
    for (tied, aspect), shapes in _shapes_by_target(study).items():
        seen: dict[ModelShape, str] = {}
        for field, target, shape in shapes:
            got = shape.params(conv)
            label = f"{field} = {format_count(target)}"
            check_target(label, target, shape, conv=conv, aspect=aspect, rules=rules, tied=tied)
            if shape in seen:
                raise SpecError(
                    f"{seen[shape]} and {label} become the same model ({shape.describe()}, {format_count(got)} "
                    f"{conv} parameters{'' if tied else ', untied'}): a ladder needs distinct rungs; spread the "
                    "sizes or lower model.head_dim"
                )
            seen[shape] = label


def check_runs(study: StudySpec, runs: list[RunSpec], estimates_s: dict[str, float]) -> list[str]:
    """Refuse runs that one device of ``executor.hardware`` cannot hold; returns warnings about their cost."""
    hw = study.executor.hardware
    if not runs:
        return []
    biggest = max(runs, key=lambda r: r.shape.params_total)
    # before the plan's full estimate (ladder.plan.packing.check_memory): no micro-batch makes this size fit
    need_gb = STATE_BYTES_PER_PARAM * biggest.shape.params_total / 2**30
    cap_gb = device_memory_bytes(hw) / 2**30
    ex = study.executor
    if hw == "cpu" and ex.kind == "slurm" and ex.slurm.mem_gb:  # what the job is given, not this machine's RAM
        cap_gb = ex.slurm.mem_gb
    if need_gb > cap_gb:
        shape = biggest.shape
        remedy = "lower ladder.sizes"
        if shape.params_embedding > shape.params_non_embedding:  # the vocabulary, not the size, is too big
            remedy = (
                f"lower model.vocab_size ({study.model.vocab_size:,}): its embedding holds "
                f"{format_count(shape.params_embedding)} of them"
            )
        raise SpecError(
            f"ladder: the largest run ({biggest.axes.get('size', biggest.run_id)}, {format_count(shape.params_total)} "
            f"parameters in total) needs about {need_gb:,.3g} GiB for its fp32 weights, gradients and AdamW moments, "
            f"more than the {cap_gb:,.3g} GiB of one {hw} (executor.hardware): {remedy}"
        )
    warnings = []
    slow = [r for r in runs if estimates_s.get(r.run_id, 0.0) > LONG_RUN_S]
    if slow:
        days = max(estimates_s[r.run_id] for r in slow) / 86400
        warnings.append(
            f"{len(slow)} run(s) are estimated at more than 30 days each on {hw} (up to {days:,.3g} "
            "days): check ladder.sizes and executor.hardware"
        )
    return warnings


def adjustments(study: StudySpec, runs: list[RunSpec]) -> list[str]:
    """Notes on what the plan changed from what the study asked for: sizes far from their targets, batches moved
    by rounding to whole sequences and the study's batch bounds."""
    notes = []
    conv = study.ladder.param_count
    far = {}
    for (tied, aspect), shapes in _shapes_by_target(study).items():
        for field, target, shape in shapes:
            miss = shape.params(conv) / target - 1
            if abs(miss) > NOTE_MISS:
                far.setdefault(format_count(target), f"{format_count(target)} -> "
                               f"{format_count(shape.params(conv))} ({100 * miss:+.0f}%)")  # fmt: skip
    if far:
        notes.append(
            f"sizes more than {100 * NOTE_MISS:.0f}% from their targets ({conv} parameters; whole heads and "
            f"layers): {_listed(far.values())}"
        )
    moved: dict[str, str] = {}
    t = study.training
    for r in runs:
        want, _ = rule_batch_tokens(t, r.shape.params_non_embedding, r.flops)
        if "batch_tokens" in r.axes:
            want = float(r.axes["batch_tokens"])
        elif "batch_multipliers" in r.axes:
            want *= float(r.axes["batch_multipliers"])
        if want > 0 and abs(r.batch_tokens / want - 1) > NOTE_MISS:
            # a batch sweep rounds each of its points apart: name the point, not only the size
            swept = {k: float(r.axes[k]) for k in ("batch_tokens", "batch_multipliers") if k in r.axes}
            where = " ".join([str(r.axes.get("size", r.run_id)), *([variant_label(swept)] if swept else [])])
            change = f"{where} {want:,.0f} -> {r.batch_tokens:,}"
            moved.setdefault(change, change)
    aimed: dict[str, str] = {}
    for r in runs:  # whole heads and layers move a small model's aspect ratio: the fit reads the shape's own
        if "aspect_ratio" in r.axes:
            want, got = float(r.axes["aspect_ratio"]), r.shape.d_model / r.shape.n_layers
            if max(got / want, want / got) > ASPECT_MISS:
                change = f"{r.variant} at {r.axes.get('size', r.run_id)} -> {got:.3g}"
                aimed.setdefault(change, change)
    if aimed:
        notes.append(
            f"swept aspect ratios more than {ASPECT_MISS:g}x from their targets (whole heads and layers; the "
            f"depth-vs-width fit reads each shape's own d_model / n_layers): {_listed(aimed.values())}"
        )
    if moved:
        bounds = f"at least batch_min_sequences {t.batch_min_sequences}"
        if t.batch_max_tokens is not None:
            bounds += f", at most batch_max_tokens {t.batch_max_tokens:,}"
        notes.append(
            f"batch (tokens) rounded to whole sequences of data.seq_len {study.data.seq_len}, {bounds}: "
            f"{_listed(moved.values())}"
        )
    return notes


def cost_warning(study: StudySpec, pct_of_hero: float) -> list[str]:
    if math.isfinite(pct_of_hero) and pct_of_hero > 100:
        return [
            f"the ladder costs {' '.join(share_of_hero(pct_of_hero))}: a ladder rehearses a bigger run for a "
            "small share of its cost (check ladder.sizes and hero)"
        ]
    return []


# ---- this machine -------------------------------------------------------------------------------------------


def check_machine(study: StudySpec) -> None:
    """What the study needs from the machine it is validated or planned on: a local corpus that exists (and
    holds files of one known type), and the package of its experiment tracker."""
    corpus = study.data.corpus.strip()
    if not corpus or corpus in ("hf:", "hf::"):  # data preparation would refuse it after the plan
        raise SpecError(
            f"data.corpus = {study.data.corpus!r}: name 'embedded', a local jsonl/parquet file or folder, a folder "
            "of .txt files, or 'hf:<dataset>[:<config>]'"
        )
    if corpus != "embedded" and not corpus.startswith("hf:"):
        from ladder.model.data.corpus import resolve_corpus

        try:
            resolve_corpus(corpus, study.data.text_key)
        except DataError as exc:
            raise SpecError(f"data.corpus = {corpus!r}: {exc}") from None
    ev = study.evals
    if ev is not None and (ev.tasks or ev.include_path):  # refused now, not after the ladder has trained
        from ladder.model.evaluation.downstream import SHIPPED_TASKS, resolve_task_manager

        try:
            resolve_task_manager(list(ev.tasks or SHIPPED_TASKS), Path(ev.include_path) if ev.include_path else None)
        except SpecError as exc:
            raise SpecError(f"evals: {str(exc).replace('--include-path', 'evals.include_path')}") from None
    kind = study.tracking.kind
    if kind in TRACKER_PACKAGES:
        module, extra = TRACKER_PACKAGES[kind]
        if importlib.util.find_spec(module) is None:
            raise SpecError(
                f"tracking.kind = {kind!r} needs the {module} package, which is not installed: pip install '{extra}'"
            )


# ---- what data preparation and the fit need --------------------------------------------------------------

# the fit's own thresholds (ladder.reports.fits.loss.loss_forms; a test checks that they agree): runs at >= 3 sizes;
# a form's parameters + 1 runs; Chinchilla's two terms need >= 2 tokens/param ratios (10% apart); a rollout
# backtest fits the smaller sizes and forecasts the next, so it needs one size more than a fit
FIT_MIN_SIZES = 3
FIT_MIN_DOF = 1
FIT_RATIO_TOL = 0.10
FIT_PARAMS = {"chinchilla": 5, "ratio": 3}
# the (N, D) form with the fewest constants (loss_forms' overtrain: Chinchilla with one exponent, 4) fits on 5 runs
# at >= 2 ratios, where N and D each span >= 1.5x (loss_forms.MIN_SPREAD): a 5-point isoFLOP budget has a law
FIT_ND_PARAMS = 4
FIT_MIN_SPREAD = 1.5
ROLLOUT_MIN_SIZES = FIT_MIN_SIZES + 1
# how the fit groups runs (ladder.reports.fits.runs.SIZE_TOL, loss_forms.LEVEL_TOL): sizes within 5% are one size,
# runs within 10% of each other's 6ND one compute level
FIT_SIZE_TOL = 0.05
FIT_LEVEL_TOL = 0.10


def data_requirements(study: StudySpec) -> list[str]:
    """What data preparation will refuse later, said now: a vocabulary a byte-level BPE cannot have, a corpus cap
    too small to hold the validation set."""
    from ladder.model.data.tokenizer import MIN_VOCAB_SIZE, SPECIAL_TOKENS

    problems = []
    d, vocab = study.data, study.model.vocab_size
    if d.tokenizer.strip() == "train" and vocab < MIN_VOCAB_SIZE:
        problems.append(
            f"model.vocab_size = {vocab}: data.tokenizer 'train' trains a byte-level BPE, which needs at "
            f"least {MIN_VOCAB_SIZE} ids (256 bytes + {len(SPECIAL_TOKENS)} special tokens + 1 merge)"
        )
    problems += _tokenizer_problems(d.tokenizer) or _local_tokenizer_problems(d.tokenizer, vocab)
    if d.max_bytes is not None:
        need = d.validation_tokens / d.validation_fraction  # a token is at least one byte
        if d.max_bytes < need:
            problems.append(
                f"data.max_bytes = {format_count(d.max_bytes)}: the validation split (data.validation_fraction "
                f"{d.validation_fraction:g} of the documents) must hold data.validation_tokens {d.validation_tokens:,} "
                f"tokens of at least one byte each, so the corpus needs at least {format_count(need)} bytes; raise "
                "data.max_bytes, or lower data.validation_tokens"
            )
    elif d.corpus.strip() == "embedded":
        from ladder.model.data.embedded import EMBEDDED_DEFAULT_MAX_BYTES

        # the embedded corpus reads at most 64 MB of sources unless data.max_bytes says more: a validation set
        # beyond its split was refused by data preparation, after the plan (50M tokens: 84 s of tokenizing first)
        most = d.validation_fraction * EMBEDDED_DEFAULT_MAX_BYTES
        if d.validation_tokens > most:
            problems.append(
                f"data.validation_tokens = {d.validation_tokens:,}: the embedded corpus reads at most "
                f"{format_count(EMBEDDED_DEFAULT_MAX_BYTES)} bytes (without data.max_bytes), so its validation split "
                f"(data.validation_fraction {d.validation_fraction:g} of the documents) holds at most "
                f"{format_count(most)} tokens of at least one byte each; lower data.validation_tokens, or raise "
                "data.validation_fraction"
            )
    return problems


def _tokenizer_problems(tokenizer: str) -> list[str]:
    """A data.tokenizer that data preparation will not find, said at validate time: blank, or a local path (it
    starts with /, ., ~ or ends in .json) that is not there or holds no tokenizer.json; a hub id is left to the
    hub. `validate` passed '/nonexistent' and '' before."""
    from ladder.layout import expand_user
    from ladder.model.data.tokenizer import TOKENIZER_FILE

    allowed = "'train', a local tokenizer folder or tokenizer.json, or a hub id"
    if tokenizer == "train":
        return []
    if not tokenizer.strip() or tokenizer.strip() == "train":  # " train " would be read as a path or hub id
        return [f"data.tokenizer = {tokenizer!r}: give {allowed}"]
    path = expand_user(tokenizer, "data.tokenizer")
    local = tokenizer.startswith(("/", ".", "~")) or tokenizer.endswith(".json") or path.exists()
    if not local:
        return []
    if not path.exists():
        return [f"data.tokenizer = {tokenizer!r}: no such tokenizer folder or tokenizer.json (give {allowed})"]
    if not (path.is_file() or (path / TOKENIZER_FILE).is_file()):
        return [f"data.tokenizer = {tokenizer!r}: the folder holds no {TOKENIZER_FILE}"]
    return []


def _local_tokenizer_problems(tokenizer: str, vocab: int) -> list[str]:
    """What data preparation refuses of a local tokenizer that exists, said at validate time: one it cannot load,
    more ids than model.vocab_size (ids beyond the embedding), no end-of-sequence token (documents could not be
    separated). `validate` passed a 400-id tokenizer for a vocab_size of 320 before."""
    from ladder.layout import expand_user
    from ladder.model.data.tokenizer import load_tokenizer, special_ids

    if tokenizer == "train":
        return []
    path = expand_user(tokenizer, "data.tokenizer")
    if not path.exists():  # a hub id: left to the hub
        return []
    try:
        tok = load_tokenizer(path)
        special_ids(tok)
    except DataError as exc:
        return [f"data.tokenizer = {tokenizer!r}: {exc}"]
    if tok.get_vocab_size() > vocab:
        return [
            f"data.tokenizer = {tokenizer!r} has {tok.get_vocab_size():,} ids, more than model.vocab_size = "
            f"{vocab:,}: token ids would fall outside the embedding; raise model.vocab_size to at least "
            f"{tok.get_vocab_size():,} or use a smaller tokenizer"
        ]
    return []


def _ratio_groups(ratios: list[float]) -> int:
    groups, start = 0, -math.inf
    for r in sorted(math.log(x) for x in ratios):
        if r - start > math.log1p(FIT_RATIO_TOL):
            groups, start = groups + 1, r
    return groups


def _group_labels(values: list[float], rtol: float) -> list[int]:
    """The fit's grouping (ladder.reports.fits.runs.group_labels): values within ``rtol`` of the smallest of their
    group share a label, 0 for the smallest group, ascending."""
    labels = [0] * len(values)
    label, start = -1, -math.inf
    for i in sorted(range(len(values)), key=lambda j: math.log(values[j])):
        if math.log(values[i]) - start > math.log1p(rtol):
            label, start = label + 1, math.log(values[i])
        labels[i] = label
    return labels


def _rollout_prefixes(runs: list[RunSpec]) -> tuple[str, list[list[RunSpec]]]:
    """The runs each prefix of the fit's rollout backtest is fitted on (ladder.reports.fits.loss.loss_rollout:
    prefix_axis, prefix_levels), and the axis it grows by: by compute level (6ND within 10%) when sizes share
    compute levels (a median of >= 2 sizes per level: budgets of neighbouring sizes line up, or an isoFLOP
    ladder), else by size. A prefix holds every group below a held-out one and >= 3 sizes."""
    params = [float(r.params) for r in runs]
    sizes = _group_labels(params, FIT_SIZE_TOL)
    levels = _group_labels([6.0 * n * r.tokens for n, r in zip(params, runs)], FIT_LEVEL_TOL)
    per_level = sorted(len({s for s, lv in zip(sizes, levels) if lv == k}) for k in set(levels))
    mid = len(per_level) // 2
    median = per_level[mid] if len(per_level) % 2 else (per_level[mid - 1] + per_level[mid]) / 2
    axis, groups = ("compute", levels) if median >= 2 else ("size", sizes)
    prefixes = []
    for k in range(2, max(groups, default=-1) + 1):
        prefix = [r for r, g in zip(runs, groups) if g < k]
        if len({s for s, g in zip(sizes, groups) if g < k}) >= FIT_MIN_SIZES:
            prefixes.append(prefix)
    return axis, prefixes


def _law_fits(runs: list[RunSpec]) -> bool:
    """Whether some loss-law form can be fitted on these runs (of one variant): >= 3 sizes and either an (N, D)
    law (>= 2 ratios, >= 5 runs: the overtrain form's 4 constants + 1; N and D each spanning >= 1.5x) or an L(C)
    form (>= 4 runs at one ratio)."""
    ratios = [r.tokens / r.params for r in runs]
    if len({r.params for r in runs}) < FIT_MIN_SIZES:
        return False
    spread = all(max(v) >= FIT_MIN_SPREAD * min(v) for v in ([r.params for r in runs], [r.tokens for r in runs]))
    chinchilla = _ratio_groups(ratios) >= 2 and spread and len(runs) >= FIT_ND_PARAMS + FIT_MIN_DOF
    at_ratio = max(
        (sum(1 for x in ratios if abs(math.log(x / y)) <= math.log1p(FIT_RATIO_TOL)) for y in ratios), default=0
    )
    return chinchilla or at_ratio >= FIT_PARAMS["ratio"] + FIT_MIN_DOF


def fit_requirements(study: StudySpec, runs: list[RunSpec]) -> tuple[list[str], list[str]]:
    """(what `ladder fit` will refuse, what it can use only partly) of a planned ladder, per variant, with the
    whole requirement said at once: runs at >= 3 sizes; either >= 2 tokens/param ratios and >= 5 runs (the
    overtrain law's 4 constants + 1; Chinchilla's 5 need 6), or >= 4 runs at the hero's ratio (the L(C) forms' 3 +
    1); a rollout backtest needs such a fit on the runs below a held-out size or compute level."""
    rungs = [r for r in runs if r.role == "rung"]
    # the fit's law variants are tied and untied (ladder.reports.fits.study.table.VARIANT_AXES); runs that differ
    # only in a tuning axis (LR, batch, aspect ratio) are one rung of its law, seed replicates are runs of their own
    tie_varies = len({r.shape.tied for r in rungs}) > 1
    by_variant: dict[str, list[RunSpec]] = {}
    seen: set = set()
    for r in rungs:
        variant = ("tied" if r.shape.tied else "untied") if tie_varies else "all"
        key = (variant, r.axes.get("size", r.params), f"{r.tokens / r.params:.3g}", r.seed)
        if key not in seen:
            seen.add(key)
            by_variant.setdefault(variant, []).append(r)
    refuse, partly = [], []
    need = (
        f"the fit needs runs at >= {FIT_MIN_SIZES} sizes per variant, and either >= 2 tokens/param ratios "
        f"({'the sizes of an isoFLOP budget' if study.ladder.mode == 'isoflop' else 'ladder.budgets'}) with >= {FIT_ND_PARAMS + FIT_MIN_DOF} runs for its (N, D) laws (the Chinchilla law's "
        f"{FIT_PARAMS['chinchilla']} constants need {FIT_PARAMS['chinchilla'] + FIT_MIN_DOF}), or >= "
        f"{FIT_PARAMS['ratio'] + FIT_MIN_DOF} runs at one ratio for its L(C) forms"
    )
    cannot = {}
    for variant, rs in by_variant.items():
        sizes = sorted({r.params for r in rs})
        n_ratios = _ratio_groups([r.tokens / r.params for r in rs])
        label = f"variant {variant!r}" if len(by_variant) > 1 else "the ladder"
        have = (
            f"{label} has {len(rs)} run{'s' if len(rs) != 1 else ''} at {len(sizes)} size{'s' if len(sizes) != 1 else ''} "
            f"({', '.join(format_count(s) for s in sizes)}) and "
            f"{n_ratios} tokens/param ratio{'s' if n_ratios != 1 else ''}"
        )
        if not _law_fits(rs):
            cannot[variant] = have
            continue
        # the fit's own prefixes: 3 sizes x budgets 4x apart (a wsd trunk's branches) share compute levels and
        # have a rollout, which the plan denied by counting sizes alone
        axis, prefixes = _rollout_prefixes(rs)
        if not prefixes and axis == "size":
            partly.append(
                f"{have}: no rollout backtest, which needs >= {ROLLOUT_MIN_SIZES} sizes (fit the smaller, "
                "forecast the larger), so the forecast's interval is not calibrated; add a size"
            )
        elif not prefixes:
            partly.append(
                f"{have}: no rollout backtest, which fits the cheapest compute levels (6ND within "
                f"{100 * FIT_LEVEL_TOL:.0f}%) and forecasts the dearer ones, and needs runs at >= {FIT_MIN_SIZES} "
                "sizes below the dearest level, so the forecast's interval is not calibrated; add a size"
            )
        elif not any(_law_fits(p) for p in prefixes):
            # the rollout's largest prefix leaves out the largest size: 4 sizes at one ratio keep 3 runs there,
            # and every law form needs 4 (fit then said "no rollout forecasts" of a ladder the plan let pass)
            below = "sizes below the largest" if axis == "size" else "compute levels below the dearest"
            partly.append(
                f"{have}: no rollout backtest: fitted on the {below} ({len(prefixes[-1])} runs), no law "
                f"form can be fitted ({need.removeprefix('the fit needs ')}), so the forecast's interval is "
                "not calibrated; add a size or a budget"
            )
    ab = study.ablations
    sweeps = [
        name
        for name in ("lr", "lr_multipliers", "batch_tokens", "batch_multipliers", "aspect_ratio", "tie_embeddings")
        if len(getattr(ab, name) or []) > 1
    ]
    if cannot and len(cannot) == len(by_variant) and not sweeps:
        remedy = (
            "add sizes per budget (ladder.isoflop_points or isoflop_sizes) or budgets (ladder.compute_budgets)"
            if study.ladder.mode == "isoflop"
            else "add sizes (ladder.sizes) or budgets (ladder.budgets)"
        )
        refuse.append(f"{need}: {'; '.join(cannot.values())}; {remedy}")
    elif cannot:
        what = (
            "those variants get no loss law"
            if len(cannot) < len(by_variant)
            else f"no loss law and no hero forecast, only the ablations' comparisons ({', '.join(sweeps)})"
        )
        partly.append(f"{need}: {'; '.join(cannot.values())}: {what}")
    return refuse, partly


# ---- what the ablation fits need ------------------------------------------------------------------------------

# the ablation fits' thresholds (a test checks that they agree): a rung's optimum in ln LR, ln batch or ln aspect
# ratio is a parabola through >= 3 values (ladder.reports.fits.hparams, ablations.depth_width); a law or trend of
# that optimum across scale needs it at >= 2 sizes (hparams.optimum_law, ablations.trend); an IsoFLOP fit needs >=
# 2 compute budgets of >= 3 model sizes each (isoflop.isoflop_fit)
SWEEP_MIN_VALUES = 3
LAW_MIN_SIZES = 2
ISOFLOP_MIN_SIZES = 3
ISOFLOP_MIN_BUDGETS = 2
TUNING_AXES = ("lr", "lr_multipliers", "batch_tokens", "batch_multipliers", "aspect_ratio")  # study.table's
# the task forecasts (ladder.reports.fits.tasks.task_forecast.MIN_RUNS): task loss vs compute needs 4 runs, accuracy
# vs task loss (a sigmoid of 4 constants) 5
TASK_MIN_RUNS = {"compute": 4, "sigmoid": 5}


def _rung_key(r: RunSpec) -> tuple:
    """The fit's rung of a run (ladder.reports.fits.study.table.rung_variant_keys): its axes but the tuning ones,
    the tie variant and the seed."""
    return tuple(sorted((k, str(v)) for k, v in r.axes.items() if k not in (*TUNING_AXES, "tie_embeddings", "seed")))


def _rung_name(r: RunSpec) -> str:
    name = str(r.axes.get("size", format_count(r.params)))
    if "multiplier" in r.axes:
        name += f" {float(r.axes['multiplier']):g}x"
    if "budget" in r.axes:
        name += f" at {format_flops(float(r.axes['budget']))} FLOPs"
    return name


def _values_per_rung(rungs: list[RunSpec], value, within=("tie",)) -> dict[tuple, tuple[str, float, int]]:
    """Per rung: (its name, its size, how many distinct ``value(run)`` one subset of it holds, the most of any): a
    subset is one tie variant (the fits read one variant) and, with ``"aspect"`` in ``within``, one aspect ratio
    (the LR and batch fits keep the rung's most common shape)."""
    subsets: dict[tuple, set] = {}
    names: dict[tuple, tuple[str, float]] = {}
    for r in rungs:
        key = _rung_key(r)
        names.setdefault(key, (_rung_name(r), float(r.params)))
        sub = (key, r.shape.tied, r.axes.get("aspect_ratio") if "aspect" in within else None)
        subsets.setdefault(sub, set()).add(value(r))
    out: dict[tuple, tuple[str, float, int]] = {}
    for (key, *_), values in subsets.items():
        name, params = names[key]
        out[key] = (name, params, max(len(values), out.get(key, ("", 0.0, 0))[2]))
    return out


def _swept(study: StudySpec, names: tuple[str, ...]) -> list[str]:
    ab = study.ablations
    return [
        f"ablations.{n} [{', '.join(f'{v:g}' for v in getattr(ab, n))}]" for n in names if len(getattr(ab, n) or []) > 1
    ]


def _sizes_of(found: dict[tuple, tuple[str, float, int]], keys) -> list[str]:
    """The distinct sizes (within 5%, as the fit groups them) among ``keys``' rungs, by name."""
    by_size: dict[int, str] = {}
    items = [found[k] for k in keys]
    labels = _group_labels([p for _, p, _ in items], FIT_SIZE_TOL) if items else []
    for (name, _, _), label in zip(items, labels):
        by_size.setdefault(label, name)
    return list(by_size.values())


def ablation_requirements(study: StudySpec, runs: list[RunSpec]) -> list[str]:
    """What the ablation fits of `ladder fit` will leave out for a reason the plan already holds, said now (plan
    warnings): an LR or batch sweep without 3 values at a rung (after rounding batches to whole sequences) or at
    fewer than 2 sizes, a batch sweep without an LR sweep to re-tune at each batch, a depth-vs-width sweep whose
    aspect ratios build fewer than 3 shapes at a rung, an IsoFLOP ladder with fewer than 2 budgets of 3 sizes, and
    a hero.compute that one tokens/param ratio leaves the fit no allocation to choose for."""
    rungs = [r for r in runs if r.role == "rung"]
    if not rungs:
        return []
    out = []
    lr_axes = _swept(study, ("lr", "lr_multipliers"))
    batch_axes = _swept(study, ("batch_tokens", "batch_multipliers"))
    lr = _values_per_rung(rungs, lambda r: float(r.lr), ("tie", "aspect"))
    lr_ok = [k for k, (_, _, n) in lr.items() if n >= SWEEP_MIN_VALUES]
    most = lambda found: max(n for _, _, n in found.values())  # noqa: E731
    if lr_axes:
        if not lr_ok:
            out.append(
                f"{', '.join(lr_axes)}: no LR optimum and no LR law: the fit finds a rung's optimum as a parabola "
                f"in ln LR, which needs >= {SWEEP_MIN_VALUES} learning rates at a rung (this plan's rungs have at "
                f"most {most(lr)}); add a value"
            )
        elif len(_sizes_of(lr, lr_ok)) < LAW_MIN_SIZES:
            out.append(
                f"{', '.join(lr_axes)}: no LR law across scale, which needs >= {SWEEP_MIN_VALUES} learning rates at "
                f">= {LAW_MIN_SIZES} sizes (only {_sizes_of(lr, lr_ok)[0]} has them): its optimum transfers to "
                "the hero by the recipe's rule"
            )
    if batch_axes:
        t = study.training
        batch = _values_per_rung(rungs, lambda r: int(r.batch_tokens), ("tie", "aspect"))
        b_ok = [k for k, (_, _, n) in batch.items() if n >= SWEEP_MIN_VALUES]
        both = [k for k in b_ok if k in lr_ok]
        rounded = (
            f"batches are whole sequences of data.seq_len {study.data.seq_len}, at least batch_min_sequences "
            f"{t.batch_min_sequences}"
            + (f", at most batch_max_tokens {t.batch_max_tokens:,}" if t.batch_max_tokens else "")
        )
        if not b_ok:
            out.append(
                f"{', '.join(batch_axes)}: no batch optimum and no batch law: the fit needs >= {SWEEP_MIN_VALUES} "
                f"distinct batch sizes at a rung (this plan's rungs have at most {most(batch)}: {rounded}); "
                # [1000, 1024, 1050] tokens are 3 values that all round to 16 sequences: adding one would not help
                + (
                    "spread the values"
                    if max(len(getattr(study.ablations, n) or []) for n in ("batch_tokens", "batch_multipliers"))
                    >= SWEEP_MIN_VALUES
                    else "add a value"
                )
            )
        elif not both:
            out.append(
                f"{', '.join(batch_axes)}: no batch optimum and no batch law: the fit finds the best batch with the "
                f"LR re-tuned at each batch, so a rung needs >= {SWEEP_MIN_VALUES} learning rates too (sweep "
                "ablations.lr_multipliers or ablations.lr as well)"
            )
        elif len(_sizes_of(batch, both)) < LAW_MIN_SIZES:
            out.append(
                f"{', '.join(batch_axes)}: no batch law across scale, which needs >= {SWEEP_MIN_VALUES} distinct "
                f"batch sizes (and learning rates) at >= {LAW_MIN_SIZES} sizes: only {_sizes_of(batch, both)[0]} has "
                f"them ({rounded}); the batch transfers to the hero by the recipe's rule"
            )
    aspects = _swept(study, ("aspect_ratio",))
    if aspects:
        shapes = _values_per_rung(rungs, lambda r: round(r.shape.d_model / r.shape.n_layers, 6))
        a_ok = [k for k, (_, _, n) in shapes.items() if n >= SWEEP_MIN_VALUES]
        if not a_ok:
            out.append(
                f"{aspects[0]}: no depth-vs-width fit: it needs >= {SWEEP_MIN_VALUES} shapes (aspect ratios) at a "
                f"rung, and this plan's rungs have at most {most(shapes)} (whole heads and layers build one shape "
                "of nearby aspect ratios); add a value, or spread them"
            )
        elif len(_sizes_of(shapes, a_ok)) < LAW_MIN_SIZES:
            out.append(
                f"{aspects[0]}: no depth-vs-width trend to the hero, which needs >= {SWEEP_MIN_VALUES} shapes at >= "
                f"{LAW_MIN_SIZES} sizes: only {_sizes_of(shapes, a_ok)[0]} has them"
                # a ladder of one size has no others to blame
                + (
                    " (whole heads and layers build one shape of nearby aspect ratios at the others)"
                    if len(_sizes_of(shapes, list(shapes))) > 1
                    else ""
                )
            )
    if study.evals is not None and len(rungs) < TASK_MIN_RUNS["sigmoid"]:
        # the task forecasts read every finished run with lm-eval results
        out.append(
            f"evals: the task forecasts fit each task's accuracy against its loss with a sigmoid of 4 constants, "
            f"which needs >= {TASK_MIN_RUNS['sigmoid']} runs (and its loss against compute >= "
            f"{TASK_MIN_RUNS['compute']}), and this plan has {len(rungs)}; add a size or a budget"
        )
    lad = study.ladder
    if lad.mode == "isoflop":
        per_budget: dict[tuple, set] = {}
        for r in rungs:
            per_budget.setdefault((r.axes.get("budget"), r.shape.tied), set()).add(float(r.params))
        full: dict[bool, set] = {}
        for (budget, tied), params in per_budget.items():
            if len(set(_group_labels(sorted(params), FIT_SIZE_TOL))) >= ISOFLOP_MIN_SIZES:
                full.setdefault(tied, set()).add(budget)
        n = max((len(b) for b in full.values()), default=0)
        if n < ISOFLOP_MIN_BUDGETS:
            out.append(
                f"ladder.compute_budgets [{', '.join(format_flops(b) for b in lad.compute_budgets or [])}]: no IsoFLOP "
                f"fit (each budget's optimal size and their law): it needs >= {ISOFLOP_MIN_BUDGETS} compute budgets "
                f"with >= {ISOFLOP_MIN_SIZES} model sizes each, and this plan has {n}; add a budget"
            )
    elif study.hero.compute is not None and _ratio_groups([r.tokens / r.params for r in rungs]) < 2:
        out.append(
            f"hero.compute: every run has one tokens/param ratio, so N and D move together and the fit cannot "
            f"choose the hero's compute-optimal split: it splits hero.compute by ladder.tokens_per_param "
            f"{lad.tokens_per_param:g}, as the plan does; give ladder.budgets 2 or more values to let the fit choose"
        )
    return out


def hero_requirements(study: StudySpec, runs: list[RunSpec], hero_ratio: float | None) -> list[str]:
    """A hero `ladder fit` will give no forecast, said now (a plan warning): every run of a variant at one
    tokens/param ratio (the law forms that read N and D apart need two) and the hero at another, more than 10% away.
    With one ratio the fit's laws are the L(C) forms, which forecast only at their runs' ratio ("hero forecast
    unavailable ... frontier: only at 40 tokens/param"): ladder.budgets [2] trains every run at 40 tokens/param, and
    the hero, at ladder.tokens_per_param 20, had no forecast."""
    rungs = [r for r in runs if r.role == "rung"]
    out = []
    ties = {r.shape.tied for r in rungs}
    if study.hero.tied is not None and ties == {not study.hero.tied}:
        # the fit forecast the untied hero with the tied runs' law, and neither fit nor report said so
        word = {True: "tied", False: "untied"}
        out.append(
            f"hero.tied = {str(study.hero.tied).lower()}, but every run of the ladder is {word[not study.hero.tied]}"
            f" (model.tie_embeddings {str(study.model.tie_embeddings).lower()}): `ladder fit` forecasts the "
            f"{word[study.hero.tied]} hero with the {word[not study.hero.tied]} runs' law, and no run measures what "
            "the change does; add ablations.tie_embeddings [true, false] to fit both, or drop hero.tied"
        )
    if not rungs or not hero_ratio or hero_ratio <= 0:
        return out
    tie_varies = len(ties) > 1
    by_variant: dict[str, list[float]] = {}
    for r in rungs:
        by_variant.setdefault(("tied" if r.shape.tied else "untied") if tie_varies else "", []).append(
            r.tokens / r.params
        )
    for variant, ratios in by_variant.items():
        near = any(abs(math.log(x / hero_ratio)) <= math.log1p(FIT_RATIO_TOL) for x in ratios)
        if _ratio_groups(ratios) >= 2 or near:
            continue
        at = sorted(ratios)[len(ratios) // 2]
        lad = study.ladder
        why = f"ladder.tokens_per_param {lad.tokens_per_param:g}" + (
            f" x ladder.budgets [{', '.join(plain_number(b) for b in lad.budgets)}]" if lad.budgets != [1.0] else ""
        )
        hero = "hero.tokens / hero.params" if study.hero.tokens else "the hero's, at ladder.tokens_per_param"
        out.append(
            f"{f'variant {variant!r}: every run' if variant else 'every run'} trains at {at:.3g} tokens/param ({why}) "
            f"and the hero at {hero_ratio:.3g} ({hero}): on one ratio the fit's laws forecast only at that ratio, so "
            "`ladder fit` will give no hero forecast; give ladder.budgets a second value (the laws in N and D then "
            f"forecast any ratio), or train the hero at {at:.3g} tokens/param"
        )
    return out
