"""``ladder run``: the whole ladder in one resumable command.

plan -> prepare data -> sanity check -> submit -> wait (live display) -> evaluate (lm-eval, when the study
asks) -> collect -> fit -> report.
Every stage is idempotent and skips what is already done, so running the command again after Ctrl-C, a crash
or a reboot continues where it stopped: finished runs are kept, interrupted ones resume from their
checkpoints, live jobs are waited for rather than submitted twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ladder import layout
from ladder.plan.planner import expand, study_dir_for, write_plan
from ladder.studies import load_study
from ladder.studies.spec import ExecutorSpec, StudySpec

SANITY = "sanity.json"


@dataclass
class RunOutcome:
    study_dir: Path
    stages: list[str] = field(default_factory=list)
    runs_done: int = 0
    runs_failed: list[str] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)  # run id -> "<state>: <error>" of each failed run
    eval_failures: dict[str, str] = field(default_factory=dict)  # run id -> why its lm-eval failed
    report: Path | None = None
    fit: Path | None = None
    fit_result: Any = None
    fit_error: str | None = None
    stopped_after: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """What ``ladder run --json`` prints (the fit itself is in fit.json)."""
        return {
            "study_dir": str(self.study_dir),
            "stages": self.stages,
            "runs_done": self.runs_done,
            "runs_failed": self.runs_failed,
            "failures": self.failures,
            "eval_failures": self.eval_failures,
            "fit": str(self.fit) if self.fit else None,
            "fit_error": self.fit_error,
            "report": str(self.report) if self.report else None,
            "stopped_after": self.stopped_after,
            "ok": not self.runs_failed and not self.fit_error and not self.eval_failures,
        }


def eval_line(res: dict, tasks: list[str] | None) -> str:
    """The eval stage's line from :func:`ladder.jobs.submit.submit_evals`'s answer. A study run again after its
    evaluations said "0 runs evaluated", as if lm-eval had been skipped or had failed."""
    what = ", ".join(tasks) if tasks else "the shipped offline tasks"
    failed = res.get("failed") or {}
    if not res["evaluated"] and not failed:
        return f"eval: nothing to evaluate: every finished run already has its lm-eval results ({what})"
    return f"eval: {len(res['evaluated'])} runs evaluated with lm-eval ({what})" + (
        f", {len(failed)} failed" if failed else ""
    )


def _say(log: Callable[[str], None] | None, msg: str) -> None:
    if log:
        log(msg)


def prepare(study: StudySpec, *, progress: bool = True) -> Any:
    """The study's tokenized data, from the shared cache (prepared first when missing)."""
    from ladder.model.data.prepare import prepare_data

    return prepare_data(study.data, study.model.vocab_size, progress=progress)


def sanity(study: StudySpec, study_dir: Path, prepared: Any, *, log=None) -> dict:
    """Overfit a tiny set with the study's smallest shape, once per study directory (the verdict is kept)."""
    from ladder.model.evaluation.sanity import run_sanity

    path = Path(study_dir) / SANITY
    if path.is_file():
        try:
            previous = json.loads(path.read_text())
            if previous.get("passed"):
                return previous
        except ValueError:
            pass
    plan = expand(study)
    smallest = min(plan.runs, key=lambda r: r.shape.params_total).shape
    report = run_sanity(prepared, smallest)
    verdict = report.to_dict()
    layout.atomic_write_json(path, verdict)
    return verdict


def run_study(
    study_ref: str | Path,
    *,
    out_dir: Path | None = None,
    executor: ExecutorSpec | None = None,
    log: Callable[[str], None] | None = None,
    on_status: Callable[[list], None] | None = None,
    skip_sanity: bool = False,
    poll_s: float = 2.0,
) -> RunOutcome:
    from ladder.books.collect import collect_and_write, mixed_data
    from ladder.books.run_status import refuse_dropping_live_runs, wait
    from ladder.errors import StateError
    from ladder.jobs.submit import submit

    study = load_study(study_ref)
    study_dir = study_dir_for(study_ref, study, out_dir)
    outcome = RunOutcome(study_dir=study_dir)
    # not "`ladder run STUDY`": that drops --out (and plans a second study in ./ladder-runs/<name>)
    layout.refuse_if_not_a_file(layout.StudyDir(study_dir).fit, "run the same command again")

    plan = expand(study)
    refuse_dropping_live_runs(study_dir, [r.run_id for r in plan.runs])  # before anything is written
    written = write_plan(plan, study_dir)
    _say(
        log,
        f"plan: {study_dir} ({len(written.new)} new run{'' if len(written.new) == 1 else 's'}, {len(written.existing)} already planned"
        # an edited study file: why its runs are new, and that the kept ones are not fitted (as `ladder plan` says)
        + (
            f", {len(written.orphans)} run directories of earlier plans kept{written.earlier}"
            if written.orphans
            else ""
        )
        + ")",
    )
    outcome.stages.append("plan")

    prepared = prepare(study)
    _say(log, f"data: {prepared.train_tokens:,} train and {prepared.val_tokens:,} validation tokens ({prepared.root})")
    outcome.stages.append("data")

    if study.sanity_check and not skip_sanity:
        verdict = sanity(study, study_dir, prepared, log=log)
        if not verdict.get("passed"):
            raise StateError(
                f"sanity check failed: {verdict.get('diagnosis')} (details in {study_dir / SANITY}); "
                "fix the pipeline or run with --skip-sanity"
            )
        _say(
            log,
            f"sanity: passed (final loss {verdict.get('final_loss'):.4f} nats/token, generation reproduces the text)",
        )
        outcome.stages.append("sanity")

    ex = executor or study.executor
    result = submit(study_dir, ex, detach=False)  # waited for here: Ctrl-C stops the workers too
    refused_all = getattr(result, "refused", None) or {}  # (a stand-in submit may know of no refusals)
    _say(
        log,
        f"submit: {len(result.submitted)} submitted to {ex.kind}, {len(result.skipped)} skipped"
        + (f", {len(refused_all)} refused (their folders cannot be written)" if refused_all else ""),
    )
    outcome.stages.append("submit")

    rows = wait(study_dir, poll_s=poll_s, on_update=on_status)
    outcome.runs_done = sum(r.state == "done" for r in rows)
    outcome.runs_failed = [r.run_id for r in rows if r.state in ("failed", "diverged", "corrupt")]
    outcome.failures = {r.run_id: f"{r.state}: {r.error or 'no error recorded'}" for r in rows
                        if r.run_id in outcome.runs_failed}  # fmt: skip
    _say(
        log,
        f"train: {outcome.runs_done} of {len(rows)} runs done"
        + (f", {len(outcome.runs_failed)} failed, diverged or corrupt" if outcome.runs_failed else ""),
    )
    unfinished = [r.run_id for r in rows if r.state not in ("done", "failed", "diverged", "corrupt")]
    refused = {run_id: why for run_id, why in refused_all.items() if run_id in unfinished}
    if refused:  # not "run the same command again to resume them": it would refuse them again
        first = next(iter(refused.values()))
        more = f" (and {len(refused) - 1} more run(s) alike)" if len(refused) > 1 else ""
        others = [r for r in unfinished if r not in refused]
        raise StateError(
            f"{', '.join(refused)} not trained: {first}{more}"
            + (f"; {len(others)} other runs ended without finishing ({', '.join(others)})" if others else "")
        )
    if unfinished:
        raise StateError(
            f"{len(unfinished)} runs ended without finishing ({', '.join(unfinished)}); "
            # not "`ladder run`": without STUDY that trains the built-in default study, and the same command keeps
            # its --out, --executor and --no-fit-check
            f"see `ladder status {layout.shell_word(study_dir)}` and run the same command again to resume them"
        )
    outcome.stages.append("train")

    if study.evals is not None:
        from ladder.jobs.submit import submit_evals

        ev = study.evals
        res = submit_evals(
            study_dir,
            ex,
            tasks=ev.tasks,
            limit=ev.limit,
            include_path=Path(ev.include_path) if ev.include_path else None,
        )
        outcome.eval_failures = dict(res.get("failed") or {})
        _say(log, eval_line(res, ev.tasks))
        outcome.stages.append("eval")

    collected, _ = collect_and_write(study_dir)
    _say(log, f"collect: {len(collected.runs)} runs into {layout.StudyDir(study_dir).results_parquet}")
    outcome.stages.append("collect")
    mixed = mixed_data(collected.runs, study_dir)  # runs trained on other preparations of the corpus: said
    if mixed:
        _say(log, f"warning: {mixed}")

    from ladder.errors import FitError
    from ladder.reports.fits import fit_study

    sd = layout.StudyDir(study_dir)
    try:
        fitted = fit_study(collected.runs, study=study, study_dir=study_dir)
    except FitError as exc:
        # the runs are done and kept; the report still shows them, and says why there is no fit
        outcome.fit_error = str(exc)
        sd.fit.unlink(missing_ok=True)
        _say(log, f"fit: not possible: {exc}")
    else:
        fitted.warnings[:0] = [mixed] if mixed else []  # fit.json holds it, as `ladder fit` writes it
        fitted.write(sd.fit)
        outcome.fit = sd.fit
        outcome.fit_result = fitted
        _say(log, f"fit: {sd.fit}")
        outcome.stages.append("fit")

    try:
        from ladder.reports.render import render_report
    except ImportError:  # the report stage arrives with its own issue
        outcome.stopped_after = "fit"
        return outcome
    paths = render_report(sd.path)
    outcome.report = paths.get("html")
    _say(log, f"report: {', '.join(str(p) for p in paths.values())}")
    outcome.stages.append("report")
    return outcome
