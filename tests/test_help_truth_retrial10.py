"""What the tool tells a user is true (issue 28): a "next step" or "run it again" hint is a command that works
when typed as printed, and an option does what its --help says at the edges the help states."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

from tests.cli_helpers import one_line, run_cli
from tests.micro import write_study


def _commands(line: str) -> list[str]:
    return re.findall(r"`(ladder [^`]*)`", line)


def _refusal(r) -> str:
    """The ``error:`` line of a refusal (exit 2) that may follow the plan's warnings."""
    line = r.stderr.strip().splitlines()[-1]
    assert r.code == 2 and line.startswith("error: ") and "Traceback" not in r.stderr, r.stderr
    return line


def test_run_says_to_resume_the_users_study_not_the_default_one(capsys, monkeypatch, tmp_path, tiny_jsonl_corpus):
    # `ladder run` with no STUDY runs the built-in default study: a hint to resume must name the study's directory
    import ladder.books.run_status
    import ladder.jobs.submit
    import ladder.pipeline

    study = write_study(tmp_path / "micro.yaml", tiny_jsonl_corpus)
    out = tmp_path / "runs"
    monkeypatch.setattr(
        ladder.pipeline, "prepare", lambda s: SimpleNamespace(train_tokens=1, val_tokens=1, root=tmp_path)
    )
    monkeypatch.setattr(ladder.jobs.submit, "submit", lambda *a, **k: SimpleNamespace(submitted=[], skipped=[]))
    rows = [SimpleNamespace(run_id="abc123", state="interrupted", error=None)]
    monkeypatch.setattr(ladder.books.run_status, "wait", lambda *a, **k: rows)
    line = _refusal(run_cli(capsys, "run", study, "--out", out, "--executor", "debug", "--no-fit-check"))
    assert "abc123" in line, line
    assert not [c for c in _commands(line) if c.startswith("ladder run")], line
    assert "run the same command again to resume" in line, line


def test_freezes_next_step_names_the_study_in_every_command(capsys, study: Path):
    r = run_cli(capsys, "forecast", "freeze", study)
    assert r.code == 0, r.stderr
    nxt = [ln for ln in r.stdout.splitlines() if ln.startswith("next:")]
    assert nxt, r.stdout
    for command in _commands(nxt[0]):
        assert command.endswith(str(study)), nxt[0]


def test_the_tokenizers_smallest_vocabulary_adds_up_as_the_refusal_says(capsys, tmp_path, tiny_jsonl_corpus):
    # the refusal once said "at least 259 ids (256 bytes + specials)": 258, with ladder's two special tokens
    from ladder.model.data.tokenizer import MIN_VOCAB_SIZE, SPECIAL_TOKENS

    args = ("data", "tokenizer", "train", tiny_jsonl_corpus, "--out", tmp_path / "tok")
    line = one_line(run_cli(capsys, *args, "--vocab-size", MIN_VOCAB_SIZE - 1), f"at least {MIN_VOCAB_SIZE} ids")
    terms = [int(n) for n in re.findall(r"(\d+) (?:bytes|special tokens|merge)", line)]
    assert len(terms) == 3 and terms[1] == len(SPECIAL_TOKENS) and sum(terms) == MIN_VOCAB_SIZE, line
    assert run_cli(capsys, *args, "--vocab-size", MIN_VOCAB_SIZE).code == 0


def _help(capsys, *command: str) -> str:
    """``command --help`` as one line of words (the panels' frames and wrapping taken out)."""
    r = run_cli(capsys, *command, "--help")
    assert r.code == 0, r.stderr
    return " ".join(r.stdout.replace("│", " ").split())


def test_scores_loss_range_in_its_help_is_the_one_it_takes(capsys, study: Path):
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    assert run_cli(capsys, "forecast", "score", study, "--loss", "0.001", "--json").code == 0
    said = _help(capsys, "forecast", "score")
    # the help said "0.001 to 100", and 100 is refused: above ln V of this study's 256-token vocabulary
    one_line(run_cli(capsys, "forecast", "score", study, "--loss", "100"), "uniform guess")
    assert "0.001 to 100." not in said and "uniform guess over the study's vocabulary" in said, said


def test_the_bootstrap_it_advises_is_a_value_fit_takes(capsys, tmp_path):
    # "give --bootstrap 9,975 or fewer": typed as printed, 9,975 is no integer to typer
    rows = "".join(f"{n},{20 * n},{2 + 100 / n**0.3:.4f}\n" for n in range(10_000, 10_401))
    (runs := tmp_path / "runs.csv").write_text("params,tokens,loss\n" + rows)
    line = one_line(run_cli(capsys, "fit", "--runs", runs, "--bootstrap", "10000"), "give --bootstrap")
    advised = re.search(r"give --bootstrap (\S+) or fewer", line).group(1)
    assert advised == str(4_000_000 // 401), line
    r = run_cli(capsys, "fit", "--runs", runs, "--bootstrap", advised, "--predict", "bad")
    one_line(r, "--predict 'bad'")  # past the option parser and the bootstrap check: the value was taken


def test_an_unplanned_folders_hint_plans_into_that_folder(capsys, tmp_path, tiny_jsonl_corpus):
    # "run `ladder plan` first", typed as printed, is "Missing argument 'study'"; and with a study alone it plans
    # into ./ladder-runs/<name>, not the folder the user gave
    folder = tmp_path / "mine"
    folder.mkdir()
    study = write_study(tmp_path / "micro.yaml", tiny_jsonl_corpus, sizes=("4K", "6K", "8K", "12K"))
    line = one_line(run_cli(capsys, "status", folder), str(folder))
    [command] = [c for c in _commands(line) if c.startswith("ladder plan ")]  # not "the folder `ladder plan` wrote"
    args = command.split()[1:]
    assert "STUDY" in args, line
    assert run_cli(capsys, *[str(study) if a == "STUDY" else a for a in args]).code == 0
    assert run_cli(capsys, "status", folder).code == 0


def test_runs_remedy_for_a_folder_where_fit_json_goes_keeps_the_out(capsys, tmp_path, tiny_jsonl_corpus):
    # "then run `ladder run micro.yaml` again" left --out behind: that plans a second study in ./ladder-runs/micro
    study = write_study(tmp_path / "micro.yaml", tiny_jsonl_corpus, sizes=("4K", "6K", "8K", "12K"))
    out = tmp_path / "elsewhere"
    (out / "fit.json").mkdir(parents=True)
    line = _refusal(run_cli(capsys, "run", study, "--out", out, "--executor", "debug"))
    assert [c for c in _commands(line) if c.startswith("ladder run")] in ([], [f"ladder run {study} --out {out}"])
    assert "same command" in line or f"--out {out}" in line, line


def test_the_guide_gives_the_loss_range_score_takes():
    # the guide said a --loss may be "from 0.001 ... to 100": score refuses one above ln V of the vocabulary
    guide = " ".join((Path(__file__).parents[1] / "docs" / "guide.md").read_text().split())
    assert "a `--loss` at most ln V, a uniform guess over the study's vocabulary" in guide


def test_model_infos_default_ffn_width_is_the_rounding_its_help_names(capsys):
    # "8/3 d_model, rounded" reads as 1365 at d_model 512; the shape has 1360, the nearest multiple of 16
    said = _help(capsys, "model", "info")
    assert "(default 8/3 d_model, rounded to a multiple of 16)" in said, said
    r = run_cli(capsys, "model", "info", "--d-model", "512", "--n-layers", "4", "--json")
    assert r.json()["shape"]["ffn_dim"] == 16 * round(8 * 512 / 3 / 16) == 1360


def test_tokenizer_evals_max_bytes_help_says_it_caps_the_text_read(capsys, tmp_path, tiny_jsonl_corpus, tiny_tokenizer):
    # "Evaluate on at most this much held-out text": the cap is on the text read before the split, so --max-bytes
    # 40K at a fraction of 0.5 evaluates about 20K, and the default 8M at 0.02 about 160K
    args = ("data", "tokenizer", "eval", tiny_tokenizer, tiny_jsonl_corpus, "--validation-fraction", "0.5")
    r = run_cli(capsys, *args, "--max-bytes", "40K", "--json")
    assert r.code == 0, r.stderr
    assert r.json()["bytes"] < 0.75 * 40_000
    said = _help(capsys, "data", "tokenizer", "eval")
    assert (
        "Read documents until this much text is read (the last one whole, so a little more), held out or not" in said
    ), said


def test_scoring_a_failed_hero_names_a_retry_that_works(capsys, study: Path):
    # "`ladder submit --retry-failed` trains it again": typed as printed, "Missing argument 'study_dir'"
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    assert run_cli(capsys, "hero", study).code == 0
    [hero] = [p for p in (study / "runs").iterdir() if '"role": "hero"' in (p / "spec.json").read_text()]
    (hero / "result.json").write_text('{"status": "failed", "error": "boom"}')
    line = one_line(run_cli(capsys, "forecast", "score", study), "--retry-failed")
    assert f"`ladder submit {study} --retry-failed`" in line, line


def test_fit_of_a_ladder_with_no_done_run_names_commands_that_train_it(capsys, study: Path):
    # "train them (`ladder submit`), then `ladder collect`": no STUDY_DIR, and a plain submit skips failed runs
    for run in (study / "runs").iterdir():
        (run / "result.json").write_text('{"status": "failed", "error": "boom"}')
    assert run_cli(capsys, "collect", study).code == 0
    line = one_line(run_cli(capsys, "fit", study), "no finished runs")
    assert f"`ladder submit {study} --retry-failed`" in line, line
    assert f"`ladder collect {study}`" in line and f"`ladder status {study}`" in line, line


def test_fit_with_too_few_done_runs_points_at_this_studys_status(capsys, study: Path):
    for run in sorted((study / "runs").iterdir())[:4]:
        (run / "result.json").write_text('{"status": "failed", "error": "boom"}')
    assert run_cli(capsys, "collect", study).code == 0
    line = one_line(run_cli(capsys, "fit", study), "not done")
    assert "`ladder status` " not in line and f"`ladder status {study}` shows them" in line, line


def test_a_damaged_freezes_advice_names_a_freeze_of_this_study(capsys, study: Path):
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    (study / "forecast.json").write_text("{bad")
    line = one_line(run_cli(capsys, "forecast", "score", study, "--loss", "3.5"), "restore it")
    assert f"`ladder forecast freeze {study}` makes a new freeze" in line, line
