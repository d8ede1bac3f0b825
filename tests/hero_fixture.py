"""A planned, fake-trained, collected and fitted chinchilla ladder for the forecast loop (no training).

Every rung's final eval loss follows ``L = E + A / N^alpha + B / D^beta`` with 0.3% noise, and its eval curve is
``L_final x R(f)`` at the fraction f of its tokens, with one shape ``R`` for every run (what the partial-curve
forecast assumes), so a hero whose curve stops early has a known final loss.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ladder import layout
from ladder.model.config import RunSpec

LAW = {"E": 1.9, "A": 40.0, "alpha": 0.33, "B": 120.0, "beta": 0.30}
SIZES = ["25K", "35K", "50K", "71K", "100K", "141K"]


def law_loss(n: float, d: float) -> float:
    return LAW["E"] + LAW["A"] / n ** LAW["alpha"] + LAW["B"] / d ** LAW["beta"]


def shape_r(f: float) -> float:
    """L(f) / L_final: the same for every run (a cosine-like approach to the final loss)."""
    return 1.0 + 0.35 * (f**-0.6 - 1.0)


def study_dict(*, name: str = "hero loop", sizes=SIZES, hero: str | dict = "400K", budgets=None, **extra) -> dict:
    return {
        "name": name,
        "data": {"corpus": "embedded", "tokenizer": "train", "seq_len": 64},
        "model": {"vocab_size": 256, "head_dim": 16, "ffn_multiple": 8, "aspect_ratio": 16},
        "ladder": {"sizes": list(sizes), "tokens_per_param": 20, **({"budgets": list(budgets)} if budgets else {})},
        "training": {"lr_max": 0.02, "batch_min_sequences": 8, "evals_per_run": 10},
        "hero": hero if isinstance(hero, dict) else {"params": hero},
        "executor": {"kind": "local", "hardware": "cpu"},
        "sanity_check": False,
        **extra,
    }


def eval_lines(spec: RunSpec, final: float, upto: float = 1.0) -> str:
    """metrics.jsonl of a run whose eval curve is final x R(f), up to the fraction ``upto`` of its steps."""
    lines = []
    per_step = spec.batch_tokens
    for step in range(spec.eval_interval, spec.steps + 1, spec.eval_interval):
        if step / spec.steps > upto + 1e-9:
            break
        f = step / spec.steps
        lines.append({"kind": "train", "step": step, "tokens": step * per_step, "loss": final * shape_r(f) * 1.01})
        lines.append({"kind": "eval", "step": step, "tokens": step * per_step, "eval_loss": final * shape_r(f)})
    if upto >= 1 and (not lines or lines[-1]["step"] != spec.steps):
        lines.append({"kind": "train", "step": spec.steps, "tokens": spec.tokens, "loss": final * 1.01})
        lines.append({"kind": "eval", "step": spec.steps, "tokens": spec.tokens, "eval_loss": final})
    return "".join(json.dumps(r) + "\n" for r in lines)


def train(sd: layout.StudyDir, spec: RunSpec, final: float, upto: float = 1.0, split: bool = False) -> None:
    """Give a run its files: the eval curve up to ``upto``, and a done result.json when it reached the end (with
    ``split``, also its loss on in-context repeats, 30% of the targets at 0.9x the novel tokens' loss)."""
    rd = sd.run(spec.run_id)
    rd.metrics.write_text(eval_lines(spec, final, upto), encoding="utf-8")
    if upto >= 1:
        kinds = {}
        if split:
            novel = final / (0.3 * 0.9 + 0.7)
            kinds = {"final_eval_loss_repeats": 0.9 * novel, "final_eval_loss_novel": novel, "eval_repeat_share": 0.3}
        layout.atomic_write_json(
            rd.result,
            {
                "status": "done",
                "run_id": spec.run_id,
                "steps": spec.steps,
                "tokens": spec.tokens,
                "flops": spec.flops,
                "final_train_loss": final * 1.01,
                "final_eval_loss": final,
                "wall_time_s": 1.0,
                "tokens_per_s": 1e4,
                "restarts": 0,
                **kinds,
            },
        )


def make_ladder(
    root: Path,
    *,
    seed: int = 0,
    noise: float = 0.003,
    fit: bool = True,
    n_boot: int = 30,
    skip: tuple[str, ...] = (),
    split: bool = False,
    **kw: Any,
) -> Path:
    """Plan the study in ``root``, train every rung (sizes in ``skip`` stay planned; ``split``: results with the
    loss by kind of target), collect and fit."""
    from ladder.plan.planner import expand, write_plan
    from ladder.studies.spec import parse_study

    study = parse_study(study_dict(**kw))
    plan = expand(study)
    write_plan(plan, root)
    sd = layout.StudyDir(Path(root))
    rng = np.random.default_rng(seed)
    for spec in plan.runs:
        if spec.axes.get("size") in skip:
            continue
        train(sd, spec, law_loss(spec.params, spec.tokens) * float(np.exp(rng.normal(0, noise))), split=split)
    refresh(root, fit=fit, n_boot=n_boot)
    return Path(root)


def refresh(root: Path, *, fit: bool = True, n_boot: int = 30) -> None:
    """Collect the study again and (``fit``) write its fit.json with the real fit code."""
    from ladder.books.collect import collect, write_collected
    from ladder.plan.planner import read_plan
    from ladder.reports.fits import fit_study

    write_collected(root, collect(root))
    if fit:
        from ladder.books.collect import read_results

        study, _ = read_plan(root)
        fit_study(read_results(root), study=study, n_boot=n_boot).write(layout.StudyDir(Path(root)).fit)


def hero_spec(root: Path) -> RunSpec:
    from ladder.plan.planner import read_plan

    return [s for s in read_plan(root)[1] if s.role == "hero"][-1]
