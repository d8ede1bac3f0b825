"""Re-trial 16a of issue 28, a study folder written by an older ladder: planned and trained with an older checkout,
then the current tool run on the folder (status, collect, fit, report, the forecast loop, plan --out, submit).
Whatever an older version wrote, the current tool reads it, or says in one line what to do; it never fits old and
new numbers together without a word, and never loses a run from the books.

The folders here are written as the older versions wrote them (a result.json without a field added since), so that
no test needs an old checkout."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tests.cli_helpers import run_cli

OLD_TOKENIZER = '{"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0}}}\n'
NEW_TOKENIZER = '{"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}}}\n'


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _older_ladder_runs_then_one_new(study: Path, new_tokenizer: str) -> list[Path]:
    """The done runs of ``study`` as a ladder from before result.json's ``data`` left them (no ``data``; the final
    model saved with the study's tokenizer), the last one trained since by this ladder on ``new_tokenizer``."""
    runs = sorted(p for p in (study / "runs").iterdir() if (p / "result.json").is_file())
    for rd in runs[:-1]:
        result = json.loads((rd / "result.json").read_text())
        result.pop("data", None)
        (rd / "result.json").write_text(json.dumps(result))
        (rd / "model").mkdir(exist_ok=True)
        (rd / "model" / "tokenizer.json").write_text(OLD_TOKENIZER)
    late = runs[-1]
    result = json.loads((late / "result.json").read_text())
    result["data"] = {
        "key": "b" * 16,
        "tokenizer_sha256": _sha(new_tokenizer),
        "train_tokens": 55_721,
        "val_tokens": 4_669,
    }
    (late / "result.json").write_text(json.dumps(result))
    (late / "model").mkdir(exist_ok=True)
    (late / "model" / "tokenizer.json").write_text(new_tokenizer)
    return runs


def test_runs_of_an_older_ladder_on_another_tokenizer_are_not_fitted_with_new_ones_without_a_word(study, capsys):
    """Runs trained by a ladder from before result.json recorded its ``data``, then the corpus changed in place and a
    run trained by this ladder: collect and fit took the old runs as sharing the new run's preparation ("runs that
    predate the record are taken as sharing it") and fitted a loss under another tokenizer as the same ladder,
    without a word, although each old run's saved model holds the tokenizer it trained with. Now the old runs'
    tokenizer is read from model/tokenizer.json, and both commands name the two preparations."""
    runs = _older_ladder_runs_then_one_new(study, NEW_TOKENIZER)
    words = ("2 different preparations of the corpus", f"tokenizer {_sha(OLD_TOKENIZER)[:12]}", "older ladder")
    r = run_cli(capsys, "collect", study)
    assert r.code == 0 and all(w in r.stderr for w in words) and runs[-1].name in r.stderr, r.stderr
    r = run_cli(capsys, "fit", study)
    assert r.code == 0 and all(w in r.stderr for w in words), r.stderr
    assert any(all(w in x for w in words) for x in json.loads((study / "fit.json").read_text())["warnings"])


def test_runs_of_an_older_ladder_on_the_same_tokenizer_are_one_ladder_with_new_ones(study, capsys):
    """The same, the corpus unchanged: the old runs' tokenizer is the new run's, and nothing is said (the old runs
    recorded no token counts, which is no sign of another preparation)."""
    _older_ladder_runs_then_one_new(study, OLD_TOKENIZER)
    r = run_cli(capsys, "collect", study, "--json")
    assert r.code == 0 and "preparations" not in r.stderr, r.stderr
    r = run_cli(capsys, "fit", study)
    assert r.code == 0 and "preparations" not in r.stderr, r.stderr


def test_collecting_an_older_ladders_study_again_leaves_its_freeze_and_fit_current(study, capsys):
    """An older ladder's study, fitted and frozen, collected again by this ladder: nothing in its runs changed, so
    its freeze and its fit are still of these results. (Reading the old runs' tokenizer into the results table's
    ``data`` column would change the table's hash, and `forecast show` and `report` would call both stale.)"""
    for rd in (study / "runs").iterdir():
        if (rd / "result.json").is_file():
            (rd / "model").mkdir(exist_ok=True)
            (rd / "model" / "tokenizer.json").write_text(OLD_TOKENIZER)
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    r = run_cli(capsys, "collect", study)
    assert r.code == 0 and "preparations" not in r.stderr, r.stderr
    r = run_cli(capsys, "forecast", "show", study)
    assert r.code == 0 and "changed" not in r.stdout + r.stderr, r.stdout + r.stderr


def test_fit_on_an_older_ladders_results_table_still_tells_the_tokenizers_apart(study, capsys):
    """`ladder fit` on the results.parquet an older `ladder collect` wrote (no ``data`` column at all) reads the
    runs' saved tokenizers as collect does, rather than take every run as one preparation."""
    import pandas as pd

    _older_ladder_runs_then_one_new(study, NEW_TOKENIZER)
    assert run_cli(capsys, "collect", study).code == 0
    table = pd.read_parquet(study / "results.parquet")
    late = table["data"].notna()
    table.drop(columns=["data"]).to_parquet(study / "results.parquet", index=False)
    assert late.sum() == 1
    r = run_cli(capsys, "fit", study)
    assert r.code == 0 and "2 different preparations of the corpus" in r.stderr, r.stderr


def _older_ladders_freeze_with_a_run_unfinished(study: Path, capsys) -> dict:
    """``study`` with one rung not trained yet, fitted and frozen; the freeze's ``results_sha256`` rewritten as a
    ladder before 30aca64 wrote it: the hash of every row but the hero runs', the unfinished one too."""
    import pandas as pd

    from ladder.reports.fits.study.table import content_hash, is_hero

    rd = sorted(p for p in (study / "runs").iterdir() if (p / "result.json").is_file())[0]
    for name in ("result.json", "metrics.jsonl"):
        (rd / name).unlink()
    for args in (("collect", study), ("fit", study), ("forecast", "freeze", study)):
        assert run_cli(capsys, *args).code == 0
    df = pd.read_parquet(study / "results.parquet")
    assert (df["status"] != "done").sum() == 1
    record = json.loads((study / "forecast.json").read_text())
    record["results_sha256"] = content_hash(df[~is_hero(df)].reset_index(drop=True).dropna(axis=1, how="all"))
    (study / "forecast.json").write_text(json.dumps(record))
    return record


def test_an_older_ladders_freeze_made_while_a_run_was_unfinished_is_not_called_stale(study, capsys):
    """A freeze by a ladder from before 2026-12-05, made while one rung was still planned, then `ladder collect`,
    `forecast show` and `forecast score` by this one, no run changed: "the data changed after this forecast", and
    the score was marked data_changed, because this ladder hashes the finished rows alone and the older one hashed
    every row. Now the older hash of the same table is recognised."""
    _older_ladders_freeze_with_a_run_unfinished(study, capsys)
    assert run_cli(capsys, "collect", study).code == 0
    r = run_cli(capsys, "forecast", "show", study)
    assert r.code == 0 and "changed" not in r.stdout + r.stderr, r.stdout + r.stderr
    r = run_cli(capsys, "forecast", "score", study, "--loss", "3.0")
    assert r.code == 0 and "changed" not in r.stdout + r.stderr, r.stdout + r.stderr
    score = json.loads((study / "forecast.json").read_text())["scores"][-1]
    assert score["data_changed"] is False


def test_an_older_ladders_freeze_is_still_called_stale_once_a_run_has_changed(study, capsys):
    """The older hash is no pass for results that did change: a run finished since the freeze is said."""
    from ladder.plan.planner import read_plan
    from tests.fake_runs import finish

    _older_ladders_freeze_with_a_run_unfinished(study, capsys)
    from ladder import layout

    sd = layout.StudyDir(study)
    planned = [s for s in read_plan(study)[1] if not sd.run(s.run_id).result.is_file() and s.role == "rung"]
    finish(sd, planned[0], loss=4.0)
    assert run_cli(capsys, "collect", study).code == 0
    r = run_cli(capsys, "forecast", "show", study)
    assert r.code == 0 and "the data changed after this forecast" in r.stdout + r.stderr, r.stdout + r.stderr


def test_status_does_not_say_an_older_ladders_runs_came_from_an_edited_study_file(tmp_path, capsys, tiny_jsonl_corpus):
    """A study planned and trained by a ladder from 2026-11-30, whose defaults differed (precision 'auto', no
    weight-decay exemption for the LM head), then `ladder plan s.yaml --out S` by this one with the study file
    unchanged: new run ids, and `ladder status S` said the old runs were "planned before the study file was edited"
    and that "planning the file as it was takes them back", both untrue: the file was never edited, and planning it
    again plans the new runs. Now the line allows for another version of ladder and names the command that says
    what differs."""
    from ladder import layout
    from tests.fake_runs import finish
    from tests.micro import write_study

    spec_file, out = write_study(tmp_path / "s.yaml", tiny_jsonl_corpus), tmp_path / "S"
    r = run_cli(capsys, "plan", spec_file, "--out", out, "--no-fit-check", "--json")
    assert r.code == 0, r.stderr
    sd = layout.StudyDir(out)
    new_id = r.json()["runs"][0]["run_id"]
    old = json.loads(sd.run(new_id).spec.read_text())  # the same run as the older ladder wrote its spec
    old.update(run_id="0123456789ab", precision="auto")
    for key in ("role", "trunk", "branch_steps", "tracking"):
        old.pop(key, None)
    sd.run("0123456789ab").path.mkdir()
    sd.run("0123456789ab").spec.write_text(json.dumps(old))
    from ladder.model.config import RunSpec

    finish(sd, RunSpec.model_validate(old))
    r = run_cli(capsys, "status", out)
    line = r.stdout.strip().splitlines()[-1]
    assert r.code == 0 and "earlier plans: 1 more run directory" in line and "(1 done)" in line, r.stdout
    assert "another version of ladder" in line and f"ladder plan STUDY_FILE --out {out}" in line, line
    assert "planning the file as it was takes them back" not in line
    r = run_cli(capsys, "plan", spec_file, "--out", out, "--no-fit-check")
    assert r.code == 0 and "precision 'auto' -> " in r.stdout + r.stderr, r.stdout + r.stderr


def test_fit_says_why_runs_of_an_older_ladder_lack_the_in_context_split(tmp_path, capsys):
    """A study trained by a ladder from before 2026-12-02 (no repeats/novel split in result.json), one run trained
    again by this one: `ladder fit` said "in-context repeats: 1 run(s) carry the repeats/novel split (needs >= 4)",
    which reads as "add runs" though the study had five. Now it says that the others have none, and why."""
    from tests.hero_fixture import make_ladder

    study = make_ladder(tmp_path / "study", fit=False, split=True)
    runs = sorted(p for p in (study / "runs").iterdir() if (p / "result.json").is_file())
    for rd in runs[1:]:  # as the older ladder wrote them
        result = json.loads((rd / "result.json").read_text())
        for key in ("final_eval_loss_repeats", "final_eval_loss_novel", "eval_repeat_share"):
            result.pop(key)
        (rd / "result.json").write_text(json.dumps(result))
    assert run_cli(capsys, "collect", study).code == 0
    r = run_cli(capsys, "fit", study)
    line = next(x for x in r.stdout.splitlines() if x.startswith("in-context repeats"))
    assert r.code == 0 and "1 run(s) carry the repeats/novel split" in line, r.stdout
    assert f"the other {len(runs) - 1} have none (trained by an older ladder" in line, line
