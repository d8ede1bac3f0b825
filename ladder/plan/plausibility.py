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
from typing import Any, get_args

from ladder.errors import DataError, SpecError
from ladder.model.config import RunSpec, format_count, format_multiple, share_of_hero
from ladder.model.hardware import device_memory_bytes
from ladder.model.recipe import rule_batch_tokens
from ladder.model.shape import ModelShape
from ladder.model.sizing import FamilyRules, shape_for_params
from ladder.plan.rung_runs import variant_label
from ladder.studies.spec import StudySpec

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
    if t.micro_batch_tokens < seq:  # planned as one sequence per forward pass, more than the study allowed
        raise SpecError(
            f"training.micro_batch_tokens = {t.micro_batch_tokens}: smaller than one sequence (data.seq_len {seq}); "
            f"a forward pass holds whole sequences: give at least {seq}"
        )
    smallest = t.batch_min_sequences * seq
    if t.batch_max_tokens is not None and t.batch_max_tokens < smallest:
        # the floor won: every batch was planned at the floor, above the cap the study set, and a note said so
        raise SpecError(
            f"training.batch_max_tokens = {t.batch_max_tokens:,}: below training.batch_min_sequences "
            f"{t.batch_min_sequences} x data.seq_len {seq} = {smallest:,} tokens, so no batch can keep both; raise "
            "batch_max_tokens or lower batch_min_sequences"
        )
    cap = t.batch_max_tokens
    given = [("training.batch_tokens", t.batch_tokens)] if t.batch_tokens != "auto" else []
    given += [(f"ablations.batch_tokens[{i}]", b) for i, b in enumerate(study.ablations.batch_tokens or [])]
    for field, b in given if cap is not None else []:  # both set by the study: the cap won, and a note said so
        if round(b / seq) * seq > cap // seq * seq:
            raise SpecError(
                f"{field} = {b:,}: above training.batch_max_tokens {cap:,}, which caps every batch at "
                f"{cap // seq * seq:,} tokens (whole sequences of data.seq_len {seq}); lower the batch or raise "
                "batch_max_tokens"
            )
    _check_devices(study)
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


def _check_devices(study: StudySpec) -> None:
    """GPUs named by the executor the study runs on, with ``executor.hardware`` left at ``cpu``: the runs would be
    planned in fp32 (what ``precision: auto`` gives on a CPU), with CPU memory and time estimates, and trained on
    the GPUs; a precision is part of a run's id, so setting the hardware later plans every run anew."""
    ex = study.executor
    if ex.hardware != "cpu":
        return
    if ex.kind == "local" and ex.local.gpus:
        field = f"executor.local.gpus = {list(ex.local.gpus)}"
    elif ex.kind == "slurm" and ex.slurm.gpus_per_task > 0:
        field = f"executor.slurm.gpus_per_task = {ex.slurm.gpus_per_task}"
    else:
        return
    kinds = [k for k in get_args(type(ex).model_fields["hardware"].annotation) if k != "cpu"]
    raise SpecError(
        f"{field}: the runs train on GPUs, but executor.hardware is 'cpu', which plans them in fp32 with a CPU's "
        f"memory and speed; set executor.hardware to the GPUs' kind ({', '.join(kinds)}), or leave the GPUs out"
    )


# ---- after expansion ----------------------------------------------------------------------------------------


def _smallest(rules: FamilyRules, tied: bool) -> ModelShape:
    return rules.shape(rules.width_step, 1, rules.ffn_multiple, tied)


def _target_fields(study: StudySpec) -> list[tuple[str, int]]:
    lad = study.ladder
    # an extra run's size is a rung's (size 100 was planned as a 664-parameter model, 6.6x it, in silence)
    extra = [(f"ladder.extra_runs[{i}].size", e.size) for i, e in enumerate(lad.extra_runs or []) if e.size]
    if lad.mode == "chinchilla":
        return [(f"ladder.sizes[{i}]", s) for i, s in enumerate(lad.sizes or [])] + extra
    return [(f"ladder.isoflop_sizes[{i}]", s) for i, s in enumerate(lad.isoflop_sizes or [])] + extra


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
            if field.startswith("ladder.extra_runs"):  # another budget or seed of a size: not a rung of its own
                continue
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
        remedy = f"lower {_size_field(study)}"
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
            f"{len(slow)} run(s) are estimated at more than 30 days each on {hw} (up to "
            f"{format_multiple(days, sign='')} days): check {_size_field(study)} and executor.hardware"
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
    fam = study.model
    wide: dict[str, str] = {}
    for r in runs:  # one ffn_multiple above ffn_ratio x ffn_band x d_model: the band cannot hold (ffn 256 at d 24)
        s = r.shape
        if s.ffn_dim > 1.25 * fam.ffn_ratio * fam.ffn_band * s.d_model:  # beyond rounding to a multiple
            where = str(r.axes.get("size", format_count(r.params)))
            wide.setdefault(where, f"{where} ffn_dim {s.ffn_dim} = {s.ffn_dim / s.d_model:.3g}x d_model {s.d_model}")
    if wide:
        notes.append(
            f"model.ffn_multiple {fam.ffn_multiple} is wider than the band sizing keeps ffn_dim in (ffn_ratio "
            f"{fam.ffn_ratio:.3g} x ffn_band {fam.ffn_band:g} = {fam.ffn_ratio * fam.ffn_band:.3g}x d_model) at "
            f"these widths, so their ffn_dim is one multiple: {_listed(wide.values())}; a smaller "
            "model.ffn_multiple keeps their shapes regular"
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


def _changed(section: Any, names: Iterable[str]) -> list[str]:
    """``name = value`` of the fields of ``section`` that hold something other than their default."""
    fields = type(section).model_fields
    return [
        f"{n} = {getattr(section, n)!r}".replace("'", "") for n in names if getattr(section, n) != fields[n].default
    ]


def unused_settings(study: StudySpec) -> list[str]:
    """Fields set away from their default that this study's other choices leave unread (plan warnings): a
    cooldown without a wsd schedule, a final LR with a constant one, a warmup_fraction beside warmup_tokens, the
    LR or batch rule's knobs beside an absolute value, the IsoFLOP grid's knobs where nothing reads them. Each
    was accepted and planned without a word (`cooldown_fraction: 0.3` under cosine). Not refused: a study that
    `ladder studies show` printed holds every field, and a default stays quiet."""
    out = []
    t, sched, lad = study.training, study.training.schedule, study.ladder

    def unused(section: str, names: Iterable[str], obj: Any, why: str) -> None:
        changed = _changed(obj, names)
        if changed:
            fields = ", ".join(f"{section}.{c}" for c in changed)
            out.append(f"{fields} {'is' if len(changed) == 1 else 'are'} not used: {why}")

    if sched.kind != "wsd":
        unused(
            "training.schedule",
            ("cooldown_fraction", "cooldown_shape"),
            sched,
            f"schedule.kind {sched.kind} has no cooldown (only wsd cools down)",
        )
    if sched.kind == "constant":
        unused("training.schedule", ("final_lr_fraction",), sched, "schedule.kind constant keeps the peak LR")
    if sched.warmup_tokens is not None:
        unused("training.schedule", ("warmup_fraction",), sched, "training.schedule.warmup_tokens sets the warmup")
    if t.lr != "auto":
        unused(
            "training",
            ("lr_rule", "lr_scale", "lr_max"),
            t,
            f"training.lr {t.lr:g} is the peak LR itself (the rule's knobs shape lr: auto)",
        )
    if t.batch_tokens != "auto":
        unused(
            "training",
            ("batch_rule", "batch_scale"),
            t,
            f"training.batch_tokens {t.batch_tokens:,} is the batch itself (the rule's knobs shape batch_tokens: auto)",
        )
    if lad.mode == "chinchilla":
        unused(
            "ladder",
            ("isoflop_points", "isoflop_span"),
            lad,
            "mode chinchilla has no IsoFLOP grid (mode: isoflop reads it)",
        )
    elif lad.isoflop_sizes is not None:
        unused("ladder", ("isoflop_points", "isoflop_span"), lad, "ladder.isoflop_sizes gives every budget's sizes")
    return out


def _size_field(study: StudySpec) -> str:
    """The field that sizes the study's runs, for a remedy to name: ladder.sizes, ladder.depths or, in mode
    isoflop, ladder.compute_budgets (a depth ladder was told to "check ladder.sizes", which it has none of)."""
    lad = study.ladder
    if lad.mode == "isoflop":
        return "ladder.compute_budgets"
    return "ladder.depths" if lad.depths is not None else "ladder.sizes"


def corpus_bytes(study: StudySpec) -> tuple[float, str] | None:
    """The most bytes the study's corpus can hold, and what says so: data.max_bytes, the embedded corpus's default
    cap, or the size of an uncompressed local jsonl or .txt corpus; None where nothing bounds it cheaply."""
    d = study.data
    corpus, cap = d.corpus.strip(), d.max_bytes
    said = f"data.max_bytes {format_count(cap)}" if cap else ""
    if corpus == "embedded" and not cap:
        from ladder.model.data.embedded import EMBEDDED_DEFAULT_MAX_BYTES

        cap_said = f"the embedded corpus's cap of {format_count(EMBEDDED_DEFAULT_MAX_BYTES)}"
        return float(EMBEDDED_DEFAULT_MAX_BYTES), cap_said
    if corpus != "embedded" and not corpus.startswith("hf:"):
        from ladder.model.data.corpus import resolve_corpus

        try:
            source = resolve_corpus(corpus, d.text_key)
        except DataError:
            source = None
        names = list(source.files) if source is not None and source.folder is not None else []
        if names and source.kind in ("jsonl", "text") and not any(n.lower().endswith((".gz", ".zst")) for n in names):
            # a JSON line holds its text and more; a .txt file gets one end-of-sequence token more than its bytes
            size = sum((source.folder / n).stat().st_size for n in names) + (len(names) if source.kind == "text" else 0)
            if not cap or size < cap:
                return float(size), f"{corpus} ({format_count(size)} bytes)"
    return (float(cap), said) if cap else None


def corpus_size_problem(study: StudySpec, bound: tuple[float, str] | None) -> str | None:
    """What data preparation refuses of a local corpus too small for its validation set (a token is at least one
    byte, so the split needs validation_tokens / validation_fraction bytes), said at validate time: data.max_bytes
    was checked so, but a 244 KB folder of .txt files passed, and `ladder data prepare` refused it after tokenizing
    ("no document of the corpus fell in the validation split ... the corpus is too small")."""
    d = study.data
    found = bound if d.corpus.strip() != "embedded" else None  # bound: :func:`corpus_bytes`
    if found is None or (d.max_bytes and d.max_bytes <= found[0]):  # data.max_bytes: data_requirements says it
        return None
    size, what = found
    need = d.validation_tokens / d.validation_fraction
    if size >= need:
        return None
    return (
        f"data.corpus = {d.corpus.strip()!r} holds {format_count(size)} bytes: its validation split, "
        f"data.validation_fraction {d.validation_fraction:g} of the documents, would hold about "
        f"{format_count(size * d.validation_fraction)} bytes, fewer than data.validation_tokens "
        f"{d.validation_tokens:,} tokens of at least one byte each take (documents of even size need a corpus of "
        f"about {format_count(need)} bytes); use a bigger corpus, or lower data.validation_tokens (or raise "
        "data.validation_fraction)"
    )


def data_reuse(
    study: StudySpec, runs: list[RunSpec], hero_tokens: float | None, bound: tuple[float, str] | None
) -> list[str]:
    """Runs (or the hero) that train on more tokens than the corpus can hold at all (a byte-level token is at least
    one byte), so they read their training data more than once: trained in silence, while the laws assume fresh
    tokens (a 13 MB corpus fed a run of 40M tokens three passes)."""
    if bound is None:  # bound: :func:`corpus_bytes`
        return []
    most, what = bound
    over = [r for r in runs if r.tokens > most]
    out = []
    if over:
        top = max(r.tokens for r in over)
        out.append(
            f"{len(over)} run(s) train on more tokens than {what} can hold (a token is at least one byte), up to "
            f"{format_count(top)} tokens, {format_multiple(top / most)} that: they read their training data more "
            "than once, and the scaling laws assume fresh tokens; use a larger corpus (or data.max_bytes), or "
            f"a smaller {_size_field(study)}" + (" or ladder.budgets" if study.ladder.mode == "chinchilla" else "")
        )
    if hero_tokens and hero_tokens > most:
        out.append(
            f"the hero trains on {format_count(hero_tokens)} tokens, more than {what} can hold (a token is at least "
            "one byte): it would read its training data more than once, which the forecast does not model; use a "
            "larger corpus (or data.max_bytes)"
        )
    return out


def cost_warning(study: StudySpec, pct_of_hero: float) -> list[str]:
    if math.isfinite(pct_of_hero) and pct_of_hero > 100:
        return [
            f"the ladder costs {' '.join(share_of_hero(pct_of_hero))}: a ladder rehearses a bigger run for a "
            f"small share of its cost (check {_size_field(study)} and hero)"
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
        from ladder.model.data.corpus import resolve_corpus, text_key_problem

        try:
            source = resolve_corpus(corpus, study.data.text_key)
        except DataError as exc:
            raise SpecError(f"data.corpus = {corpus!r}: {exc}") from None
        problem = text_key_problem(source)
        if problem:
            raise SpecError(problem)
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


def hub_warning(study: StudySpec) -> list[str]:
    """An ``hf:`` corpus that this machine may not read (the hub is off) and the data cache does not hold prepared:
    the runs would fail at data preparation, after the plan."""
    from ladder.model.data.corpus import hub_offline
    from ladder.model.data.prepare import is_prepared

    corpus = study.data.corpus.strip()
    if not corpus.startswith("hf:") or not hub_offline() or is_prepared(study.data, study.model.vocab_size):
        return []
    return [
        f"data.corpus {corpus!r} is streamed from the Hugging Face hub, which HF_HUB_OFFLINE/HF_DATASETS_OFFLINE "
        "turns off here, and the data cache does not hold it prepared: the runs would fail at data preparation; run "
        "`ladder data prepare STUDY` where the hub is reachable, with the same LADDER_CACHE, before they start"
    ]
