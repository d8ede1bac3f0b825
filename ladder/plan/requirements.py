"""What the later stages need of a planned ladder, said by `studies validate` and `plan` before anything trains:
what data preparation will refuse (a vocabulary or tokenizer it cannot use, a validation set the corpus cannot
hold), what `ladder fit` will refuse or can use only partly (the loss-law forms' sizes, ratios and runs per
variant, a rollout backtest, the ablation and hyperparameter sweeps, the task forecasts) and what the hero asks
of the ladder (a ratio, a tie or a size it never trains). The thresholds are copies of the fit's own, and tests
check that they agree.

The schema and the shapes are checked before this, in :mod:`ladder.plan.plausibility`.
"""

from __future__ import annotations

import math

from ladder.errors import DataError
from ladder.model.config import RunSpec, format_count, format_flops
from ladder.studies.spec import StudySpec, plain_number

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
    # a batch variant trains whole steps, so its tokens differ by a step (4K at bs x0.5: 20.74K, at bs x2:
    # 20.61K); ratios are grouped as the fit groups them, not by their digits (a 3-rung sweep was counted as 5 runs)
    ratio_group = _group_labels([r.tokens / r.params for r in rungs], FIT_RATIO_TOL)
    for r, ratio in zip(rungs, ratio_group):
        variant = ("tied" if r.shape.tied else "untied") if tie_varies else "all"
        key = (variant, r.axes.get("size", r.params), ratio, r.seed)
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
        where = f"{len(sizes)} size{'s' if len(sizes) != 1 else ''} ({', '.join(format_count(s) for s in sizes)})"
        if study.ladder.depths is not None and len(study.ablations.aspect_ratio or []) > 1:
            # a depth's aspect ratios are models of other sizes, and the fit keeps the best of each: the sizes of
            # whichever aspect ratio came first ("3 sizes (6.736K, 20.9K, 47.39K)", the narrowest) were no fact
            depths = sorted({str(r.axes.get("size")) for r in rs}, key=lambda d: int(d[1:]) if d[1:].isdigit() else 0)
            where = f"{len(depths)} depths ({', '.join(depths)}; the fit keeps each depth's best aspect ratio)"
        have = (
            f"{label} has {len(rs)} run{'s' if len(rs) != 1 else ''} at {where} and "
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


def _short_rungs(found: dict[tuple, tuple[str, float, int]], ok: list[tuple]) -> str:
    """The rungs of ``found`` outside ``ok`` (too few values for an optimum), by name ("4K" or "4K, 8K"); ''."""
    return ", ".join(name for key, (name, _, _) in found.items() if key not in ok)


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
        elif short := _short_rungs(lr, lr_ok):
            out.append(
                f"{', '.join(lr_axes)}: no LR optimum at {short}, which {'has' if ',' not in short else 'have'} "
                f"fewer than {SWEEP_MIN_VALUES} distinct learning rates; the LR law uses the other sizes"
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
        elif short := _short_rungs(batch, b_ok):
            # a rung whose batches round together (x0.25 and x0.5 of a tiny rung are both batch_min_sequences)
            # lost its optimum in silence while the plan let the sweep pass
            out.append(
                f"{', '.join(batch_axes)}: no batch optimum at {short}, which {'has' if ',' not in short else 'have'} "
                f"fewer than {SWEEP_MIN_VALUES} distinct batch sizes ({rounded}); the batch law uses the other sizes"
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
