"""--help that teaches and documentation that does not lie (re-trial 17b): an option's mistake is one line even when
the study has warnings to say, and the options do what their help says."""

from __future__ import annotations

from tests.cli_helpers import one_line, run_cli
from tests.micro import write_study


def test_a_bad_option_of_run_is_one_line_though_the_study_has_warnings(capsys, tmp_path, tiny_jsonl_corpus):
    # `ladder run STUDY --parallel 0` printed the study's warnings (here: the fit will refuse 2 sizes), then the error
    spec = write_study(tmp_path / "micro.yaml", tiny_jsonl_corpus)
    out = tmp_path / "runs"
    for args, words in (
        (("--parallel", "0"), ("--parallel 0",)),
        (("--gpus", "x"), ("--gpus 'x'",)),
        (("--executor", "nope"), ("--executor 'nope'",)),
        (("--executor", "slurm", "--parallel", "2"), ("--parallel", "local executor")),
    ):
        one_line(run_cli(capsys, "run", spec, "--out", out, "--no-fit-check", *args), *words)
    assert not out.exists()


def test_a_bad_option_of_submit_is_one_line_though_the_study_file_was_edited(capsys, planned_micro):
    # `ladder submit S --parallel 0` after study.yaml was edited: the "edited since it was planned" warning came first
    study_dir, _ = planned_micro()
    yaml_path = study_dir / "study.yaml"
    yaml_path.write_text(yaml_path.read_text().replace("tokens_per_param: 10", "tokens_per_param: 12"))
    for args, words in (
        (("--executor", "local", "--parallel", "0"), ("--parallel 0",)),
        (("--executor", "nope"), ("--executor 'nope'",)),
        (("--run", "nope"), ("--run nope", "not a run of this study")),
    ):
        one_line(run_cli(capsys, "submit", study_dir, *args), *words)
    assert not (study_dir / "jobs.json").exists()


def test_sbatch_adds_to_the_studys_extra_sbatch_options(capsys, monkeypatch, planned_micro):
    # "--sbatch KEY=VALUE: extra sbatch option" replaced the study's executor.slurm.additional: a study's
    # {exclusive: true} was dropped from the jobs as soon as --sbatch named anything else
    import yaml

    import ladder.jobs.submit
    from ladder.jobs.submit import SubmitResult

    study_dir, _ = planned_micro()
    path = study_dir / "study.yaml"
    spec = yaml.safe_load(path.read_text())
    spec["executor"]["slurm"]["additional"] = {"exclusive": True, "mail-type": "FAIL"}
    path.write_text(yaml.safe_dump(spec))
    seen = []
    monkeypatch.setattr(ladder.jobs.submit, "submit", lambda sd, ex, **kw: seen.append(ex) or SubmitResult())
    r = run_cli(capsys, "submit", study_dir, "--executor", "slurm", "--sbatch", "mail-type=END", "--sbatch", "nice=5")
    assert r.code == 0, r.stderr
    assert seen[0].slurm.additional == {"exclusive": True, "mail-type": "END", "nice": "5"}
    assert "added to the study's executor.slurm.additional" in _option_help("submit")["--sbatch"]


def _option_help(*command: str) -> dict[str, str]:
    """The help text of each option of ``ladder COMMAND``, by its long name (as --help prints it, unwrapped)."""
    import typer

    from ladder.cli import app

    cmd = typer.main.get_command(app)
    for name in command:
        cmd = cmd.commands[name]
    return {p.opts[0]: " ".join((p.help or "").split()) for p in cmd.params if p.opts}


def test_submits_executor_options_take_the_range_and_default_their_help_says(capsys, monkeypatch, planned_micro):
    # the SLURM and local options said no range and no default ("SLURM time limit per job, minutes."): a user
    # learned the bounds from the refusals, and the defaults from the source
    import re

    import ladder.jobs.submit
    from ladder.jobs.submit import SubmitResult
    from ladder.studies.spec import LocalSpec, SlurmSpec

    study_dir, _ = planned_micro()
    seen = []
    monkeypatch.setattr(ladder.jobs.submit, "submit", lambda sd, ex, **kw: seen.append(ex) or SubmitResult())
    helps = _option_help("submit")
    options = {
        "--time-min": "slurm",
        "--gpus-per-task": "slurm",
        "--cpus-per-task": "slurm",
        "--array-parallelism": "slurm",
        "--runs-per-gpu": "local",
        "--cpus-per-run": "local",
        "--parallel": "local",
    }
    for option, section in options.items():
        said = helps[option]
        field = option[2:].replace("-", "_")
        assert f"default: the study's executor.{section}.{field}" in said, said
        lo, hi = (int(n.replace(",", "")) for n in re.search(r"(\d[\d,]*) to (\d[\d,]*)", said).groups())
        for value, taken in ((lo - 1, False), (lo, True), (hi, True), (hi + 1, False)):
            r = run_cli(capsys, "submit", study_dir, "--executor", section, option, str(value))
            if taken:
                assert r.code == 0, (option, value, r.stderr)
                assert getattr(getattr(seen[-1], section), field) == value
            else:
                one_line(r, f"{option} {value}")
        unless = re.search(r"(\d+) unless set", said)
        if unless:
            spec = SlurmSpec() if section == "slurm" else LocalSpec()
            assert getattr(spec, field) == int(unless.group(1)), (option, said)
    said = helps["--mem-gb"]
    assert "in GB, above 0 and at most 1,000,000" in said, said
    one_line(run_cli(capsys, "submit", study_dir, "--executor", "slurm", "--mem-gb", "0"), "--mem-gb 0")
    one_line(run_cli(capsys, "submit", study_dir, "--executor", "slurm", "--mem-gb", "1000001"), "--mem-gb 1e+06")
    assert run_cli(capsys, "submit", study_dir, "--executor", "slurm", "--mem-gb", "1000000").code == 0
    for option in ("--partition", "--account", "--qos", "--constraint", "--gpus"):
        assert "default: the study's executor." in helps[option], option


def test_status_interval_and_eval_limit_take_the_range_their_help_says(capsys, monkeypatch, planned_micro):
    # --interval said only "(default 2)" and refused 86400.5 ("at most 86400 seconds"); --limit said "examples per
    # task (or a fraction below 1)" and refused 2.5 and 2e12: the bounds are in the help now
    import ladder.books.run_status

    study_dir, _ = planned_micro()
    said = _option_help("status")["--interval"]
    assert "above 0 and at most 86,400 (a day; default 2)" in said, said
    polls = []
    monkeypatch.setattr(ladder.books.run_status, "wait", lambda sd, poll_s, **kw: polls.append(poll_s) or [])
    assert run_cli(capsys, "status", study_dir, "--watch", "--json", "--interval", "86400").code == 0
    assert run_cli(capsys, "status", study_dir, "--watch", "--json").code == 0
    assert polls == [86400, 2.0]
    for value in ("0", "86400.5"):
        one_line(run_cli(capsys, "status", study_dir, "--watch", "--interval", value), f"--interval {value}")
    said = _option_help("eval")["--limit"]
    assert "a whole number from 1 to 1e12, or below 1 a share of each task" in said, said
    for value in ("0", "2.5", "2e12"):
        one_line(run_cli(capsys, "eval", study_dir, "--limit", value), "--limit")


def test_tokenizer_options_say_what_they_take(capsys, tmp_path, tiny_jsonl_corpus):
    # --vocab-size said no range (259 to 16,777,216 are taken); --max-bytes said "read at most this much text" and
    # --max-bytes 1 trained on a whole document of hundreds of bytes: it reads whole documents
    import re

    from ladder.cli.options import MAX_VOCAB
    from ladder.model.data.tokenizer import MIN_VOCAB_SIZE

    helps = _option_help("data", "tokenizer", "train")
    lo, hi = (
        int(n.replace(",", "")) for n in re.search(r"(\d[\d,]*) \(.*\) to (\d[\d,]*)", helps["--vocab-size"]).groups()
    )
    assert (lo, hi) == (MIN_VOCAB_SIZE, MAX_VOCAB), helps["--vocab-size"]
    args = ("data", "tokenizer", "train", tiny_jsonl_corpus, "--out", tmp_path / "tok", "--json")
    one_line(run_cli(capsys, *args, "--vocab-size", lo - 1), f"--vocab-size {lo - 1}")
    one_line(run_cli(capsys, *args, "--vocab-size", hi + 1), f"--vocab-size {hi + 1}")
    r = run_cli(capsys, *args, "--vocab-size", lo, "--max-bytes", "1")
    assert r.code == 0, r.stderr
    trained = r.json()["trained"]
    assert trained["trained_on_texts"] == 1 and trained["trained_on_bytes"] > 1, trained
    for said in (helps["--max-bytes"], _option_help("data", "tokenizer", "eval")["--max-bytes"]):
        assert "at most" not in said and "the last one whole, so a little more" in said, said


def test_model_info_takes_the_range_each_option_says(capsys):
    # the shape options said no range, yet --n-layers 1025, --seq-len 1048577 or --aspect-ratio 10001 were refused
    import re

    helps = _option_help("model", "info")
    shape = ("--d-model", "64", "--n-layers", "1", "--head-dim", "64")
    cases = {"--n-layers": shape[:2], "--vocab-size": shape, "--seq-len": shape}
    for option, rest in cases.items():
        lo, hi = (int(n.replace(",", "")) for n in re.search(r"(\d[\d,]*) to (\d[\d,]*)", helps[option]).groups())
        for value, taken in ((lo - 1, False), (lo, True), (hi, True), (hi + 1, False)):
            r = run_cli(capsys, "model", "info", *rest, option, str(value), "--json")
            if taken:
                assert r.code == 0, (option, value, r.stderr)
            else:
                one_line(r, f"{option} {value}")
    assert "up to 1,048,576" in helps["--d-model"]
    assert run_cli(capsys, "model", "info", *shape[2:], "--d-model", "1048576", "--json").code == 0
    one_line(run_cli(capsys, "model", "info", *shape[2:], "--d-model", "1048577"), "--d-model 1048577")
    assert "above 0, at most 10,000 (default: 32)" in helps["--aspect-ratio"]
    assert run_cli(capsys, "model", "info", "--params", "135M", "--aspect-ratio", "10000", "--json").code == 0
    one_line(run_cli(capsys, "model", "info", "--params", "135M", "--aspect-ratio", "10001"), "--aspect-ratio")
    assert "(at most 1e15)" in helps["--params"]
    assert run_cli(capsys, "model", "info", "--params", "1e15", "--json").code == 0
    one_line(run_cli(capsys, "model", "info", "--params", "1.1e15"), "--params")
    assert "1 or more" in helps["--kv-ratio"]
    one_line(run_cli(capsys, "model", "info", *shape, "--kv-ratio", "0"), "--kv-ratio 0")


def test_the_inputs_the_help_names_are_the_ones_taken(capsys, tmp_path, planned_micro, tiny_jsonl_corpus):
    # fit --runs read a plain JSON lines table, which its help left out (it named CSV, parquet and W&B exports);
    # studies validate checked a planned study directory, which its help left out; the tokenizer's
    # --validation-fraction said no range, and 0 and 1 are refused
    import json
    from pathlib import Path

    examples = Path(__file__).resolve().parents[1] / "docs" / "examples" / "wandb-runs.jsonl"
    rows = [json.loads(line) for line in examples.read_text().splitlines() if line.strip()]
    table = tmp_path / "runs.jsonl"
    table.write_text(
        "".join(
            json.dumps({"params": r["config"]["n_params"], "tokens": r["config"]["tokens"], "loss": loss}) + "\n"
            for r in rows
            if (loss := r["summary"].get("eval/loss")) is not None
        )
    )
    assert run_cli(capsys, "fit", "--runs", table, "--bootstrap", "2", "--json").code == 0
    assert "a CSV, JSON lines or parquet file" in _option_help("fit")["--runs"]
    study_dir, _ = planned_micro()
    assert run_cli(capsys, "studies", "validate", study_dir, "--no-fit-check").code == 0
    assert "planned study directory" in _argument_help("studies", "validate")
    for command in ("train", "eval"):
        said = _option_help("data", "tokenizer", command)["--validation-fraction"]
        assert "between 0 and 1 (both excluded)" in said, said
    args = ("data", "tokenizer", "train", tiny_jsonl_corpus, "--out", tmp_path / "tok", "--vocab-size", "300")
    for value in ("0", "1"):
        one_line(run_cli(capsys, *args, "--validation-fraction", value), f"--validation-fraction {value}")


def _argument_help(*command: str) -> str:
    """The help of the first argument of ``ladder COMMAND``."""
    import typer

    from ladder.cli import app

    cmd = typer.main.get_command(app)
    for name in command:
        cmd = cmd.commands[name]
    return next(getattr(p, "help", "") or "" for p in cmd.params if not p.opts[0].startswith("-"))


def test_local_gpus_this_machine_lacks_are_refused_not_trained_on_its_cpu(capsys, monkeypatch, planned_micro):
    # `ladder submit S --executor local --gpus 0` on a machine without GPU 0 started a worker pinned to it, and the
    # runs trained on the CPU in silence (result.json: device cpu); a study with executor.hardware cpu was trained
    # on the GPUs --gpus named, which `ladder plan` refuses when the study names them
    import torch
    import yaml

    import ladder.jobs.submit
    from ladder.jobs.submit import SubmitResult

    study_dir, _ = planned_micro()
    seen = []
    monkeypatch.setattr(ladder.jobs.submit, "submit", lambda sd, ex, **kw: seen.append(ex) or SubmitResult())
    one_line(run_cli(capsys, "submit", study_dir, "--executor", "local", "--gpus", "0"), "--gpus 0", "'cpu'")
    path = study_dir / "study.yaml"
    spec = yaml.safe_load(path.read_text())
    spec["executor"]["hardware"] = "h100"
    path.write_text(yaml.safe_dump(spec))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    one_line(run_cli(capsys, "submit", study_dir, "--executor", "local", "--gpus", "0"), "--gpus 0", "no CUDA GPU")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    one_line(run_cli(capsys, "submit", study_dir, "--executor", "local", "--gpus", "1,2"), "--gpus 1,2", "only 2")
    assert not seen
    assert run_cli(capsys, "submit", study_dir, "--executor", "local", "--gpus", "0,1").code == 0
    assert seen[-1].local.gpus == [0, 1]


def test_eval_evaluates_what_the_studys_evals_section_asks_unless_told_otherwise(capsys, monkeypatch, planned_micro):
    # a study with `evals: {tasks: [ladder_py_ppl], limit: 2}`: `ladder run` evaluated that, but `ladder eval S`
    # evaluated both shipped tasks on every example, and `ladder fit` then forecast tasks the study never asked for
    import yaml

    import ladder.jobs.submit

    study_dir, _ = planned_micro()
    path = study_dir / "study.yaml"
    path.write_text(
        yaml.safe_dump({**yaml.safe_load(path.read_text()), "evals": {"tasks": ["ladder_py_ppl"], "limit": 2}})
    )
    asked = []
    fake = {"evaluated": [], "failed": {}, "results": {}, "job_ids": []}
    monkeypatch.setattr(ladder.jobs.submit, "submit_evals", lambda sd, ex, **kw: asked.append(kw) or fake)
    assert run_cli(capsys, "eval", study_dir, "--executor", "debug").code == 0
    assert (asked[-1]["tasks"], asked[-1]["limit"], asked[-1]["include_path"]) == (["ladder_py_ppl"], 2, None)
    assert (
        run_cli(capsys, "eval", study_dir, "--executor", "debug", "--tasks", "ladder_py_next_line", "--limit", "3").code
        == 0
    )
    assert (asked[-1]["tasks"], asked[-1]["limit"]) == (["ladder_py_next_line"], 3)
    helps = _option_help("eval")
    for option in ("--tasks", "--include-path", "--limit"):
        assert f"default: the study's evals.{option[2:].replace('-', '_')}" in helps[option], helps[option]


def test_plan_budgets_help_says_what_leaving_it_out_does():
    # "--budget: with --suggest, the most exact FLOPs the suggested runs may cost together": left out, no cost limit
    # is set (next_runs.suggest takes the best one or two at any cost); the help did not say so
    from ladder.cli.suggest import parse_budget

    assert parse_budget(None) is None and parse_budget("300T") == 3e14
    said = _option_help("plan")["--budget"]
    assert "(default: no limit: the best one or two runs, whatever they cost)" in said, said


def test_status_watch_says_it_does_not_wait_for_runs_no_job_will_end(capsys, planned_micro):
    # "--watch: keep a live display until every run has ended": on a study planned but not submitted it returned at
    # once, its runs planned (ladder.books.run_status.wait stops when nothing is alive to end them)
    study_dir, _ = planned_micro()
    r = run_cli(capsys, "status", study_dir, "--watch", "--json", "--interval", "0.01")
    assert r.code == 0 and {row["state"] for row in r.json()["runs"]} == {"planned"}, r.stdout
    said = _option_help("status")["--watch"]
    assert "a run planned or interrupted with no live job is not waited for" in said, said


def test_submit_skips_a_diverged_run_even_with_retry_failed_as_its_help_says(capsys, planned_micro):
    # the help said "runs that are done or whose jobs are alive are skipped" and "--retry-failed resubmits failed and
    # corrupt runs": a diverged run was skipped too, even with --retry-failed, and no help said so
    import json

    study_dir, ids = planned_micro()
    result = study_dir / "runs" / ids[0] / "result.json"
    result.write_text(json.dumps({"status": "diverged", "run_id": ids[0], "reason": "loss 1e9 at step 3"}))
    for extra in ((), ("--retry-failed",)):
        r = run_cli(capsys, "submit", study_dir, "--executor", "debug", "--run", ids[0], "--json", *extra)
        assert r.code == 0 and r.json()["reasons"] == {ids[0]: "diverged"}, r.stdout
    said = " ".join(run_cli(capsys, "submit", "--help").stdout.replace("│", " ").split())
    assert "Runs that are done or diverged, or whose jobs are alive, are skipped" in said, said
    assert "a diverged run's result stands: it is not trained again" in _option_help("submit")["--retry-failed"]


def test_hero_seed_help_says_the_range_it_takes(capsys, tmp_path):
    # re-trial 17b: every seed option said 0 to 2^32-1 but hero's, which refused 2^32 all the same
    assert "0 to 2^32-1" in _option_help("hero")["--seed"]
    one_line(run_cli(capsys, "hero", tmp_path, "--seed", str(2**32)), "--seed 4294967296", "0 to 2^32-1")
