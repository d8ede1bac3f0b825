"""A planned micro-study whose runs are given their outcomes by writing the files a run leaves (no training):
done, crashed, cancelled, interrupted, diverged, a torn metrics line, a deleted or garbage result.json on a
finished run, an unreadable lm-eval file. ``ladder status`` and ``ladder collect`` must find each in the books."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ladder import layout
from ladder.books import job_records
from ladder.model.config import RunSpec
from ladder.plan.planner import expand, read_plan, write_plan
from ladder.studies.spec import parse_study

SIZES = ["4K", "6K", "8K", "11K", "16K", "23K"]


def plan_micro(root: Path) -> list[RunSpec]:
    study = parse_study(
        {
            "name": "books",
            "data": {"seq_len": 32, "validation_tokens": 1024},
            "model": {"vocab_size": 320, "head_dim": 16, "ffn_multiple": 8, "aspect_ratio": 16},
            "ladder": {"sizes": SIZES, "tokens_per_param": 10},
            "ablations": {"tie_embeddings": [True, False]},
            "training": {"batch_min_sequences": 8, "logs_per_run": 10, "evals_per_run": 4},
            "hero": {"params": "1M"},
            "sanity_check": False,
        }
    )
    write_plan(expand(study), root)
    return read_plan(root)[1]


def metrics_lines(spec: RunSpec, upto: int, *, eval_loss: float = 4.0) -> list[str]:
    """The metrics.jsonl lines of a run that completed ``upto`` steps (a train record every log_interval and at
    the end, an eval record every eval_interval and at the end)."""
    per_step = spec.sequences_per_batch * spec.data.seq_len
    lines = []
    for step in range(1, upto + 1):
        if step % spec.log_interval == 0 or step == spec.steps:
            lines.append(
                {
                    "kind": "train",
                    "step": step,
                    "tokens": step * per_step,
                    "loss": 6.0 - step / spec.steps,
                    "lr": spec.lr,
                    "grad_norm": 0.5,
                    "tokens_per_s": 1000.0,
                    "mfu": 0.1,
                    "elapsed_s": step,
                }
            )
        if step % spec.eval_interval == 0 or step == spec.steps:
            lines.append(
                {
                    "kind": "eval",
                    "step": step,
                    "tokens": step * per_step,
                    "eval_loss": eval_loss + (spec.steps - step) / spec.steps,
                }
            )
    return [json.dumps(r) + "\n" for r in lines]


def done_result(spec: RunSpec, loss: float) -> dict:
    return {
        "status": "done",
        "run_id": spec.run_id,
        "steps": spec.steps,
        "tokens": spec.tokens,
        "flops": spec.flops,
        "final_train_loss": loss + 0.1,
        "final_eval_loss": loss,
        "wall_time_s": 1.0,
        "tokens_per_s": 1000.0,
        "restarts": 0,
    }


def finish(sd: layout.StudyDir, spec: RunSpec, loss: float = 4.0) -> layout.RunDir:
    """A run that trained to its end: full metrics, model/, result.json."""
    rd = sd.run(spec.run_id)
    layout.atomic_write_text(rd.metrics, "".join(metrics_lines(spec, spec.steps, eval_loss=loss)))
    rd.model.mkdir(exist_ok=True)
    (rd.model / "config.json").write_text("{}")
    layout.atomic_write_json(rd.result, done_result(spec, loss))
    return rd


def partial(sd: layout.StudyDir, spec: RunSpec, steps: int, *, checkpoint: bool = True) -> layout.RunDir:
    """A run stopped after ``steps`` steps, with a checkpoint there."""
    rd = sd.run(spec.run_id)
    rd.metrics.write_text("".join(metrics_lines(spec, steps)))
    if checkpoint:
        rd.checkpoint_dir(steps).mkdir()
        layout.atomic_write_json(rd.checkpoint_pointer, {"step": steps, "path": rd.checkpoint_dir(steps).name})
    return rd


def record_job(sd: layout.StudyDir, run_id: str, *, cancelled: bool, job_id: str = "999999999") -> None:
    """A local job for the run in jobs.json; ``job_id`` a live process id makes the run ``queued``."""
    with job_records.editing(sd) as book:
        book.setdefault(run_id, []).append(
            job_records.JobRecord(
                executor="local",
                job_ids=[job_id],
                folder="submitit/local/%j",
                submitted_at=job_records.now(),
                cancelled=cancelled,
            )
        )


def steps_of(spec: RunSpec) -> int:
    return max(2, spec.steps // 2)


def per_step(spec: RunSpec) -> int:
    return spec.sequences_per_batch * spec.data.seq_len


# each outcome :func:`outcomes` gives a run, and the state the books (status, collect) must give it
STATE_OF = {
    "done": "done",
    "crashed": "failed",
    "cancelled": "cancelled",
    "torn": "done",
    "deleted_result": "corrupt",
    "garbage_result": "corrupt",
    "bad_lm_eval": "done",
    "planned": "planned",
    "interrupted": "interrupted",
    "diverged": "diverged",
    "raised": "failed",
    "corrupt_line": "done",
}


def outcomes(root: Path) -> dict[str, RunSpec]:
    """Plan the micro-study in ``root`` and give each run its outcome; returns {outcome: spec}."""
    specs = plan_micro(root)
    sd = layout.StudyDir(root)
    names = list(STATE_OF)
    assert len(specs) >= len(names)
    by = dict(zip(names, specs))

    finish(sd, by["done"], 3.5)

    rd = partial(sd, by["crashed"], steps_of(by["crashed"]), checkpoint=False)
    layout.atomic_write_json(rd.result, {"status": "failed", "error": "boom"})

    partial(sd, by["cancelled"], steps_of(by["cancelled"]))
    record_job(sd, by["cancelled"].run_id, cancelled=True)

    # a metrics.jsonl cut mid-line: the curve stops half way, result.json holds the run's numbers
    rd = finish(sd, by["torn"], 3.25)
    lines = metrics_lines(by["torn"], by["torn"].steps, eval_loss=3.25)
    cut = lines[: len(lines) // 2]
    rd.metrics.write_text("".join(cut) + lines[len(lines) // 2][:17])

    rd = finish(sd, by["deleted_result"], 3.0)
    rd.result.unlink()
    rd = finish(sd, by["garbage_result"], 3.0)
    rd.result.write_text('{"status": "done", "final_')

    rd = finish(sd, by["bad_lm_eval"], 3.1)
    rd.lm_eval.mkdir()
    (rd.lm_eval / "results_a.json").write_text(
        json.dumps({"results": {"task_a": {"acc,none": 0.5, "acc_stderr,none": 0.1}}})
    )
    (rd.lm_eval / "results_b.json").write_text("{not json")

    partial(sd, by["interrupted"], steps_of(by["interrupted"]))

    rd = partial(sd, by["diverged"], 3, checkpoint=False)
    layout.atomic_write_json(
        rd.result,
        {
            "status": "diverged",
            "run_id": by["diverged"].run_id,
            "steps": 3,
            "tokens": 3 * per_step(by["diverged"]),
            "flops": 3.0 * per_step(by["diverged"]) * by["diverged"].flops_per_token,
            "final_train_loss": None,
            "final_eval_loss": None,
            "wall_time_s": 1.0,
            "diverged_at_step": 4,
            "reason": "non-finite loss at step 4",
        },
    )

    # raised before writing a result: error.json only
    rd = partial(sd, by["raised"], steps_of(by["raised"]), checkpoint=False)
    layout.atomic_write_json(rd.error, {"error_type": "DataError", "message": "no such corpus /x"})

    # a finished run with one corrupt line in the middle of its metrics
    rd = finish(sd, by["corrupt_line"], 3.4)
    lines = metrics_lines(by["corrupt_line"], by["corrupt_line"].steps, eval_loss=3.4)
    lines[1] = "{this is not json}\n"
    rd.metrics.write_text("".join(lines))
    return by


# how :func:`damage_run` can damage a run
DAMAGES = ("deleted_dir", "deleted_spec", "corrupt_spec", "wrong_spec", "corrupt_result")


def damage_run(root: Path, run_id: str, how: str) -> None:
    """Damage one run of the study in ``root``: its directory or spec.json deleted, spec.json cut mid-record
    (``corrupt_spec``) or valid JSON of the wrong shape (``wrong_spec``), or result.json not JSON."""
    rd = layout.StudyDir(root).run(run_id)
    if how == "deleted_dir":
        shutil.rmtree(rd.path)
    elif how == "deleted_spec":
        rd.spec.unlink()
    elif how == "corrupt_spec":
        rd.spec.write_text('{"run_id": "abc", "vari')
    elif how == "wrong_spec":
        rd.spec.write_text('{"run_id": 3}')
    elif how == "corrupt_result":
        rd.result.write_text("{not json")
    else:
        raise AssertionError(how)


def status_row(
    state: str,
    done: int,
    *,
    tokens_per_s: float | None = None,
    flops_spent: float | None = None,
    elapsed_s: float | None = None,
):
    """One run of ``ladder status``'s table (``RunStatus``) of 1,000 planned tokens, for the progress-line tests;
    with ``flops_spent``, its planned FLOPs are 6 per token; ``elapsed_s``: its wall time so far."""
    from ladder.books.run_status import RunStatus

    extra = {} if flops_spent is None else {"flops_spent": flops_spent, "flops_planned": 1000.0 * 6}
    return RunStatus(
        run_id="r",
        variant="base",
        size="4K",
        state=state,
        tokens_done=done,
        tokens_planned=1000,
        progress=done / 1000,
        train_loss=None,
        eval_loss=None,
        tokens_per_s=tokens_per_s,
        eta_s=None,
        job_id=None,
        executor=None,
        error=None,
        elapsed_s=elapsed_s,
        **extra,
    )
