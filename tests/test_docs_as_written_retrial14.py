"""The docs as written (issue 28, re-trial 14): what README.md, docs/guide.md and each command's --help show is what
a user who copies it gets. A snippet copied verbatim works, and a figure the docs quote from an example's output is
in that output."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from tests.cli_helpers import run_cli

ROOT = Path(__file__).resolve().parents[1]
GUIDE = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def _words(text: str) -> str:
    return " ".join(text.split())


def _readme_study() -> dict:
    return next(yaml.safe_load(b) for b in _blocks(README, "yaml") if b.startswith("name: "))


def test_the_guides_study_snippets_validate_when_copied_into_the_readme_study(capsys, tmp_path):
    # the budgets block set both `replicates: {seeds: [1]}` and `ablations: {seed: [0, 1]}` (two alternatives, the
    # second a comment's "or"): copied as written, validate refused it ("replicates.seeds [1] repeat the study's own
    # seed")
    snippets = _blocks(GUIDE, "yaml")
    assert len(snippets) >= 2, snippets
    for k, snippet in enumerate(snippets):
        study = _readme_study()
        for section, value in yaml.safe_load(snippet).items():
            if isinstance(value, dict) and isinstance(study.get(section), dict):
                study[section] = {**study[section], **value}
            else:
                study[section] = value
        path = tmp_path / f"guide-{k}.yaml"
        path.write_text(yaml.safe_dump(study), encoding="utf-8")
        r = run_cli(capsys, "studies", "validate", path)
        assert r.code == 0 and "Traceback" not in r.stderr, (snippet, r.stderr)


def test_the_distance_the_guide_quotes_is_in_its_examples_table(capsys, monkeypatch):
    # "The table's distance is the forecast's multiple in its farthest axis (`57.6x compute`)", right under the
    # example whose table says "683,594x compute (beyond reach)": no example prints 57.6x
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("COLUMNS", "160")
    said = re.search(r"The table's distance is .*?\((?:here )?`([^`]+)`\)", _words(GUIDE))
    assert said, "the guide's sentence on the table's distance"
    command = next(line.split()[1:] for b in _blocks(GUIDE, "bash") for line in b.splitlines() if "--predict" in line)
    r = run_cli(capsys, *command)
    assert r.code == 0, r.stderr
    [row] = [ln for ln in r.stdout.splitlines() if ln.startswith("7e9:4e12 ")]
    assert said.group(1) in row, (said.group(1), row)
    assert "219x the largest model fitted" in r.stdout + r.stderr  # "(here 219x the largest model)"


def _help(capsys, *command: str) -> str:
    r = run_cli(capsys, *command, "--help")
    assert r.code == 0, r.stderr
    return _words(r.stdout.replace("│", " "))


def test_scoring_twice_does_what_scores_help_says(capsys, study: Path):
    # the help said "Each score is appended to its freeze's scores"; a second `forecast score` says "the same as its
    # last score: not appended again" and the freeze keeps one score
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    for _ in range(2):
        r = run_cli(capsys, "forecast", "score", study, "--loss", "3.5")
        assert r.code == 0, r.stderr
    assert "not appended again" in r.stdout
    assert len(json.loads((study / "forecast.json").read_text())["scores"]) == 1
    said = _help(capsys, "forecast", "score")
    assert "(one the same as its freeze's last score is not appended again" in said, said


def test_a_damaged_hero_is_rewritten_by_the_command_status_names(capsys, study: Path):
    # status --help: "damaged (...: the command that repairs it is named)". For a hero run it named
    # `ladder plan S/study.yaml --out S`, which drops the hero from plan.json instead of rewriting it
    assert run_cli(capsys, "hero", study).code == 0
    [hero] = [p for p in (study / "runs").iterdir() if '"role": "hero"' in (p / "spec.json").read_text()]
    (hero / "spec.json").unlink()
    rows = run_cli(capsys, "status", study, "--json").json()["runs"]
    [damaged] = [r for r in rows if r["run_id"] == hero.name]
    assert damaged["state"] == "damaged", damaged
    [command] = re.findall(r"`(ladder [^`]*)` rewrites it", damaged["error"])
    assert command.split()[1] == "hero", damaged["error"]
    assert run_cli(capsys, *command.split()[1:]).code == 0
    rows = run_cli(capsys, "status", study, "--json").json()["runs"]
    assert [r["state"] for r in rows if r["run_id"] == hero.name] == ["planned"], rows


def test_suggests_json_method_says_how_its_gain_is_reckoned(tmp_path):
    # plan --suggest --json: the "method" said the gain is "baseline - expected", while gain_pct is the ratio
    # expected / baseline applied to the fit's interval (current 17.11%, baseline 17.65%, expected 23.06%: the
    # method's rule gives -5.41 pp, the JSON -5.24 pp and the table "17.11% -> 22.35%")
    from ladder.forecast.next_runs import Suggestion

    method = Suggestion(tmp_path, 17.11, 17.65, 1e15, [], []).to_dict()["method"]
    assert "``baseline - expected``" not in method, method
    assert "after = current x expected / baseline" in method and "gain is current - after" in method, method


def _grown_wsd(capsys, tmp_path, corpus, *extra):
    """A one-size wsd micro study planned at budgets 0.5 and 2, its trunk marked done (no training, no snapshot),
    then planned again with budget 1 added: (that plan's result, the added branch's row)."""
    from tests.micro import write_study

    def plan(budgets, *more):
        spec = write_study(tmp_path / "wsd.yaml", corpus, sizes=("4K",), budgets=budgets, schedule={"kind": "wsd"})
        return run_cli(capsys, "plan", spec, "--out", tmp_path / "wsd", "--no-fit-check", "--json", *more)

    first = plan((0.5, 2))
    assert first.code == 0, first.stderr
    [trunk] = [r for r in first.json()["runs"] if r["branch_steps"]]
    (tmp_path / "wsd" / "runs" / trunk["run_id"] / "result.json").write_text('{"status": "done"}')
    r = plan((0.5, 1, 2), *extra)
    assert r.code == 0, r.stderr
    [added] = [x for x in r.json()["runs"] if x["run_id"] not in {y["run_id"] for y in first.json()["runs"]}]
    return r, added


def test_a_budget_added_after_its_trunk_trained_is_said_to_train_from_step_0(capsys, tmp_path, tiny_jsonl_corpus):
    # the guide: "A branch whose trunk finished without a snapshot (a budget added later) trains from step 0, and
    # says so". Only its result.json said so, after training; the plan counted its own steps alone (6.05e8 FLOPs of
    # the 3.03e9 it spends), and status then read "1.22e10 of 6.90e9 FLOPs spent"
    for extra in (("--dry-run",), ()):
        (folder := tmp_path / ("dry" if extra else "written")).mkdir()
        r, added = _grown_wsd(capsys, folder, tiny_jsonl_corpus, *extra)
        said = [w for w in r.json()["warnings"] if w.startswith(f"branch {added['run_id']} ")]
        assert len(said) == 1 and "will train from step 0" in said[0], r.json()["warnings"]
        assert f"{added['flops']:.2e}".replace("e+0", "e") in said[0], (said, added["flops"])


def test_status_counts_a_branch_trained_from_step_0_whole(capsys, tmp_path, tiny_jsonl_corpus):
    # after such a branch trained, status read "118.3K/118.3K tokens (100%); 1.22e10 of 6.90e9 FLOPs spent": its
    # tokens counted as its own steps, its FLOPs as all it spent
    _, added = _grown_wsd(capsys, tmp_path, tiny_jsonl_corpus)
    study = tmp_path / "wsd"

    def branch_and_totals():
        got = run_cli(capsys, "status", study, "--json").json()
        [row] = [x for x in got["runs"] if x["run_id"] == added["run_id"]]
        return row, got["totals"]

    row, _ = branch_and_totals()
    assert row["flops_planned"] == added["flops"] and row["own_tokens_planned"] == added["tokens"], row
    result = {"status": "done", "run_id": added["run_id"], "steps": added["steps"], "tokens": added["tokens"],
              "flops": added["flops"], "flops_spent": added["flops"], "final_train_loss": 2.0,
              "final_eval_loss": 2.0, "wall_time_s": 1.0, "trained_from_step": 0}  # fmt: skip
    (study / "runs" / added["run_id"] / "result.json").write_text(json.dumps(result))
    row, totals = branch_and_totals()
    assert row["state"] == "done" and row["own_tokens_done"] == row["own_tokens_planned"] == added["tokens"], row
    assert totals["flops_spent"] <= totals["flops_planned"], totals


def test_sanitys_summary_says_why_fewer_documents_were_generated_than_trained():
    # `ladder sanity` (default study): "100 documents, 133 steps" and then "reproduced 98/98 documents"
    from ladder.model.evaluation.sanity import SanityReport

    report = SanityReport(True, None, None, {}, 6.2, 6.24, 0.01, 0.5, 0.05, 1.0, 133, 100, 98, 98)
    line = report.summary().splitlines()[2]
    assert "98/98 documents (the other 2 left out:" in line, line
    assert "(the other" not in SanityReport(True, None, None, {}, 6.2, 6.24, 0.01, 0.5, 0.05, 1.0, 9, 5, 5, 5).summary()


def test_every_command_heros_output_names_works_as_typed(capsys, monkeypatch, study: Path):
    # `ladder hero S` printed "on record: ... `ladder forecast score` scores this run against it": typed as printed,
    # "Missing argument 'study_dir'"
    monkeypatch.setenv("COLUMNS", "400")  # a long temporary path is never wrapped inside a command
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    r = run_cli(capsys, "hero", study)
    assert r.code == 0, r.stderr
    commands = re.findall(r"`(ladder [^`]*)`", _words(r.stdout + r.stderr))
    assert any(c.startswith("ladder forecast score") for c in commands), r.stdout
    for command in commands:
        assert str(study) in command.split(), (command, r.stdout)


def test_a_failed_evaluation_in_process_is_one_line_not_a_traceback(capsys, monkeypatch, planned_micro):
    # the guide: "`ladder eval` exits 1 when a run's evaluation failed, naming it and why". With the debug executor
    # (in this process) a damaged model.safetensors also printed lm-eval's 20-frame traceback on the terminal
    import ladder.model.evaluation.downstream as downstream

    study, ids = planned_micro()
    for run_id in ids:
        rd = study / "runs" / run_id
        (rd / "model").mkdir()
        rd.joinpath("result.json").write_text(json.dumps({"status": "done", "run_id": run_id, "tokens": 1, "flops": 1,
                                                          "final_train_loss": 2.0, "final_eval_loss": 2.0,
                                                          "wall_time_s": 1.0}))  # fmt: skip

    def damaged(run_dir, *a, **k):
        raise ValueError("Error while deserializing header: header too large")

    monkeypatch.setattr(downstream, "evaluate_run", damaged)
    monkeypatch.setenv("COLUMNS", "400")  # a long temporary path is never wrapped inside a line
    r = run_cli(capsys, "eval", study, "--executor", "debug", "--tasks", "ladder_py_ppl")
    assert r.code == 1 and "Traceback" not in r.stdout + r.stderr, r.stderr
    for run_id in ids:
        [line] = [ln for ln in r.stderr.splitlines() if ln.startswith(f"{run_id}: lm-eval failed: ValueError")]
        log = study / "logs" / f"eval-{run_id}.log"
        assert f"(traceback: {log})" in line and "header too large" in log.read_text(), line


def test_the_gpus_help_names_no_value_the_option_refuses(capsys, monkeypatch, planned_micro):
    # `ladder submit --help` said "--gpus  Local: GPU ids, e.g. 0,1 (none: CPU)": `--gpus none` is refused ("use GPU
    # ids separated by commas"); CPU is what a study without executor.local.gpus gets when --gpus is left out
    monkeypatch.setenv("COLUMNS", "200")
    study, _ = planned_micro()
    r = run_cli(capsys, "submit", study, "--executor", "local", "--gpus", "none")
    assert r.code == 2 and "--gpus 'none'" in r.stderr, r.stderr
    for command in (("submit",), ("run",)):
        said = _help(capsys, *command)
        assert "(none: CPU)" not in said, said
        assert "e.g. 0,1 (default: the study's executor.local.gpus; with no ids there, CPU)" in said, said
