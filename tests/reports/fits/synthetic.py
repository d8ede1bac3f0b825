"""Synthetic ladders with a known truth, shared by the fit tests (and the report's hyperparameter section):
a study whose losses follow a Chinchilla law (untied worse by a constant), and an LR x batch grid around Step
Law's optima; and a valid fit.json holding only the sections a test gives (:func:`fit_json_of`, its JSON
:func:`fit_dict_of`)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ladder.books.collect import run_record
from ladder.plan.planner import expand
from ladder.studies.spec import parse_study

# The truth: L(N, D) = E + A / N^alpha + B / D^beta (N non-embedding), untied worse by a constant.
E, A, ALPHA, B, BETA = 1.7, 40.0, 0.34, 40.0, 0.28
UNTIED_OFFSET = 0.03


def truth(n, d):
    return E + A / np.asarray(n, dtype=float) ** ALPHA + B / np.asarray(d, dtype=float) ** BETA


def make_study(**sections):
    base = {
        "name": "synthetic",
        "data": {"seq_len": 256},
        "model": {"vocab_size": 512, "head_dim": 16, "ffn_multiple": 8, "aspect_ratio": 16},
        "ladder": {
            "sizes": ["25K", "50K", "100K", "200K", "400K"],
            "param_count": "non_embedding",
            "tokens_per_param": 20,
        },
        "ablations": {"tie_embeddings": [True, False]},
        "training": {"batch_min_sequences": 16},
        "hero": {"params": "3.2M"},
    }
    base.update(sections)
    return parse_study(base)


def study_table(study, *, noise=0.004, seed=0, loss_fn=None, offset=UNTIED_OFFSET):
    """``results.parquet`` as ``ladder collect`` writes it, for the study's planned runs, losses from the truth
    (+ ``offset`` for untied, + ``loss_fn(run)``) with multiplicative noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for run in expand(study).runs:
        loss = float(truth(run.params, run.tokens)) + (0.0 if run.shape.tied else offset)
        if loss_fn is not None:
            loss += loss_fn(run)
        loss *= math.exp(rng.normal(0, noise))
        result = {
            "status": "done",
            "final_eval_loss": loss,
            "final_train_loss": loss,
            "tokens": run.tokens,
            "flops": run.flops,
            "wall_time_s": 1.0,
        }
        rows.append(run_record(run, result))
    return pd.DataFrame(rows)


# Step Law (Li et al. 2025): eta* = 1.79 N^-0.713 D^0.307, B* = 0.58 D^0.571 (tokens)
STEP_K_LR, STEP_A, STEP_B = 1.79, -0.713, 0.307
STEP_K_B, STEP_BD = 0.58, 0.571
CU, CV, RHO = 0.015, 0.01, 0.5  # curvatures of ln loss; the LR optimum moves as B^RHO


def step_lr(n, d):
    return STEP_K_LR * n**STEP_A * d**STEP_B


def step_batch(d):
    return STEP_K_B * d**STEP_BD


def step_law_grid(sizes=(2e7, 6e7, 2e8), ratios=(8, 32, 128), *, noise=0.002, seed=0) -> pd.DataFrame:
    """An LR x batch grid at every (N, D = ratio N): ln loss = ln L0(N, D) + CU (u - RHO v)^2 + CV v^2 with
    u, v the log distances from Step Law's optima; the grids are offset so they never hit the optimum."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in sizes:
        for r in ratios:
            d = r * n
            l0 = 1.69 + 406.4 / n**0.34 + 410.7 / d**0.28  # Chinchilla's constants
            for lr in step_lr(n, d) * 1.3 * 2.0 ** np.arange(-3, 4):
                for b in step_batch(d) * 0.8 * 2.0 ** np.arange(-2, 3):
                    u, v = math.log(lr / step_lr(n, d)), math.log(b / step_batch(d))
                    loss = l0 * math.exp(CU * (u - RHO * v) ** 2 + CV * v**2) + rng.normal(0, noise)
                    rows.append({"params": n, "tokens": d, "loss": loss, "lr": lr, "batch_size": b})
    return pd.DataFrame(rows)


def fit_json_of(sections: dict):
    """fit.json validated (:class:`~ladder.reports.fits.study.fit_json.FitJson`) with only ``sections`` filled: each
    given section's keys over the least a valid file holds (a loss law not fitted, no hero, every other section
    unavailable), for a test of a reader (the terminal summary) that needs a few sections only."""
    from ladder.reports.fits.study.fit_json import validate

    return validate(fit_dict_of(sections))


def fit_dict_of(sections: dict) -> dict:
    """The JSON of :func:`fit_json_of`, as fit.json would hold it, for a reader that takes the file's JSON (the
    report's ``StudyData.fit``)."""
    from ladder.reports.fits.study.fit_json import SCHEMA_VERSION

    off = {"available": False, "reason": "not in this test"}
    base = {
        "loss": {**off, "variant": "default", "variant_choice": "the only variant"},
        "loss_by_variant": {},
        "noise_floor": {},
        "predictions": [],
        "hero": {},
        "compute_optimal": {"identifiable": False, "reason": "not in this test"},
        **{k: dict(off) for k in ("isoflop", "hparams", "tied_vs_untied", "depth_vs_width", "recommendation")},
        **{k: dict(off) for k in ("tasks", "in_context")},
        "excluded": [],
        "warnings": [],
        "notes": [],
        "meta": {
            "schema_version": SCHEMA_VERSION,
            "n_runs": 0,
            "n_used": 0,
            "n_boot": 0,
            "seed": 0,
            "ladder_version": "test",
            "created_at": "2026-01-01T00:00:00",
        },
    }
    for key, value in sections.items():
        base[key] = {**base[key], **value} if isinstance(value, dict) and isinstance(base[key], dict) else value
    return base
