"""What the runs of earlier plans, kept in a study directory but no longer planned, have that this plan's lack:
said when a study file edited while the study grows (another lr, tokens_per_param, vocab_size, corpus, hardware)
gives runs new ids, so that the user knows why runs train again and that the kept ones are not fitted."""

from __future__ import annotations

import json
from typing import Any

from ladder.model.config import NOT_SCIENCE_SUBFIELDS, SCIENCE_FIELDS, RunSpec

SHOWN = 4  # science fields named, at most


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): value}


def _science(spec: RunSpec) -> dict[str, Any]:
    return _flat(spec.model_dump(mode="json", include=set(SCIENCE_FIELDS), exclude=NOT_SCIENCE_SUBFIELDS))


def _said(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str):
        return repr(value)
    return json.dumps(value)


def _label(spec: RunSpec) -> tuple[str, str]:
    return spec.variant, json.dumps(spec.axes, sort_keys=True, default=str)


DERIVED = ("tokens", "steps", "warmup_steps", "batch_tokens", "shape.")  # follow from what a study file says


def _rank(key: str) -> tuple[bool, str]:
    """What the user edited first (lr, data, vocab_size, seed, schedule ...), what follows from it after."""
    derived = key != "shape.vocab_size" and any(key == d or (d.endswith(".") and key.startswith(d)) for d in DERIVED)
    return derived, key


def _counterpart(old: RunSpec, runs: list[RunSpec]) -> RunSpec | None:
    """This plan's run of the same variant, size and seed when the labels differ otherwise (budgets added or
    removed: a budget axis now, or no more), the one of the same tokens first."""
    same = [
        r
        for r in runs
        if r.variant == old.variant and r.seed == old.seed and r.axes.get("size") == old.axes.get("size")
    ]
    return next((r for r in same if r.tokens == old.tokens), same[0] if same else None)


def changes(earlier: list[RunSpec], runs: list[RunSpec]) -> list[str]:
    """How the science of the earlier runs differs from that of this plan's run with the same labels (variant,
    size, budget, seed; else the same variant, size and seed): ``field old -> new`` when every such pair agrees,
    else ``field (by run)``; the fields a study file sets first; and once, a run whose labels this plan no longer
    has."""
    now = {_label(r): r for r in runs}
    pairs: dict[str, set[tuple[str, str]]] = {}
    gone = False
    for old in earlier:
        new = now.get(_label(old)) or _counterpart(old, runs)
        if new is None:
            gone = True
            continue
        a, b = _science(old), _science(new)
        for key in set(a) | set(b):
            if a.get(key) != b.get(key):
                pairs.setdefault(key, set()).add((_said(a.get(key)), _said(b.get(key))))
    found = [
        f"{key} {next(iter(pairs[key]))[0]} -> {next(iter(pairs[key]))[1]}"
        if len(pairs[key]) == 1
        else f"{key} (by run)"
        for key in sorted(pairs, key=_rank)
    ]
    return found + (["a size, budget, seed or variant the study file no longer plans"] if gone else [])


def earlier_words(earlier: list[RunSpec], done: int, runs: list[RunSpec], new: int) -> str:
    """The clause `ladder plan` adds to "N run directories of earlier plans kept": how many trained to the end,
    what differs, and what that means for them and (``new`` runs planned now) for the new runs."""
    found = changes(earlier, runs)
    if not found:
        return ""
    shown = "; ".join(found[:SHOWN]) + (f"; and {len(found) - SHOWN} more" if len(found) > SHOWN else "")
    return f" ({done} of them done; they differ from this plan's runs in {shown}: not collected or fitted" + (
        ", and the new runs train from their start)" if new else ")"
    )
