"""``ladder report``: one self-contained ``report.html`` and a paginated ``report.pdf`` from a study directory.

Reads only the study directory (file names from :mod:`ladder.layout`): ``study.yaml``, ``plan.json``,
``results.parquet``, ``curves.parquet``, ``fit.json`` and, per run, ``spec.json``/``result.json``/``error.json``.
Any of them may be missing or unreadable: the section that needs it says so in one line ("this study has no LR
sweep") and the rest of the report renders.

The content is built once as sections of plain blocks (:class:`Para`, :class:`Table`, :class:`KV`, :class:`Pre`,
:class:`Fig`, :class:`Headline`); ``templates/report.html.j2`` turns them into HTML (jinja2 with autoescape: every
string from the study is escaped) and :mod:`ladder.reports.pdf` lays the same blocks out on A4 pages. Figures are
inline SVG (:mod:`ladder.reports.figures`); the HTML makes no external request and needs no JavaScript.

This module never imports torch (versions come from package metadata).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import re
import subprocess
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import pandas as pd
from ladder.reports import figures as F

from ladder import layout

FORMATS = ("html", "pdf")
HTML_NAME = "report.html"
PDF_NAME = "report.pdf"
PACKAGES = ("ladder", "torch", "transformers", "tokenizers", "datatrove", "lm_eval", "submitit", "numpy", "scipy",
            "pandas", "pyarrow", "matplotlib", "jinja2", "pydantic")
MAX_NOTES = 12
ABSENT = "—"


# ---------------------------------------------------------------------------------------------- blocks


@dataclass
class Para:
    text: str
    style: str = "p"  # p | note | missing | warn | ok
    kind: str = "para"


@dataclass
class Bullets:
    items: list[str]
    title: str = ""
    style: str = "note"
    kind: str = "bullets"


@dataclass
class Table:
    columns: list[str]
    rows: list[list[Any]]  # a cell is a string or (string, css class)
    align: str = ""  # one letter per column: l, r, c
    title: str = ""
    mono: tuple[int, ...] = ()  # columns in a monospaced font (run ids)
    compact: bool = False
    kind: str = "table"

    def cell(self, r: int, c: int) -> tuple[str, str]:
        v = self.rows[r][c]
        return (str(v[0]), str(v[1])) if isinstance(v, tuple) else (str(v), "")

    def cells(self) -> list[list[tuple[str, str]]]:
        return [[self.cell(r, c) for c in range(len(self.columns))] for r in range(len(self.rows))]

    def col_align(self, c: int) -> str:
        return {"r": "right", "c": "center"}.get(self.align[c] if c < len(self.align) else "l", "left")


@dataclass
class KV:
    items: list[tuple[str, str]]
    title: str = ""
    kind: str = "kv"


@dataclass
class Pre:
    text: str
    title: str = ""
    collapsed: bool = False  # HTML: a <details> element (opens without JavaScript)
    kind: str = "pre"


@dataclass
class Fig:
    spec: F.FigureSpec
    svg: str = ""
    kind: str = "figure"


@dataclass
class Tile:
    label: str
    value: str
    detail: str
    style: str = ""


@dataclass
class Headline:
    tiles: list[Tile]
    config: list[tuple[str, str, str]]  # label, value, source
    kind: str = "headline"


@dataclass
class Section:
    id: str
    title: str
    blocks: list[Any] = field(default_factory=list)
    number: int = 0

    def add(self, *blocks: Any) -> "Section":
        self.blocks.extend(b for b in blocks if b is not None)
        return self

    def missing(self, text: str) -> "Section":
        self.blocks.append(Para(text, "missing"))
        return self


# ---------------------------------------------------------------------------------------------- formatting


def num(v: Any) -> float:
    return F.num(v)


def fmt_count(v: Any) -> str:
    return F.fmt_count(v)


def fmt_flops(v: Any) -> str:
    x = num(v)
    if not math.isfinite(x):
        return ABSENT
    if x == 0:
        return "0"
    e = int(math.floor(math.log10(abs(x))))
    m = x / 10**e
    if round(m, 2) >= 10:
        m, e = m / 10, e + 1
    return f"{m:.2f}e{e}"


def fmt_loss(v: Any, digits: int = 4) -> str:
    x = num(v)
    return f"{x:.{digits}f}" if math.isfinite(x) else ABSENT


def fmt_g(v: Any, digits: int = 3) -> str:
    x = num(v)
    if not math.isfinite(x):
        return ABSENT
    if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e5):
        return f"{x:.{max(1, digits - 1)}e}"
    return f"{x:.{digits}g}"


def fmt_lr(v: Any) -> str:
    x = num(v)
    if not math.isfinite(x):
        return ABSENT
    return f"{x:.2e}" if x < 1e-3 else f"{x:.3g}"


def fmt_pct(v: Any, digits: int = 2, signed: bool = False) -> str:
    x = num(v)
    if not math.isfinite(x):
        return ABSENT
    return f"{x:+.{digits}f}%" if signed else f"{x:.{digits}f}%"


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


def unavailable(d: Any) -> str | None:
    """Why a fit section is missing (None when it is there)."""
    if d is None:
        return "not in fit.json"
    if not isinstance(d, Mapping):
        return "unreadable entry in fit.json"
    if d.get("available") is False:
        return str(d.get("reason") or "not available")
    if not d:
        return "empty entry in fit.json"
    return None


def seq(x: Any) -> list:
    """``x`` as a list when it is one (a list or tuple), else empty: fit.json entries may be anything."""
    return list(x) if isinstance(x, (list, tuple)) else []


def maps(x: Any) -> list[Mapping]:
    return [m for m in seq(x) if isinstance(m, Mapping)]


def mapping(x: Any) -> Mapping:
    return x if isinstance(x, Mapping) else {}


def g(d: Any, *keys: Any, default: Any = None) -> Any:
    """``d[k1][k2]...`` or ``default`` when any level is missing."""
    for k in keys:
        if isinstance(d, Mapping):
            d = d.get(k)
        elif isinstance(d, (list, tuple)) and isinstance(k, int) and -len(d) <= k < len(d):
            d = d[k]
        else:
            return default
        if d is None:
            return default
    return d


def _clip(s: Any, n: int = 400) -> str:
    s = "" if s is None else str(s)
    return s if len(s) <= n else s[: n - 1] + "…"


# ---------------------------------------------------------------------------------------------- loading


@dataclass
class StudyData:
    path: Path
    name: str
    description: str = ""
    notes: str = ""
    study_yaml: str | None = None
    study: Any = None  # StudySpec when study.yaml parses
    plan: dict = field(default_factory=dict)
    runs: pd.DataFrame = field(default_factory=pd.DataFrame)  # results.parquet + planned runs without a row
    curves: pd.DataFrame = field(default_factory=pd.DataFrame)
    fit: dict = field(default_factory=dict)
    devices: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    has_results: bool = False
    env: dict = field(default_factory=dict)  # versions, source, hardware, date (:func:`environment`)


def _read_json(path: Path, problems: list[str], what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        problems.append(f"{what} is unreadable ({exc})")
        return None


def load_study(study_dir: Path) -> StudyData:
    """Everything the report shows, read defensively: a missing or broken file is noted, never raised."""
    sd = layout.StudyDir(Path(study_dir))
    problems: list[str] = []
    data = StudyData(path=sd.path, name=sd.path.name)
    try:
        data.study_yaml = sd.study.read_text(encoding="utf-8")
    except FileNotFoundError:
        problems.append(f"no {layout.STUDY} in the study directory")
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{layout.STUDY} is unreadable ({exc})")
    if data.study_yaml is not None:
        try:
            from ladder.studies.spec import read_study_file

            data.study = read_study_file(sd.study)
        except Exception as exc:  # noqa: BLE001 - SpecError or anything else: show the raw YAML
            problems.append(f"{layout.STUDY} does not parse ({exc})")
            try:
                import yaml

                raw = yaml.safe_load(data.study_yaml)
                if isinstance(raw, dict):
                    data.name = str(raw.get("name") or data.name)
                    data.description = str(raw.get("description") or "")
                    data.notes = str(raw.get("notes") or "")
            except Exception:  # noqa: BLE001
                pass
    if data.study is not None:
        data.name, data.description, data.notes = data.study.name, data.study.description or "", data.study.notes or ""
    plan = _read_json(sd.plan, problems, layout.PLAN)
    data.plan = plan if isinstance(plan, dict) else {}
    if data.study is None and data.plan.get("study"):
        data.name = str(data.plan["study"])

    runs = pd.DataFrame()
    if sd.results_parquet.is_file():
        try:
            runs = pd.read_parquet(sd.results_parquet)
            data.has_results = True
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{layout.RESULTS_PARQUET} is unreadable ({exc})")
    if sd.curves.is_file():
        try:
            data.curves = pd.read_parquet(sd.curves)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{layout.CURVES} is unreadable ({exc})")
    fit = _read_json(sd.fit, problems, layout.FIT)
    if fit is not None and not isinstance(fit, dict):
        problems.append(f"{layout.FIT} is not a JSON object")
        fit = None
    data.fit = fit or {}
    data.runs = _merge_planned(sd, runs, data.plan, data.devices, problems)
    data.problems = problems
    return data


def _merge_planned(sd: layout.StudyDir, runs: pd.DataFrame, plan: dict, devices: dict[str, int],
                   problems: list[str]) -> pd.DataFrame:
    """The results table plus one row per planned run that has none (failed before a result, or pending), in
    plan order; also tallies the devices the runs trained on (``result.json``)."""
    ids = [str(r) for r in seq(plan.get("runs"))]
    have = set(runs["run_id"].astype(str)) if "run_id" in runs else set()
    extra = []
    for run_id in ids + sorted(set(runs.get("run_id", pd.Series(dtype=str)).astype(str)) - set(ids)):
        rd = sd.run(run_id)
        res = _read_json(rd.result, [], "") if rd.result.is_file() else None
        if isinstance(res, dict) and res.get("device_name"):
            devices[str(res["device_name"])] = devices.get(str(res["device_name"]), 0) + 1
        if run_id in have:
            continue
        spec = mapping(_read_json(rd.spec, problems, f"runs/{run_id}/{layout.SPEC}"))
        err = _read_json(rd.error, problems, f"runs/{run_id}/{layout.ERROR}") if rd.error.is_file() else None
        shape = mapping(spec.get("shape"))
        status = "failed" if err or (isinstance(res, dict) and res.get("status") == "failed") else "pending"
        reason = None
        if isinstance(err, dict):
            reason = f"{err.get('error_type') or 'error'}: {err.get('message') or ''}".strip()
        elif isinstance(res, dict):
            reason = res.get("reason")
        extra.append({
            "run_id": run_id, "variant": spec.get("variant", "?"),
            "scale": str((mapping(spec.get("axes"))).get("budget", (mapping(spec.get("axes"))).get("size", ""))),
            "d_model": shape.get("d_model"), "n_layers": shape.get("n_layers"), "n_heads": shape.get("n_heads"),
            "n_kv_heads": shape.get("n_kv_heads"), "tie_embeddings": shape.get("tied"), "params": spec.get("params"),
            "tokens": spec.get("tokens"), "flops": spec.get("flops"), "batch_tokens": spec.get("batch_tokens"),
            "lr": spec.get("lr"), "steps": spec.get("steps"), "status": status, "reason": reason,
            "_from_error": bool(err),
        })
    if extra:
        runs = pd.concat([runs, pd.DataFrame(extra)], ignore_index=True) if len(runs) else pd.DataFrame(extra)
    if len(runs) and ids and "run_id" in runs:
        order = {r: i for i, r in enumerate(ids)}
        runs = runs.assign(_order=runs["run_id"].astype(str).map(order).fillna(len(order)))
        runs = runs.sort_values("_order", kind="stable").drop(columns="_order").reset_index(drop=True)
    for col in ("run_id", "variant", "status", "params", "tokens", "flops", "loss"):
        if col not in runs:
            runs[col] = pd.Series([None] * len(runs), dtype=object)
    runs["variant"] = runs["variant"].fillna("?").astype(str)
    return runs


# ---------------------------------------------------------------------------------------------- sections


class Builder:
    """Builds the report's sections from a :class:`StudyData`."""

    def __init__(self, data: StudyData) -> None:
        self.d = data
        self.fit = data.fit or {}
        runs = data.runs
        self.runs = runs
        self.done = runs[(runs["status"] == "done") & pd.to_numeric(runs["loss"], errors="coerce").notna()] \
            if len(runs) else runs
        self.styles = F.VariantStyles(runs["variant"].astype(str).tolist() if len(runs) else [])
        for name in (mapping(self.fit.get("laws_by_variant"))):
            self.styles.add(name)
        self.styles.add("tied")
        self.styles.add("untied")
        self.variant_of = dict(zip(runs["run_id"].astype(str), runs["variant"].astype(str))) if len(runs) else {}
        self.law = self.fit.get("loss_law") if isinstance(self.fit.get("loss_law"), Mapping) else {}
        self.hero = self.fit.get("hero") if isinstance(self.fit.get("hero"), Mapping) else {}
        self.fig_count = 0

    def figure(self, key: str, title: str, caption: str, height: float, draw: Callable) -> Fig:
        self.fig_count += 1
        return Fig(F.FigureSpec(key=key, title=f"Figure {self.fig_count}. {title}", caption=caption, height=height,
                                draw=draw))

    def small_multiples(self, key: str, title: str, caption: str, scales: list, axis: str, per: int = 9) -> list[Fig]:
        """One figure per ``per`` rungs (3 per row), so that a long ladder stays readable on a page."""
        chunks = [scales[i:i + per] for i in range(0, len(scales), per)] or [[]]
        out = []
        for i, chunk in enumerate(chunks):
            part = f" ({i + 1} of {len(chunks)})" if len(chunks) > 1 else ""
            nrows = max(1, math.ceil(len(chunk) / 3))
            out.append(self.figure(f"{key}-{i + 1}" if len(chunks) > 1 else key, title + part, caption,
                                   1.0 + 2.2 * nrows, lambda fig, c=chunk: F.draw_sweeps(fig, c, axis)))
        return out

    # ------------------------------------------------------------------ 1. headline
    def headline(self) -> Section:
        s = Section("headline", "Forecast for the hero run")
        fit, hero = self.fit, self.hero
        rec = fit.get("recommendation") if not unavailable(fit.get("recommendation")) else {}
        plan_hero = mapping(self.d.plan.get("hero"))
        totals = mapping(self.d.plan.get("totals"))
        loss = _first(hero.get("loss"), rec.get("loss"), rec.get("predicted_loss"))
        interval = seq(rec.get("loss_interval")) + [None, None]
        lo = _first(hero.get("lo"), rec.get("lo"), interval[0])
        hi = _first(hero.get("hi"), rec.get("hi"), interval[1])
        tiles = []
        if ok(loss):
            ext = mapping(hero.get("extrapolation"))
            ext_text = ""
            if ok(ext.get("params")) or ok(ext.get("flops")):
                ext_text = (f"; extrapolated {fmt_g(ext.get('params'), 2)}× in parameters, "
                            f"{fmt_g(ext.get('flops'), 3)}× in compute beyond the ladder")
            tiles.append(Tile("Forecast loss", fmt_loss(loss, 3),
                              f"nats/token; 90% interval {fmt_loss(lo, 3)} – {fmt_loss(hi, 3)}{ext_text}", "primary"))
        else:
            tiles.append(Tile("Forecast loss", ABSENT, "no forecast: " + (
                "run `ladder fit` first" if not fit else (unavailable(fit.get("loss_law")) or "the fit has no hero loss")),
                "primary"))
        pct = _first(hero.get("ladder_pct_of_hero"), totals.get("ladder_pct_of_hero"))
        ladder_flops = _first(hero.get("ladder_flops"), totals.get("flops"))
        hero_c = _first(hero.get("compute"), rec.get("compute"), plan_hero.get("compute"), totals.get("hero_flops"))
        tiles.append(Tile("Ladder cost", fmt_pct(pct, 1) if ok(pct) else ABSENT,
                          f"of the hero's compute ({fmt_flops(ladder_flops)} of {fmt_flops(hero_c)} FLOPs)"))
        bt = self.backtest()
        if bt and not bt.get("skipped") and ok(bt.get("mean_abs_error_pct")):
            tiles.append(Tile("Backtest error", fmt_pct(bt["mean_abs_error_pct"]),
                              f"mean |error| forecasting the {_plural(bt.get('n_held_out'), 'run')} of the largest "
                              f"{bt.get('holdout') or 'size'} rung without them (max {fmt_pct(bt.get('max_abs_error_pct'))})"))
        else:
            tiles.append(Tile("Backtest error", ABSENT, (bt or {}).get("skipped") or "this study has no backtest"))
        counts = self.status_counts()
        total = sum(counts.values())
        bad = ", ".join(f"{v} {k}" for k, v in counts.items() if k != "done" and v)
        tiles.append(Tile("Runs", f"{counts.get('done', 0)} / {total}" if total else ABSENT,
                          f"done; {bad}" if bad else ("all runs done" if total else "no runs collected"),
                          "warn" if bad else "good"))
        shape = rec if rec.get("d_model") is not None else (mapping(plan_hero.get("shape")))
        src = mapping(rec.get("sources"))
        params = _first(rec.get("params"), hero.get("params"), plan_hero.get("params"))
        tokens = _first(rec.get("tokens"), hero.get("tokens"), plan_hero.get("tokens"))
        conv = rec.get("param_convention") or (self.d.study.ladder.param_count if self.d.study is not None else None)
        config = [
            ("Parameters", f"{fmt_count(params)}" + (f" ({str(conv).replace('_', '-')})" if conv else ""),
             src.get("params", "")),
            ("Training tokens", fmt_count(tokens), src.get("tokens", "")),
            ("Tokens per parameter", fmt_g(num(tokens) / num(params)) if pos(tokens, params) else ABSENT,
             _first(rec.get("allocation"), hero.get("allocation"), plan_hero.get("allocation")) or ""),
            ("Compute", f"{fmt_flops(hero_c)} FLOPs", src.get("compute", "")),
            ("Shape", _shape_text(shape), src.get("shape", src.get("aspect_ratio", ""))),
            ("Feed-forward / vocabulary", f"{_int(shape.get('ffn_dim'))} / {_int(shape.get('vocab_size'))}", ""),
            ("Tied embeddings", fmt_bool(shape.get("tied")), src.get("tied", "")),
        ]
        if rec:
            config += [
                ("Sequence length", _int(rec.get("seq_len")), ""),
                ("Batch size", f"{fmt_count(rec.get('batch_tokens'))} tokens"
                 + (f" (90%: {fmt_ci(rec.get('batch_tokens_ci90'), fmt_count)})" if rec.get("batch_tokens_ci90") else ""),
                 src.get("batch_tokens", src.get("batch", ""))),
                ("Peak learning rate", fmt_lr(rec.get("lr"))
                 + (f" (90%: {fmt_ci(rec.get('lr_ci90'), fmt_lr)})" if rec.get("lr_ci90") else ""), src.get("lr", "")),
                ("Warmup / schedule", f"{_int(rec.get('warmup_steps'))} steps / {_schedule_text(rec.get('schedule'))}",
                 src.get("schedule", src.get("warmup_steps", ""))),
            ]
        s.add(Headline(tiles, [(a, b, str(c)) for a, b, c in config]))
        if not fit:
            s.missing("this study has no fit yet: run `ladder fit` on the study directory, then render the report again")
        elif not rec:
            s.add(Para("this study has no fitted recommendation; the configuration above is the planned hero"
                       + (f" ({unavailable(fit.get('recommendation'))})" if fit.get("recommendation") else ""),
                       "missing"))
        if rec.get("yaml"):
            s.add(Pre(str(rec["yaml"]), "The recommendation as YAML (to paste into a training config)", collapsed=True))
        warnings = [str(w) for w in seq(fit.get("warnings"))] + self.d.problems
        if warnings:
            s.add(Bullets(_cap(warnings), "Warnings", "warn"))
        notes = [str(n) for n in seq(fit.get("notes"))] + [str(n) for n in seq(rec.get("notes"))]
        if notes:
            s.add(Bullets(_cap(notes), "Notes"))
        return s

    def status_counts(self) -> dict[str, int]:
        return status_counts(self.runs)

    def backtest(self) -> dict | None:
        bt = self.fit.get("backtest")
        if not isinstance(bt, Mapping) or unavailable(bt):
            bt = self.law.get("backtest") if isinstance(self.law, Mapping) else None
        return dict(bt) if isinstance(bt, Mapping) else None

    # ------------------------------------------------------------------ 2. ladder table
    def ladder(self) -> Section:
        s = Section("ladder", "The ladder")
        runs = self.runs
        if not len(runs):
            return s.missing("this study has no runs yet: plan it with `ladder plan`, train and `ladder collect`")
        if not self.d.has_results:
            s.add(Para("this study has no collected results (no results.parquet): run `ladder collect`; the planned "
                       "runs are listed", "missing"))
        rows = []
        for _, r in runs.iterrows():
            status = str(r.get("status") or "unknown")
            rows.append([
                (str(r.get("run_id")), "mono"), str(r.get("variant")), str(r.get("scale") or ""),
                _shape_text(r), fmt_count(r.get("params")), fmt_count(r.get("tokens")), fmt_flops(r.get("flops")),
                fmt_count(r.get("batch_tokens")), fmt_lr(r.get("lr")), fmt_loss(r.get("final_train_loss")),
                fmt_loss(r.get("final_eval_loss", r.get("loss"))), (status, f"status-{_css(status)}"),
            ])
        counts = self.status_counts()
        total_flops = pd.to_numeric(runs["flops"], errors="coerce").sum()
        s.add(Para(f"{len(runs)} runs in {runs['variant'].nunique()} variant(s): "
                   + ", ".join(f"{v} {k}" for k, v in counts.items())
                   + f"; {fmt_flops(total_flops)} FLOPs in all. Parameters are counted "
                   + (f"{self.d.study.ladder.param_count.replace('_', '-')}" if self.d.study is not None else "as planned")
                   + "; losses in nats/token."))
        s.add(Table(["Run", "Variant", "Rung", "Shape", "Params", "Tokens", "FLOPs", "Batch", "LR", "Train loss",
                     "Eval loss", "Status"], rows, "llllrrrrrrrl", mono=(0,), compact=True))
        return s

    # ------------------------------------------------------------------ 3. curves
    def curves(self) -> Section:
        s = Section("curves", "Loss curves")
        c = self.d.curves
        need = {"run_id", "kind", "tokens", "flops", "loss", "step"}
        if not len(c) or not need <= set(c.columns):
            return s.missing("this study has no loss curves (no curves.parquet with per-step metrics: run `ladder collect`)")
        if "eval_loss" not in c:
            c = c.assign(eval_loss=float("nan"))
        n = c["run_id"].nunique()
        s.add(self.figure(
            "fig-curves", "Loss curves of every run",
            f"Training loss (lines) and evaluation loss (markers) of {n} runs against tokens seen and against "
            "compute, both on log axes. One colour, marker and line style per variant.",
            3.7, lambda fig: F.draw_curves(fig, c, self.variant_of, self.styles)))
        return s

    # ------------------------------------------------------------------ 4. scaling fits
    def scaling(self) -> Section:
        s = Section("scaling", "Scaling laws")
        law = self.fit.get("loss_law")
        why = unavailable(law) if self.fit else "no fit.json (run `ladder fit`)"
        if why:
            return s.missing(f"this study has no scaling-law fit: {why}")
        p = mapping(law.get("params"))
        ci = mapping(law.get("ci90"))
        degenerate = bool(law.get("degenerate"))
        form = law.get("reduced_form") if degenerate else "L(N, D) = E + A / N^α + B / D^β"
        lvc = self.fit.get("loss_vs_compute") if not unavailable(self.fit.get("loss_vs_compute")) else None
        band = self.forecast_band(law)
        s.add(self.figure(
            "fig-scaling", "Fitted loss law and the extrapolation to the hero",
            f"Final eval loss of every finished run against compute and parameters (one marker per variant; "
            f"outlined: the {_int(law.get('n_runs'))} runs the law"
            + (f" of variant {law.get('variant')}" if law.get("variant") else "")
            + f" was fitted to), the fitted law {form} along the hero's tokens per parameter, extrapolated to the "
            "hero (star: the forecast with its 90% prediction interval). Thin lines: the per-variant laws.",
            3.9, lambda fig: F.draw_scaling(fig, self.done, law, self.hero, self.styles, lvc=lvc,
                                            by_variant={k: v for k, v in (mapping(self.fit.get("laws_by_variant"))).items()
                                                        if isinstance(v, Mapping) and not unavailable(v)},
                                            band=band)))
        names = {"E": "E (irreducible loss)", "A": "A", "alpha": "α (parameters exponent)", "B": "B",
                 "beta": "β (tokens exponent)"}
        rows = [[names[k], fmt_g(p.get(k), 4), fmt_ci(ci.get(k), lambda v: fmt_g(v, 4))]
                for k in ("E", "A", "alpha", "B", "beta") if p.get(k) is not None]
        s.add(Table(["Parameter", "Value", "90% interval"], rows, "lrr",
                    title=f"Approach 3: {form}, fitted to {_int(law.get('n_runs'))} runs at {_int(law.get('n_sizes'))} "
                          f"sizes (Huber loss on log L, {_int(law.get('n_boot'))} bootstrap refits)"))
        if degenerate:
            s.add(Para(f"The ladder is degenerate: {law.get('degenerate_reason')}", "warn"))
        co = mapping(law.get("compute_optimal"))
        if co.get("identifiable"):
            cci = mapping(co.get("ci90"))
            s.add(Para(f"Compute-optimal allocation of the law: N_opt ∝ C^{fmt_g(co.get('a'))} "
                       f"(90%: {fmt_ci(cci.get('a'))}), D_opt ∝ C^{fmt_g(co.get('b'))} (90%: {fmt_ci(cci.get('b'))})."))
        elif co.get("reason"):
            s.add(Para(f"Compute-optimal allocation: {co['reason']}.", "note"))
        alloc = self.fit.get("compute_optimal")
        if isinstance(alloc, Mapping) and alloc.get("identifiable") and alloc.get("params") is not None:
            aci = mapping(alloc.get("ci90"))
            s.add(KV([
                ("At compute", f"{fmt_flops(alloc.get('flops'))} FLOPs"),
                ("Optimal parameters", f"{fmt_count(alloc.get('params'))} (90%: {fmt_ci(aci.get('params'), fmt_count)})"),
                ("Optimal tokens", f"{fmt_count(alloc.get('tokens'))} (90%: {fmt_ci(aci.get('tokens'), fmt_count)})"),
                ("Tokens per parameter", f"{fmt_g(alloc.get('tokens_per_param'))} "
                                         f"(90%: {fmt_ci(aci.get('tokens_per_param'))})"),
                ("Loss at the optimum", f"{fmt_loss(alloc.get('loss'))} (90%: {fmt_ci(aci.get('loss'), fmt_loss)})"),
            ], "Compute-optimal allocation at the hero's compute"))
        if lvc:
            q, qci = mapping(lvc.get("params")), mapping(lvc.get("ci90"))
            s.add(Table(["Parameter", "Value", "90% interval"],
                        [[k, fmt_g(q.get(k), 4), fmt_ci(qci.get(k), lambda v: fmt_g(v, 4))] for k in ("E", "C0", "gamma")],
                        "lrr", title=f"Loss vs compute, L(C) = E + (C0 / C)^γ, on {_int(lvc.get('n_points'))} "
                                     f"{'frontier runs' if lvc.get('source') == 'frontier' else 'points'} "
                                     f"({lvc.get('source') or ''})"))
        elif self.fit.get("loss_vs_compute") is not None:
            s.add(Para(f"this study has no loss-vs-compute law: {unavailable(self.fit.get('loss_vs_compute'))}", "missing"))
        byv = mapping(self.fit.get("laws_by_variant"))
        if isinstance(byv, Mapping) and byv:
            rows = []
            for name, v in byv.items():
                why = unavailable(v)
                if why:
                    rows.append([name, ABSENT, ABSENT, ABSENT, ABSENT, ABSENT, ABSENT, _clip(why, 160)])
                    continue
                vp = mapping(v.get("params"))
                rows.append([name, _int(v.get("n_runs")), fmt_g(vp.get("E"), 4), fmt_g(vp.get("A")), fmt_g(vp.get("alpha")),
                             fmt_g(vp.get("B")), fmt_g(vp.get("beta")),
                             "degenerate: B, β not identified" if v.get("degenerate") else ""])
            s.add(Table(["Variant", "Runs", "E", "A", "α", "B", "β", "Note"], rows, "lrrrrrrl",
                        title="The law fitted per variant"))
        preds = maps(self.fit.get("predictions"))
        if preds:
            s.add(Table(["Forecast", "Parameters", "Tokens", "Loss (nats/token)", "90% interval"],
                        [[str(p.get("label", "")), fmt_count(p.get("params")), fmt_count(p.get("tokens")),
                          fmt_loss(p.get("loss")), fmt_ci([p.get("lo"), p.get("hi")], fmt_loss)] for p in preds],
                        "lrrrr", title="Forecasts"))
        return s

    def forecast_band(self, law: Mapping) -> list[dict] | None:
        """The 90% prediction interval along the hero's tokens per parameter, from the smallest ladder model to
        the hero, as ``ladder fit`` computed it (``fit.json``'s ``forecast_curve``); None when it has none."""
        given = self.fit.get("forecast_curve") or g(self.fit, "hero", "curve")
        return maps(given) if isinstance(given, list) and given else None

    # ------------------------------------------------------------------ 5. IsoFLOP
    def isoflop(self) -> Section:
        s = Section("isoflop", "IsoFLOP profiles and compute-optimal allocation")
        iso = self.fit.get("isoflop")
        why = unavailable(iso) if self.fit else "no fit.json"
        if why:
            return s.missing(f"this study has no IsoFLOP profiles: {why}")
        s.add(self.figure(
            "fig-isoflop", "IsoFLOP profiles and N_opt, D_opt against compute",
            "Left: final loss against model size per compute budget, with the fitted IsoFLOP curve of each budget "
            f"({iso.get('method') or 'shape'} fit) and its minimum (diamond, 90% interval). Right: the optimal "
            "parameters and tokens per budget with their power laws in compute, extrapolated to the hero's compute.",
            3.8, lambda fig: F.draw_isoflop(fig, iso, self.hero)))
        rows = []
        for b in maps(iso.get("budgets")):
            c = mapping(b.get("ci90"))
            rows.append([fmt_flops(b.get("flops")), _int(b.get("n_runs")), _int(b.get("n_sizes")),
                         fmt_count(b.get("params_opt")), fmt_ci(c.get("params_opt"), fmt_count),
                         fmt_count(b.get("tokens_opt")), fmt_ci(c.get("tokens_opt"), fmt_count),
                         fmt_loss(b.get("loss_opt")), "yes" if b.get("interior") else "no (extrapolated)"])
        s.add(Table(["Budget (FLOPs)", "Runs", "Sizes", "N_opt", "90%", "D_opt", "90%", "Loss at N_opt", "Bracketed"],
                    rows, "rrrrrrrrl", title="Optimum per compute budget"))
        ci = mapping(iso.get("ci90"))
        n_law, d_law = mapping(iso.get("n_opt")), mapping(iso.get("d_opt"))
        s.add(KV([
            ("N_opt(C)", f"{fmt_g(n_law.get('k'))} × C^{fmt_g(iso.get('a'), 4)} (exponent 90%: {fmt_ci(ci.get('a'))})"),
            ("D_opt(C)", f"{fmt_g(d_law.get('k'))} × C^{fmt_g(iso.get('b'), 4)} (exponent 90%: {fmt_ci(ci.get('b'))})"),
            ("Runs / budgets / bootstrap", f"{_int(iso.get('n_runs'))} / {_int(iso.get('n_budgets'))} / {_int(iso.get('n_boot'))}"),
        ], "Approach 2"))
        skipped = [f"{fmt_flops(b.get('flops'))} FLOPs: {b.get('reason')}" for b in maps(iso.get("skipped_budgets"))]
        if iso.get("note"):
            skipped.append(str(iso["note"]))
        if skipped:
            s.add(Bullets(skipped, "Notes"))
        return s

    # ------------------------------------------------------------------ 6. LR and batch
    def hparams(self) -> Section:
        s = Section("hparams", "Learning rate and batch size")
        hp = self.fit.get("hparams")
        why = unavailable(hp) if self.fit else "no fit.json"
        if why:
            return s.missing(f"this study has no LR sweep ({why})" if "LR sweep" not in why else why)
        scales = maps(hp.get("scales"))
        if not hp.get("has_lr_sweep"):
            reason = g(hp, "lr", "reason") or "no rung has 3 or more learning rates"
            s.missing(reason if reason.startswith("this study") else f"this study has no LR sweep ({reason})")
        else:
            s.add(*self.small_multiples(
                "fig-lr-sweeps", "Learning-rate sweeps per rung",
                "Final loss against peak learning rate at each rung (filled: inside the fit window), the fitted "
                "parabola in log LR, its optimum (dashed) and the optimum's 90% interval (shaded).",
                [sc for sc in scales if sc.get("points")], "lr"))
        if hp.get("has_batch_sweep"):
            s.add(*self.small_multiples(
                "fig-batch-sweeps", "Batch-size sweeps per rung",
                "Final loss against batch size at each rung and the fitted profile (the LR re-tuned at every batch), "
                "its optimum and 90% interval.", [sc for sc in scales if sc.get("batch")], "batch"))
        elif hp.get("has_lr_sweep"):
            s.add(Para("this study has no batch sweep (no rung has 3 or more batch sizes)", "missing"))
        panels = []
        if hp.get("has_lr_sweep"):
            panels.append((hp.get("lr"), "optimal peak learning rate", "LR* vs compute"))
        if hp.get("has_batch_sweep"):
            panels.append((hp.get("batch"), "optimal batch size (tokens)", "B* vs compute"))
        if panels:
            s.add(self.figure(
                "fig-hparam-laws", "Hyperparameter laws",
                "Optimum per rung (90% interval) and its power law in compute, extrapolated (dashed) to the hero's "
                "compute (star: the law's value and 90% interval there).", 3.2,
                lambda fig: F.draw_trends(fig, panels)))
        if scales:
            rows = []
            for sc in scales:
                lr, b = mapping(sc.get("lr")), mapping(sc.get("batch"))
                rows.append([str(sc.get("scale")), fmt_flops(sc.get("flops")), fmt_count(sc.get("params")),
                             _int(sc.get("n_runs")), fmt_lr(lr.get("opt")), fmt_ci(lr.get("ci90"), fmt_lr),
                             _status_cell(lr.get("status") or ("skipped" if sc.get("skipped") else "")),
                             fmt_loss(lr.get("penalty_2x")), fmt_count(b.get("opt")) if b else ABSENT,
                             fmt_ci(b.get("ci90"), fmt_count) if b else ABSENT])
            s.add(Table(["Rung", "Compute", "Params", "Runs", "LR*", "90%", "Status", "Cost of 2× LR", "B*", "90%"],
                        rows, "lrrrrrlrrr", title="Optimum per rung (cost: loss increase when the LR is off by 2×)"))
        h = mapping(hp.get("hero"))
        if hp.get("has_lr_sweep"):
            items = [("Learning rate at the hero", f"{fmt_lr(h.get('lr'))} (90%: {fmt_ci(h.get('lr_ci90'), fmt_lr)})")]
            law = mapping(g(hp, "lr", "law"))
            if law:
                items.append(("LR*(C)", f"{fmt_g(law.get('k'))} × C^{fmt_g(law.get('a'), 4)} "
                                        f"(exponent 90%: {fmt_ci(g(law, 'ci90', 'a'))})"))
            elif g(hp, "lr", "reason"):
                items.append(("LR*(C)", str(g(hp, "lr", "reason"))))
            if h.get("batch_tokens") is not None:
                items.append(("Batch size at the hero", f"{fmt_count(h.get('batch_tokens'))} tokens "
                                                        f"(90%: {fmt_ci(h.get('batch_tokens_ci90'), fmt_count)})"))
            if h.get("lr_penalty_2x") is not None:
                items.append(("Cost of a 2× LR error at the hero", f"{fmt_loss(h.get('lr_penalty_2x'))} nats/token"))
            s.add(KV(items, "At the hero"))
        notes = [str(n) for n in seq(hp.get("notes"))]
        if notes:
            s.add(Bullets(notes[:MAX_NOTES] + ([f"… and {len(notes) - MAX_NOTES} more"] if len(notes) > MAX_NOTES else []),
                          "Notes"))
        if hp.get("method"):
            s.add(Para(f"Method: {hp['method']}.", "note"))
        return s

    # ------------------------------------------------------------------ 7. tied vs untied
    def tied(self) -> Section:
        s = Section("tied", "Tied vs untied embeddings")
        tie = self.fit.get("tied_vs_untied")
        why = unavailable(tie) if self.fit else "no fit.json"
        if why:
            return s.missing(f"this study has no tied-vs-untied ablation ({why})")
        s.add(self.figure(
            "fig-tied", "Tied vs untied embeddings across scale",
            "Left: the best loss of each variant per rung, moved to matched compute, with each variant's L(C) law. "
            "Right: the difference untied − tied (> 0: tying wins) with its fitted trend, extrapolated to the hero.",
            3.5, lambda fig: F.draw_tie(fig, tie, self.styles, "tied", "untied")))
        rows = []
        for r in maps(tie.get("scales")):
            if r.get("skipped"):
                rows.append([str(r.get("scale")), fmt_flops(r.get("flops")), ABSENT, ABSENT, ABSENT, ABSENT,
                             _clip(r.get("skipped"), 120)])
                continue
            se = r.get("diff_se")
            rows.append([str(r.get("scale")), fmt_flops(r.get("flops")), fmt_loss(r.get("loss_tied")),
                         fmt_loss(r.get("loss_untied")),
                         fmt_loss(r.get("diff")) + (f" ± {fmt_loss(se)}" if ok(se) else ""),
                         fmt_g(r.get("compute_multiplier")), str(r.get("winner") or "")])
        s.add(Table(["Rung", "Compute", "Tied", "Untied", "Untied − tied", "Compute ×", "Winner"], rows, "lrrrrrl",
                    title="Per rung (losses at matched compute; compute ×: the untied compute needed to match tied, "
                          "over C)"))
        cross = mapping(tie.get("crossover"))
        h = mapping(tie.get("hero"))
        items = []
        if cross.get("message"):
            items.append(("Crossover", f"{cross['message']}"
                          + (f" (90%: {fmt_ci(cross.get('ci90'), fmt_flops)} FLOPs)" if cross.get("ci90") else "")))
        if h:
            items.append(("At the hero", f"untied − tied = {fmt_loss(h.get('diff'))} "
                                         f"(90%: {fmt_ci(h.get('diff_ci90'), fmt_loss)}); "
                                         f"{h.get('winner') or '?'} wins"
                          + ("" if h.get("winner_certain") else " (not significant)")))
            if h.get("compute_multiplier") is not None:
                items.append(("Effective compute", f"untied needs {fmt_g(h.get('compute_multiplier'))}× the compute "
                                                   f"(90%: {fmt_ci(h.get('compute_multiplier_ci90'))})"))
        elif tie.get("reason"):
            items.append(("Trend", str(tie["reason"])))
        if items:
            s.add(KV(items, "Along the ladder"))
        if tie.get("method"):
            s.add(Para(f"Method: {tie['method']}.", "note"))
        return s

    # ------------------------------------------------------------------ 8. depth vs width
    def depth(self) -> Section:
        s = Section("depth", "Depth vs width")
        dw = self.fit.get("depth_vs_width")
        why = unavailable(dw) if self.fit else "no fit.json"
        scales = maps(dw.get("scales")) if not why else []
        if why or not any(sc.get("fit") for sc in scales):
            reason = why or g(dw, "aspect", "reason") or "no rung has 3 or more aspect ratios"
            return s.missing(reason if str(reason).startswith("this study") else
                             f"this study has no depth-vs-width sweep ({reason})")
        s.add(*self.small_multiples(
            "fig-depth", "Loss against aspect ratio per rung",
            "Final loss (moved to the rung's compute) against d_model / n_layers at equal parameter count, the fitted "
            "parabola in log aspect ratio and its optimum with the 90% interval.",
            [sc for sc in scales if sc.get("points")], "aspect"))
        if (mapping(dw.get("aspect"))).get("law") or (mapping(dw.get("aspect"))).get("points"):
            s.add(self.figure(
                "fig-depth-law", "Best aspect ratio against compute",
                "The best aspect ratio per rung and its power law in compute, extrapolated to the hero.", 3.0,
                lambda fig: F.draw_trends(fig, [(dw.get("aspect"), "best aspect ratio (d_model / n_layers)",
                                                 "aspect* vs compute"),
                                                (dw.get("penalty"), "loss cost of a 2× wrong aspect",
                                                 "cost vs compute")])))
        rows = []
        for sc in scales:
            f = mapping(sc.get("fit"))
            rows.append([str(sc.get("scale")), fmt_flops(sc.get("flops")), _int(sc.get("n_runs")),
                         fmt_g(f.get("opt")), fmt_ci(f.get("ci90")), _status_cell(f.get("status") or "skipped"),
                         fmt_loss(f.get("penalty_2x")), _clip(sc.get("skipped") or f.get("message") or "", 140)])
        s.add(Table(["Rung", "Compute", "Runs", "Best aspect", "90%", "Status", "Cost of 2×", "Note"], rows, "lrrrrlrl",
                    title="Best aspect ratio per rung"))
        h = mapping(dw.get("hero"))
        if h.get("aspect_ratio") is not None:
            s.add(KV([("Aspect ratio at the hero",
                       f"{fmt_g(h.get('aspect_ratio'))} (90%: {fmt_ci(h.get('aspect_ratio_ci90'))})"),
                      ("Cost of a 2× wrong aspect at the hero", f"{fmt_loss(h.get('penalty_2x'))} nats/token")],
                     "At the hero"))
        elif g(dw, "aspect", "reason"):
            s.add(Para(f"No aspect-ratio law: {g(dw, 'aspect', 'reason')}", "note"))
        return s

    # ------------------------------------------------------------------ 9. residuals and backtest
    def residuals(self) -> Section:
        s = Section("residuals", "Residuals and backtest")
        resid = maps((self.law or {}).get("residuals"))
        bt = self.backtest()
        if not resid and not bt:
            return s.missing("this study has no residuals or backtest (no loss-law fit)")
        s.add(self.figure(
            "fig-residuals", "Residuals of the loss law and the backtest",
            "Left: (observed − fitted) / fitted of every run in the fit, per variant. Right: the runs of the largest "
            "rung against the forecast of the same fit made without them; the grey band is ±1%.", 3.5,
            lambda fig: F.draw_residuals(fig, resid, bt, self.variant_of, self.styles)))
        summ = mapping((self.law or {}).get("residual_summary"))
        if summ:
            s.add(KV([(str(k).replace("_", " "), fmt_g(v, 4) if isinstance(v, (int, float)) else str(v))
                      for k, v in summ.items()], "Residual summary"))
        if bt:
            if bt.get("skipped"):
                s.add(Para(f"The backtest was skipped: {bt['skipped']}", "missing"))
            else:
                rows = [[(str(r.get("run")), "mono"), self.variant_of.get(str(r.get("run")), ""),
                         fmt_count(r.get("params")), fmt_count(r.get("tokens")), fmt_loss(r.get("loss")),
                         fmt_loss(r.get("predicted")), fmt_pct(r.get("error_pct"), signed=True)]
                        for r in maps(bt.get("held_out"))]
                s.add(Table(["Run", "Variant", "Params", "Tokens", "Observed", "Forecast", "Error"], rows, "llrrrrr",
                            mono=(0,),
                            title=f"Backtest: refit on {_int(bt.get('n_train'))} runs without the largest "
                                  f"{bt.get('holdout') or 'size'} rung, forecast of its {_int(bt.get('n_held_out'))} runs "
                                  f"(mean error {fmt_pct(bt.get('mean_error_pct'), signed=True)}, mean |error| "
                                  f"{fmt_pct(bt.get('mean_abs_error_pct'))}, max |error| {fmt_pct(bt.get('max_abs_error_pct'))}; "
                                  "> 0: the forecast was pessimistic)"))
                if bt.get("note"):
                    s.add(Para(str(bt["note"]), "note"))
        lbt = g(self.fit, "loss_vs_compute", "backtest")
        if isinstance(lbt, Mapping) and not lbt.get("skipped") and ok(lbt.get("mean_abs_error_pct")):
            s.add(Para(f"Loss-vs-compute law backtest (largest {lbt.get('holdout')} rung held out): mean |error| "
                       f"{fmt_pct(lbt.get('mean_abs_error_pct'))} on {_int(lbt.get('n_held_out'))} frontier run(s)."))
        return s

    # ------------------------------------------------------------------ 10. health
    def health(self) -> Section:
        s = Section("health", "Run health")
        runs = self.runs
        if not len(runs):
            return s.missing("this study has no runs to report on")
        bad = runs[runs["status"].isin(["diverged", "failed"])]
        if len(bad):
            rows = []
            for _, r in bad.iterrows():
                status = str(r.get("status"))
                step = r.get("diverged_at_step")
                rows.append([(str(r.get("run_id")), "mono"), str(r.get("variant")), _shape_text(r),
                             (status, f"status-{_css(status)}"), _int(step) if ok(step) else ABSENT,
                             _clip(r.get("reason") or "no reason recorded", 300)])
            s.add(Table(["Run", "Variant", "Shape", "Status", "At step", "Reason"], rows, "llllrl", mono=(0,),
                        title="Runs that diverged or failed"))
        else:
            s.add(Para("No run diverged or failed.", "ok"))
        pending = int((runs["status"] == "pending").sum())
        if pending:
            s.add(Para(f"{pending} planned run(s) have no result yet (pending or still training).", "note"))
        excluded = seq(self.fit.get("excluded"))
        if excluded and isinstance(excluded, list):
            rows = []
            for e in excluded[:200]:
                if isinstance(e, Mapping):
                    rid = str(e.get("run_id", e.get("run", "")))
                    rows.append([(rid, "mono"), _clip(e.get("reason") or e.get("status") or "", 200)])
                else:
                    rows.append([(str(e), "mono"), ""])
            s.add(Table(["Run", "Why the fit left it out"], rows, "ll", mono=(0,), title="Runs left out of the fit"))
        have = [c for c in ("tokens_per_s", "mfu") if c in runs and pd.to_numeric(runs[c], errors="coerce").notna().any()]
        if have:
            s.add(self.figure(
                "fig-health", "Throughput and MFU",
                "Training throughput and model FLOPs utilisation of every run against its size (red crosses: runs "
                "that diverged or failed).", 3.2, lambda fig: F.draw_health(fig, runs, self.styles)))
            wall = pd.to_numeric(runs.get("wall_time_s"), errors="coerce") if "wall_time_s" in runs else pd.Series(dtype=float)
            tps = pd.to_numeric(runs.get("tokens_per_s"), errors="coerce") if "tokens_per_s" in runs else pd.Series(dtype=float)
            mfu = pd.to_numeric(runs.get("mfu"), errors="coerce") if "mfu" in runs else pd.Series(dtype=float)
            restarts = pd.to_numeric(runs.get("restarts"), errors="coerce") if "restarts" in runs else pd.Series(dtype=float)
            s.add(KV([
                ("Wall time, all runs", fmt_s(wall.sum()) if wall.notna().any() else ABSENT),
                ("Longest run", fmt_s(wall.max()) if wall.notna().any() else ABSENT),
                ("Throughput (median, range)", f"{fmt_count(tps.median())} tokens/s ({fmt_count(tps.min())} – "
                                               f"{fmt_count(tps.max())})" if tps.notna().any() else ABSENT),
                ("MFU (median, range)", f"{100 * mfu.median():.1f}% ({100 * mfu.min():.1f}% – {100 * mfu.max():.1f}%)"
                 if mfu.notna().any() else ABSENT),
                ("Restarts (preemptions, resumes)", _int(restarts.sum()) if restarts.notna().any() else ABSENT),
            ], "Throughput"))
        else:
            s.add(Para("this study has no throughput data (no tokens_per_s or mfu in the results)", "missing"))
        return s

    # ------------------------------------------------------------------ 11. tasks
    def tasks(self) -> Section:
        s = Section("tasks", "Task accuracy forecasts")
        tk = self.fit.get("tasks")
        why = unavailable(tk) if self.fit else "no fit.json"
        fits = (tk or {}).get("tasks") if not why else None
        errors = (tk or {}).get("errors") if not why else None
        if why or (not fits and not errors):
            reason = why if why and why != "not in fit.json" else "no task evaluations (run `ladder eval`, then collect)"
            return s.missing(f"this study has no task accuracy forecasts: {reason}")
        rows = []
        for name, t in mapping(fits).items():
            if not isinstance(t, Mapping):
                continue
            h = mapping(t.get("hero"))
            s.add(self.figure(
                f"fig-task-{_css(name)}", f"Task forecast: {name}",
                f"Two-step forecast of {name}: task loss against compute (step 1, {g(t, 'step1', 'formula') or 'fit'}) "
                f"and accuracy against task loss (step 2, {g(t, 'step2', 'formula') or 'no accuracy'}), "
                "with the hero's forecast and 90% intervals.", 3.3, lambda fig, t=t: F.draw_task(fig, t)))
            rows.append([str(name), str(t.get("loss_metric") or ""), _int(t.get("n_runs")), fmt_loss(h.get("loss")),
                         fmt_ci(h.get("loss_interval"), fmt_loss), fmt_loss(h.get("acc"), 3),
                         fmt_ci(h.get("acc_interval"), lambda v: fmt_loss(v, 3)),
                         fmt_ci(h.get("acc_prediction_interval"), lambda v: fmt_loss(v, 3))])
        if rows:
            s.add(Table(["Task", "Loss metric", "Runs", "Hero task loss", "90%", "Hero accuracy", "90% (curve)",
                         "90% (prediction)"], rows, "llrrrrrr", title="Forecasts at the hero"))
        for name, err in mapping(errors).items():
            s.add(Para(f"{name}: no forecast ({err})", "missing"))
        warns = [f"{n}: {w}" for n, t in mapping(fits).items() if isinstance(t, Mapping) for w in seq(t.get("warnings"))]
        if warns:
            s.add(Bullets(warns[:MAX_NOTES], "Notes"))
        return s

    # ------------------------------------------------------------------ 12. reproducibility
    def reproducibility(self) -> Section:
        s = Section("reproducibility", "Reproducibility")
        env = self.d.env or environment()
        s.add(KV([("Report generated", env["date"]), ("Study directory", str(self.d.path)),
                  ("Study", self.d.name)] + ([("Notes", self.d.notes)] if self.d.notes else []), "This report"))
        s.add(KV([(k, v) for k, v in env["versions"].items()], "Package versions"))
        s.add(KV(env["source"] + env["hardware"], "Code and machine"))
        if self.d.devices:
            s.add(KV([(name, f"{n} run(s)") for name, n in sorted(self.d.devices.items(), key=lambda kv: -kv[1])],
                     "Devices the runs trained on"))
        meta = self.fit.get("meta")
        if isinstance(meta, Mapping) and meta:
            s.add(KV([(str(k), _clip(json.dumps(v, default=str) if not isinstance(v, str) else v, 200))
                      for k, v in meta.items()], "Fit"))
        if self.d.study_yaml is not None:
            s.add(Pre(self.d.study_yaml, "study.yaml (the study spec as planned)"))
        else:
            s.add(Para("this study has no study.yaml", "missing"))
        return s

    def sections(self) -> list[Section]:
        out = []
        for make in (self.headline, self.ladder, self.curves, self.scaling, self.isoflop, self.hparams, self.tied,
                     self.depth, self.residuals, self.health, self.tasks, self.reproducibility):
            try:
                sec = make()
            except Exception as exc:  # noqa: BLE001 - one broken section must not lose the report
                name = make.__name__
                sec = Section(name, name.capitalize()).missing(
                    f"this section could not be built: {type(exc).__name__}: {exc}")
            out.append(sec)
        for i, sec in enumerate(out, 1):
            sec.number = i
        return out


def status_counts(runs: pd.DataFrame) -> dict[str, int]:
    """Runs per status, in the order done, diverged, failed, pending, then any other."""
    if not len(runs) or "status" not in runs:
        return {}
    vc = runs["status"].fillna("unknown").astype(str).value_counts()
    order = ["done", "diverged", "failed", "pending"]
    return {k: int(vc[k]) for k in order + [k for k in vc.index if k not in order] if k in vc}


def ok(*v: Any) -> bool:
    return F.ok(*v)


def pos(*v: Any) -> bool:
    return F.pos(*v)


def _plural(n: Any, word: str) -> str:
    k = int(num(n)) if ok(n) else 0
    return f"{k} {word}" + ("" if k == 1 else "s")


def _cap(items: list[str], n: int = MAX_NOTES) -> list[str]:
    return items[:n] + ([f"… and {len(items) - n} more"] if len(items) > n else [])


def _first(*vals: Any) -> Any:
    for v in vals:
        if v is not None and not (isinstance(v, float) and math.isnan(v)):
            return v
    return None


def _int(v: Any) -> str:
    x = num(v)
    return f"{int(round(x)):,}" if math.isfinite(x) else ABSENT


def _css(s: Any) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", str(s).lower()).strip("-") or "x"


def _status_cell(status: Any) -> tuple[str, str]:
    st = str(status or "")
    label = {"ok": "ok", "edge": "edge", "no_minimum": "no minimum", "skipped": "skipped"}.get(st, st)
    return (label or ABSENT, f"status-{_css(st)}" if st else "")


def _shape_text(r: Any) -> str:
    def get(k: str) -> Any:
        try:
            v = r.get(k)
        except AttributeError:
            return None
        return v

    d, L = num(get("d_model")), num(get("n_layers"))
    if not (math.isfinite(d) and math.isfinite(L)):
        return ABSENT
    h, kv = num(get("n_heads")), num(get("n_kv_heads"))
    heads = ""
    if math.isfinite(h):
        heads = f", {int(h)} heads" + (f" / {int(kv)} kv" if math.isfinite(kv) and kv != h else "")
    return f"{int(d)} × {int(L)} layers{heads}"


def _schedule_text(sch: Any) -> str:
    if isinstance(sch, Mapping):
        kind = sch.get("kind", "")
        parts = [str(kind)]
        if sch.get("warmup_fraction") is not None:
            parts.append(f"warmup {100 * num(sch['warmup_fraction']):.0f}%")
        if kind == "wsd" and sch.get("cooldown_fraction") is not None:
            parts.append(f"cooldown {100 * num(sch['cooldown_fraction']):.0f}% ({sch.get('cooldown_shape', '')})")
        if sch.get("final_lr_fraction") is not None:
            parts.append(f"final LR {100 * num(sch['final_lr_fraction']):.0f}% of peak")
        return ", ".join(p for p in parts if p)
    return str(sch) if sch else ABSENT


# ---------------------------------------------------------------------------------------------- environment


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _git(cwd: Path) -> str | None:
    try:
        env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"}
        head = subprocess.run(["git", "-C", str(cwd), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5, env=env)
        if head.returncode != 0:
            return None
        commit = head.stdout.strip()
        dirty = subprocess.run(["git", "-C", str(cwd), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, env=env)
        return commit + (" (with uncommitted changes)" if dirty.returncode == 0 and dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _memory() -> str | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024**2:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return None


def _gpus() -> str | None:
    import shutil

    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=name,memory.total", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [ln.strip() for ln in out.stdout.splitlines() if ln.strip()]
    if out.returncode != 0 or not lines:
        return None
    counts: dict[str, int] = {}
    for ln in lines:
        counts[ln] = counts.get(ln, 0) + 1
    return ", ".join(f"{n} × {name}" for name, n in counts.items())


def environment() -> dict[str, Any]:
    """Versions, source commit and hardware of the machine rendering the report (torch is never imported)."""
    import ladder

    versions = {"python": platform.python_version()}
    versions.update({p: _version(p) for p in PACKAGES})
    source = []
    pkg_dir = Path(ladder.__file__).resolve().parent
    pkg_commit = _git(pkg_dir)
    source.append(("ladder source", f"{pkg_dir} @ {pkg_commit}" if pkg_commit else f"{pkg_dir} (not a git checkout)"))
    cwd_commit = _git(Path.cwd())
    if cwd_commit and cwd_commit != pkg_commit:
        source.append(("working directory", f"{Path.cwd()} @ {cwd_commit}"))
    hardware = [("platform", f"{platform.system()} {platform.release()} ({platform.machine()})"),
                ("CPU", f"{_cpu_model()}, {os.cpu_count()} logical cores")]
    mem = _memory()
    if mem:
        hardware.append(("memory", mem))
    hardware.append(("GPUs", _gpus() or "none found (no nvidia-smi)"))
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "versions": versions,
        "source": source,
        "hardware": hardware,
    }


# ---------------------------------------------------------------------------------------------- output


def build_sections(study_dir: Path) -> tuple[StudyData, list[Section]]:
    """The study's data and the report's sections (figures not drawn yet: each output draws its own)."""
    data = load_study(Path(study_dir))
    data.env = environment()
    return data, Builder(data).sections()


def _html(data: StudyData, sections: list[Section]) -> str:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(loader=FileSystemLoader(str(Path(__file__).parent / "templates")), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    from markupsafe import Markup

    for sec in sections:
        for b in sec.blocks:
            if isinstance(b, Fig) and not b.svg:
                b.svg = F.to_svg(b.spec, context=data.name)
    return env.get_template("report.html.j2").render(
        name=data.name, description=data.description, sections=sections,
        generated=(data.env or environment())["date"], version=_version("ladder"), markup=Markup,
        study_dir=str(data.path),
    )


def render_report(study_dir: Path, out_dir: Path | None = None, formats: Iterable[str] = FORMATS) -> dict[str, Path]:
    """Write ``report.html`` (self-contained) and/or ``report.pdf`` for a study directory; default output folder:
    the study's ``report/``. Returns ``{format: path}``. Missing inputs become one-line notes in the report."""
    formats = [f.strip().lower() for f in (formats.split(",") if isinstance(formats, str) else formats) if f.strip()]
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise ValueError(f"unknown report format(s) {', '.join(bad)}; choose from {', '.join(FORMATS)}")
    study_dir = Path(study_dir)
    if not study_dir.is_dir():
        from ladder.errors import StateError

        raise StateError(f"{study_dir} is not a study directory")
    out = Path(out_dir) if out_dir is not None else layout.StudyDir(study_dir).report
    out.mkdir(parents=True, exist_ok=True)
    data, sections = build_sections(study_dir)
    written: dict[str, Path] = {}
    if "html" in formats:
        path = out / HTML_NAME
        layout.atomic_write_text(path, _html(data, sections))
        written["html"] = path
    if "pdf" in formats:
        from ladder.reports.pdf import write_pdf

        path = out / PDF_NAME
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            write_pdf(tmp, data, sections)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        written["pdf"] = path
    return written
