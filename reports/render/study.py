"""The study directory as the report reads it, and the accessors the sections read ``fit.json`` with.

Reads only the study directory (file names from :mod:`ladder.layout`): ``study.yaml``, ``plan.json``,
``results.parquet``, ``curves.parquet``, ``fit.json``, the frozen forecasts (``forecast.json``, ``forecast-2.json``,
...) and, per run, ``spec.json``/``result.json``/``error.json``.
Any of them may be missing or unreadable: :func:`load_study` notes it in ``problems`` and never raises.
``fit.json`` and the frozen forecasts are validated against their contracts on load (a damaged freeze is noted
and left out), and the sections read them as typed objects (:func:`typed_fit`, :func:`why_not`). The plan is read
as data, through :func:`seq`, :func:`maps`, :func:`mapping` and :func:`first`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import ValidationError

from ladder import layout
from ladder.reports.fits.study import forecast_json
from ladder.reports.fits.study.fit_json import FitJson
from ladder.reports.fits.study.fit_json import Section as FitSection


def typed_fit(fit: Any) -> FitJson | None:
    """``fit.json`` validated, for the sections that read it as typed objects; None without a fit, or for one that
    is not the contract (:func:`load_study` has refused such a file already, with the way out in ``problems``)."""
    if not fit:
        return None
    try:
        return FitJson.model_validate(fit)
    except ValidationError:
        return None


def why_not(section: FitSection | None) -> str | None:
    """Why a typed section of fit.json is unavailable (None when it is available)."""
    if section is None:
        return "not in fit.json"
    return None if section.available else (section.reason or "not available")


# reasons that name what the study has: a study that sweeps the axis is never "a study that has no sweep"
SAYS_WHY = ("this study has no", "the study sweeps", "the study compares")


def no_section(what: str, why: str) -> str:
    """Why a section is missing, in one sentence: "this study has no {what} ({why})", or ``why`` alone when it says
    that already (fit.json's reasons often begin "this study has no ..."), so that no sentence stutters."""
    if why.strip().lower().startswith(SAYS_WHY):
        return why
    return f"this study has no {what} ({why})"


def seq(x: Any) -> list:
    """``x`` as a list when it is one (a list or tuple), else empty: fit.json entries may be anything."""
    return list(x) if isinstance(x, (list, tuple)) else []


def maps(x: Any) -> list[Mapping]:
    return [m for m in seq(x) if isinstance(m, Mapping)]


def mapping(x: Any) -> Mapping:
    return x if isinstance(x, Mapping) else {}


def first(*vals: Any) -> Any:
    """The first value that is neither None nor NaN."""
    for v in vals:
        if v is not None and not (isinstance(v, float) and math.isnan(v)):
            return v
    return None


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
    env: dict = field(default_factory=dict)  # versions, source, hardware, date (``environment.environment()``)
    forecasts: list[forecast_json.FrozenForecast] = field(default_factory=list)  # the sound freezes, oldest first
    results_sha256: str | None = None  # the hash of the fitted rows of results.parquet (as a freeze records it)
    results_sha256_older: str | None = None  # the same table's hash as a freeze by an older ladder records it
    stale_fit: str | None = None  # why fit.json is not of the results now (fitted on another results table)


def _read_json(path: Path, problems: list[str], what: str) -> Any:
    if os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path):  # a pipe would block for ever
        problems.append(f"{what} is not a regular file (a pipe or a device)")
        return None
    try:
        return layout.loads_json(path.read_text(encoding="utf-8"))
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
    if data.has_results:
        from ladder.reports.fits.study.table import results_hashes

        try:
            data.results_sha256, data.results_sha256_older = results_hashes(runs)
        except Exception as exc:  # noqa: BLE001 - a table that cannot be hashed only loses the check
            problems.append(f"{layout.RESULTS_PARQUET} cannot be hashed ({exc})")
    for number, path in sd.forecasts():
        record = _read_json(path, problems, path.name)
        if record is None:
            continue
        frozen, problem = forecast_json.parse(record)
        if frozen is None:
            problems.append(f"{path.name} is damaged ({problem})")
        else:
            data.forecasts.append(frozen.model_copy(update={"number": number}))  # the file's number is the freeze's
    if sd.curves.is_file():
        try:
            data.curves = pd.read_parquet(sd.curves)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{layout.CURVES} is unreadable ({exc})")
    fit = _read_json(sd.fit, problems, layout.FIT)
    if fit is not None and not isinstance(fit, dict):
        problems.append(f"{layout.FIT} is not a JSON object")
        fit = None
    fitted_on = None
    if fit:
        from ladder.errors import FitError
        from ladder.reports.fits.study.fit_json import parse_fit_json

        try:
            fitted_on = parse_fit_json(fit, layout.FIT).meta.results_sha256  # the typed contract the sections read
        except FitError as exc:
            problems.append(str(exc))
            fit = None
    data.fit = fit or {}
    if fitted_on and data.results_sha256 and fitted_on != data.results_sha256:  # as `ladder hero` refuses it
        data.stale_fit = (
            f"the fit is older than the results ({layout.FIT} was fitted on another results table): its laws, "
            f"forecasts and recommendation are not of these runs; refit with `ladder fit {layout.shell_word(sd.path)}` and render "
            "the report again"
        )
    finished: list[str] = []
    data.runs = _merge_planned(sd, runs, data.plan, data.devices, problems, finished)
    if finished:  # collect's table, the fit and this report leave these runs out: say so before the stale hash
        shown = ", ".join(finished[:4]) + (f" and {len(finished) - 4} more" if len(finished) > 4 else "")
        said = (
            f"finished after the last collect ({shown}): the results table, the fit and this report leave them out"
            if data.has_results
            else f"finished, but the study has no readable {layout.RESULTS_PARQUET} ({shown}): this report leaves "
            "their results out"
        )
        data.stale_fit = (
            f"{len(finished)} run(s) {said}; run `ladder collect {layout.shell_word(sd.path)}` and `ladder fit {layout.shell_word(sd.path)}`, "
            "then render the report again"
        )
    data.problems = problems
    return data


ENDED = ("done", "failed", "diverged", "cancelled", "corrupt", "damaged")  # a collected run's final states


def _merge_planned(
    sd: layout.StudyDir,
    runs: pd.DataFrame,
    plan: dict,
    devices: dict[str, int],
    problems: list[str],
    finished: list[str] | None = None,
) -> pd.DataFrame:
    """The results table plus one row per planned run that has none (failed before a result, or pending), in
    plan order; also tallies the devices the runs trained on (``result.json``), and lists in ``finished`` the
    ladder's runs (not the hero's) whose result.json says done while the table has them in another state or not
    at all: they finished after the last collect."""
    ids = [str(r) for r in seq(plan.get("runs"))]
    have = set(runs["run_id"].astype(str)) if "run_id" in runs else set()
    ended = (  # collect's final states (ladder.books.run_status.FINAL): a result.json cannot change them
        set(runs.loc[runs["status"].astype(str).isin(ENDED), "run_id"].astype(str))
        if {"run_id", "status"} <= set(runs.columns)
        else set()
    )
    heroes = (
        set(runs.loc[runs["role"].astype(str).str.strip().str.lower() == "hero", "run_id"].astype(str))
        if {"run_id", "role"} <= set(runs.columns)
        else set()
    )
    extra = []
    for run_id in ids + sorted(set(runs.get("run_id", pd.Series(dtype=str)).astype(str)) - set(ids)):
        rd = sd.run(run_id)
        # no is_file() first: it raises where the run folder cannot be searched (EACCES), and one such run must
        # not stop the report of the rest; _read_json reads a missing or unreadable file as None
        res = _read_json(rd.result, [], "")
        if isinstance(res, dict) and res.get("device_name"):
            devices[str(res["device_name"])] = devices.get(str(res["device_name"]), 0) + 1
        done_now = isinstance(res, dict) and res.get("status") == "done" and run_id not in ended
        if run_id in have:
            if done_now and finished is not None and run_id not in heroes:
                finished.append(run_id)
            continue
        spec = mapping(_read_json(rd.spec, problems, f"runs/{run_id}/{layout.SPEC}"))
        if done_now and finished is not None and str(spec.get("role") or "").strip().lower() != "hero":
            finished.append(run_id)
        err = _read_json(rd.error, problems, f"runs/{run_id}/{layout.ERROR}")
        shape = mapping(spec.get("shape"))
        status = "failed" if err or (isinstance(res, dict) and res.get("status") == "failed") else "pending"
        hero_done = done_now and str(spec.get("role") or "").strip().lower() == "hero"
        if hero_done:  # never fitted: done is done (what `forecast score` scored), collected or not
            status = "done"
        reason = None
        if isinstance(err, dict):
            reason = f"{err.get('error_type') or 'error'}: {err.get('message') or ''}".strip()
        elif isinstance(res, dict):
            reason = res.get("reason")
        extra.append(
            {
                "run_id": run_id,
                "variant": spec.get("variant", "?"),
                # a hero planned after the last collect is a hero run, never a pending rung of the ladder
                "role": str(spec.get("role") or "rung"),
                "scale": str((mapping(spec.get("axes"))).get("budget", (mapping(spec.get("axes"))).get("size", ""))),
                "d_model": shape.get("d_model"),
                "n_layers": shape.get("n_layers"),
                "n_heads": shape.get("n_heads"),
                "n_kv_heads": shape.get("n_kv_heads"),
                "tie_embeddings": shape.get("tied"),
                "params": spec.get("params"),
                "tokens": spec.get("tokens"),
                "flops": spec.get("flops"),
                "batch_tokens": spec.get("batch_tokens"),
                "lr": spec.get("lr"),
                "steps": spec.get("steps"),
                "status": status,
                **(
                    {k: res.get(k) for k in ("final_train_loss", "final_eval_loss")}
                    | {"loss": res.get("final_eval_loss")}
                    if hero_done
                    else {}
                ),
                "reason": reason,
                "_from_error": bool(err),
            }
        )
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


def status_counts(runs: pd.DataFrame) -> dict[str, int]:
    """Runs per status, in the order done, diverged, failed, pending, then any other."""
    if not len(runs) or "status" not in runs:
        return {}
    vc = runs["status"].fillna("unknown").astype(str).value_counts()
    order = ["done", "diverged", "failed", "pending"]
    return {k: int(vc[k]) for k in order + [k for k in vc.index if k not in order] if k in vc}
