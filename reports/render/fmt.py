"""How the report writes numbers and short texts: counts, FLOPs, losses, intervals, durations, shapes.

Every formatter takes anything (``None``, NaN, a string from a broken ``fit.json``) and returns :data:`ABSENT`
for what is not a finite number, so a section never raises on a missing value. The figures share
:func:`num`, :func:`ok`, :func:`pos` and :func:`fmt_count`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

ABSENT = "—"
MAX_NOTES = 12


def num(v: Any) -> float:
    """A float, NaN for anything missing or not a number."""
    if v is None or isinstance(v, bool):
        return math.nan
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f if math.isfinite(f) else math.nan


def ok(*vals: Any) -> bool:
    return all(math.isfinite(num(v)) for v in vals)


def pos(*vals: Any) -> bool:
    return all(math.isfinite(num(v)) and num(v) > 0 for v in vals)


def fmt_count(n: Any) -> str:
    """:func:`ladder.model.config.format_count` (4.144K, 82.94K): a run's params and tokens in the digits `ladder
    plan`, `status` and `fit` give them, never 4.14K beside the terminal's 4.144K."""
    from ladder.model.config import format_count

    x = num(n)
    return format_count(x) if math.isfinite(x) else ABSENT


def fmt_flops(v: Any) -> str:
    from ladder.model.config import format_flops

    x = num(v)
    return format_flops(x) if math.isfinite(x) else ABSENT


def fmt_loss(v: Any, digits: int = 4) -> str:
    """A loss to ``digits`` decimals; one too large or too small for them (a degenerate trend's 1.2e+04, an
    interval's 4.6e-56) in the ``digits`` significant figures `ladder fit` prints it in, never 130 digits or 0.0000."""
    x = num(v)
    if not math.isfinite(x):
        return ABSENT
    if x != 0 and (abs(x) >= 1e4 or abs(x) < 0.5 * 10.0**-digits):
        return fmt_sig(x, digits)  # 12,230 and 4.554e-56, as `ladder fit` prints them
    return f"{x:.{digits}f}"


def fmt_sig(x: float, digits: int = 4) -> str:
    """``x`` in ``digits`` significant figures as `ladder fit` prints its constants (reports/summary.py reads it
    here): Python's g, but with commas from 1,000 up to 1e5, where g would write 88,460 as 8.846e+04."""
    text = f"{x:.{digits}g}"
    return f"{float(text):,.0f}" if 1000 <= abs(x) < 1e5 else text


def fmt_g(v: Any, digits: int = 3) -> str:
    x = num(v)
    if not math.isfinite(x):
        return ABSENT
    if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e5):
        return f"{x:.{max(1, digits - 1)}e}"
    return fmt_sig(x, digits)  # 66,960 tokens/param as 67,000, never g's 6.7e+04, below the 1e5 kept for e-notation


def fmt_lr(v: Any) -> str:
    x = num(v)
    if not math.isfinite(x):
        return ABSENT
    return f"{x:.3g}"  # as `ladder fit`, `ladder hero` and `ladder plan` give a learning rate: 0.000312, not 3.12e-04


def fmt_pct(v: Any, digits: int = 2, signed: bool = False) -> str:
    x = num(v)
    if not math.isfinite(x):
        return ABSENT
    return f"{x:+.{digits}f}%" if signed else f"{x:.{digits}f}%"


def share_of_hero(pct: Any) -> tuple[str, str]:
    """:func:`ladder.model.config.share_of_hero`, with a missing or non-finite share shown as absent."""
    from ladder.model.config import share_of_hero as said

    x = num(pct)
    return said(x) if math.isfinite(x) else (ABSENT, "of the hero's compute")


def fmt_times(v: Any) -> str:
    """A multiple (``4,058×``): :func:`ladder.model.config.format_multiple` with the report's sign; absent when
    missing."""
    from ladder.model.config import format_multiple

    x = num(v)
    return format_multiple(x, "×") if math.isfinite(x) else ABSENT


def fmt_weight(v: Any) -> str:
    """A law form's weight in two decimals, as `ladder fit` prints it ("0.50", never "0.5" beside it)."""
    x = num(v)
    return f"{x:.2f}" if math.isfinite(x) else ABSENT


def fmt_int(v: Any) -> str:
    x = num(v)
    return f"{int(round(x)):,}" if math.isfinite(x) else ABSENT


def fmt_ci(ci: Any, f: Callable[[Any], str] = fmt_g, sep: str = " – ") -> str:
    if not isinstance(ci, (list, tuple)) or len(ci) < 2:
        return ABSENT
    lo, hi = ci[0], ci[1]
    if lo is None and hi is None:
        return "unbounded"
    return f"{f(lo) if lo is not None else '−∞'}{sep}{f(hi) if hi is not None else '+∞'}"


def fmt_bool(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ABSENT
    return "yes" if bool(v) else "no"


def fmt_s(v: Any) -> str:
    x = num(v)
    if not math.isfinite(x):
        return ABSENT
    if x < 120:
        return f"{x:.0f} s"
    if x < 7200:
        return f"{x / 60:.1f} min"
    return f"{x / 3600:.1f} h"


def plural(n: Any, word: str) -> str:
    k = int(num(n)) if ok(n) else 0
    return f"{k} {word}" + ("" if k == 1 else "s")


def cap(items: list[str], n: int = MAX_NOTES) -> list[str]:
    """At most ``n`` notes (those that say the same merged: :func:`merge_repeats`), and a last line saying how many
    were left out."""
    items = merge_repeats(items)
    return items[:n] + ([f"… and {len(items) - n} more"] if len(items) > n else [])


def merge_repeats(items: list[str]) -> list[str]:
    """Notes that say the same thing once: an exact repeat is dropped, and notes that say the same after their
    label ("law form A not fitted: why", "law form B not fitted: why") become one ("law form A, B not fitted:
    why"), in the order of their first appearance."""
    groups: dict[str, list[str | None]] = {}
    for item in items:
        label, sep, rest = item.partition(": ")
        key, label = (rest, label) if sep and rest and label else (item, None)
        labels = groups.setdefault(key, [])
        if label not in labels:
            labels.append(label)
    out = []
    for rest, labels in groups.items():
        named = [x for x in labels if x is not None]
        if None in labels:
            out.append(rest)
        if named:
            out.append(f"{_join_labels(named)}: {rest}")
    return out


def _join_labels(labels: list[str]) -> str:
    """Labels joined by commas, their words in common said once ("law form A", "law form B" -> "law form A, B")."""
    words = [x.split(" ") for x in labels]
    if len(labels) == 1 or len({len(w) for w in words}) > 1:
        return ", ".join(labels)
    head = 0
    while all(len(w) > head + 1 for w in words) and len({tuple(w[: head + 1]) for w in words}) == 1:
        head += 1
    tail = 0
    while all(len(w) > head + tail + 1 for w in words) and len({tuple(w[len(w) - tail - 1 :]) for w in words}) == 1:
        tail += 1
    middles = ", ".join(" ".join(w[head : len(w) - tail]) for w in words)
    return " ".join([*words[0][:head], middles, *words[0][len(words[0]) - tail :]])


def clip(s: Any, n: int = 400) -> str:
    s = "" if s is None else str(s)
    return s if len(s) <= n else s[: n - 1] + "…"


def slug(s: Any) -> str:
    """A string as an HTML id or class fragment (``status-no-minimum``, ``fig-task-hellaswag``)."""
    return re.sub(r"[^a-z0-9-]+", "-", str(s).lower()).strip("-") or "x"


def status_cell(status: Any) -> tuple[str, str]:
    """A fit status (``ok``, ``edge``, ``no_minimum``, ``skipped``) as a table cell with its CSS class."""
    st = str(status or "")
    label = {"ok": "ok", "edge": "edge", "no_minimum": "no minimum", "skipped": "skipped"}.get(st, st)
    return (label or ABSENT, f"status-{slug(st)}" if st else "")


def field_of(r: Any, k: str) -> Any:
    """``r``'s ``k``: a key of a mapping or a results row, an attribute of a typed part of fit.json (a pydantic
    model); None when it has none."""
    get = getattr(r, "get", None)
    if callable(get):
        return get(k)
    return getattr(r, k, None)


def shape_text(r: Any) -> str:
    """``512 × 8 layers, 8 heads / 2 kv`` from a results row, a shape mapping or fit.json's recommendation."""

    def get(k: str) -> Any:
        return field_of(r, k)

    d, L = num(get("d_model")), num(get("n_layers"))
    if not (math.isfinite(d) and math.isfinite(L)):
        return ABSENT
    h, kv = num(get("n_heads")), num(get("n_kv_heads"))
    heads = ""
    if math.isfinite(h):
        heads = f", {int(h)} heads" + (f" / {int(kv)} kv" if math.isfinite(kv) and kv != h else "")
    return f"{int(d)} × {int(L)} layers{heads}"


def schedule_text(sch: Any) -> str:
    """``wsd, warmup 10%, cooldown 20% (1-sqrt), final LR 0% of peak`` from fit.json's recommended schedule (or a
    mapping of the same keys)."""
    if isinstance(sch, Mapping) or hasattr(type(sch), "model_fields"):
        kind = field_of(sch, "kind") or ""
        parts = [str(kind)]
        if field_of(sch, "warmup_fraction") is not None:
            parts.append(f"warmup {100 * num(field_of(sch, 'warmup_fraction')):.0f}%")
        if kind == "wsd" and field_of(sch, "cooldown_fraction") is not None:
            parts.append(
                f"cooldown {100 * num(field_of(sch, 'cooldown_fraction')):.0f}% ({field_of(sch, 'cooldown_shape') or ''})"
            )
        if field_of(sch, "final_lr_fraction") is not None:
            parts.append(f"final LR {100 * num(field_of(sch, 'final_lr_fraction')):.0f}% of peak")
        return ", ".join(p for p in parts if p)
    return str(sch) if sch else ABSENT


def fmt_size(n: Any) -> str:
    """A parameter or token count as the CLI writes it: 397.7K, 7.999M (4 significant digits, no trailing zeros)."""
    from ladder.model.config import format_count

    x = num(n)
    return format_count(x) if math.isfinite(x) and x >= 0 else ABSENT


def fmt_point(label: Any, params: Any = None, tokens: Any = None) -> str:
    """A forecast point for a person: ``hero``, or a ``--predict`` point as "397.7K params × 7.999M tokens" (its
    label, ``397680:7999488``, is the machine's spelling). ``params`` and ``tokens`` win over the label's."""
    text = "" if label is None else str(label)
    if text == "hero" and params is None:
        return text
    n, d = num(params), num(tokens)
    if not (math.isfinite(n) and math.isfinite(d)):
        head, sep, tail = text.partition(":")
        if sep:
            n, d = num(_parse_number(head)), num(_parse_number(tail))
    if math.isfinite(n) and math.isfinite(d):
        return f"{fmt_size(n)} params × {fmt_size(d)} tokens"
    return text or ABSENT


def fmt_label(label: Any) -> str:
    """A forecast's label for a table: a ``--predict`` label ``397680:7999488`` as ``397.7K:7.999M``; any other
    label as it is."""
    text = "" if label is None else str(label)
    head, sep, tail = text.partition(":")
    n, d = (_parse_number(head), _parse_number(tail)) if sep else (None, None)
    return f"{fmt_size(n)}:{fmt_size(d)}" if n is not None and d is not None else text


def _parse_number(text: str) -> float | None:
    from ladder.model.config import read_count

    value = read_count(text.strip())
    return None if value is None else float(value)
