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
