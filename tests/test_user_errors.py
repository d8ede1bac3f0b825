"""Every user error exits 2 with one line that names the field or flag and what is allowed: no traceback, and
nothing written. One case per error of issue 15's list, and their kin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.cli_helpers import one_line, run_cli

GOOD = {
    "name": "t",
    "data": {"seq_len": 64},
    "model": {"vocab_size": 256, "head_dim": 16},
    "ladder": {"sizes": ["10K", "20K"]},
    "hero": {"params": "1M"},
}


def _study(tmp_path: Path, text: str | None = None, **changes) -> Path:
    spec = json.loads(json.dumps(GOOD))
    for path, value in changes.items():
        node = spec
        *parents, last = path.split("__")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    out = tmp_path / "study.yaml"
    out.write_text(text if text is not None else yaml.safe_dump(spec))
    return out


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


SPEC_CASES = [
    # (case, field changes, words the one line must hold)
    ("odd head_dim", {"model__head_dim": 17}, ["head_dim = 17", "even"]),
    ("head wider than the model", {"model__head_dim": 1024}, ["ladder.sizes[0]", "model.head_dim 1024"]),
    ("size beyond what the family builds", {"ladder__sizes": [1e15]}, ["ladder.sizes[0]", "model.max_layers"]),
    ("size below the smallest model", {"ladder__sizes": [10]}, ["ladder.sizes[0] = 10", "smallest"]),
    ("negative human count", {"ladder__sizes": ["-25K"]}, ["ladder.sizes[0]", "greater than 0"]),
    ("batch below one sequence", {"training__batch_tokens": 7}, ["training.batch_tokens = 7", "data.seq_len 64"]),
    ("ablation batch below one sequence", {"ablations__batch_tokens": [32]}, ["ablations.batch_tokens[0] = 32"]),
    ("batch cap below one sequence", {"training__batch_max_tokens": 8}, ["training.batch_max_tokens = 8"]),
    ("two sizes, one model", {"ladder__sizes": ["10K", "10.1K"]}, ["become the same model", "ladder.sizes[1]"]),
    (
        "a model beyond the hardware's memory",
        {"ladder__sizes": ["10K", "20B"], "model__max_layers": 512, "executor__hardware": "h100"},
        ["80 GiB", "executor.hardware"],
    ),
    (
        "a vocabulary beyond the hardware's memory",
        {"model__vocab_size": 10**9},
        ["GiB", "lower model.vocab_size (1,000,000,000): its embedding holds"],
    ),
    ("corpus that does not exist", {"data__corpus": "/nonexistent/corpus.jsonl"}, ["data.corpus", "does not exist"]),
    ("an empty corpus", {"data__corpus": " "}, ["data.corpus = ' '", "'embedded'"]),
    ("a hub corpus without its name", {"data__corpus": "hf:"}, ["data.corpus = 'hf:'", "'hf:<dataset>"]),
    (
        "head group wider than a depth rung",
        {"ladder": {"depths": [1, 2]}, "model__aspect_ratio": 4},
        ["model.head_dim = 16", "rung L1"],
    ),
]


@pytest.mark.parametrize("case,changes,words", SPEC_CASES, ids=[c for c, _, _ in SPEC_CASES])
@pytest.mark.parametrize("command", ["validate", "plan", "dry-run"])
def test_nonsense_in_a_study_is_refused_in_one_line(tmp_path, capsys, case, changes, words, command):
    path = _study(tmp_path, **changes)
    before = _files(tmp_path)
    args = {
        "validate": ("studies", "validate", path),
        "plan": ("plan", path, "--out", tmp_path / "out"),
        "dry-run": ("plan", path, "--dry-run"),
    }[command]
    one_line(run_cli(capsys, *args), *words)
    assert _files(tmp_path) == before  # nothing written


def test_duplicate_yaml_keys_are_refused_with_their_lines(tmp_path, capsys):
    path = _study(tmp_path, text="name: a\nladder: {sizes: [10K]}\nname: b\nhero: {params: 1M}\n")
    one_line(run_cli(capsys, "studies", "validate", path), "'name' appears twice", "lines 1 and 3")
    path = _study(tmp_path, text="name: a\nladder: {sizes: [10K], sizes: [20K]}\nhero: {params: 1M}\n")
    one_line(run_cli(capsys, "plan", path, "--dry-run"), "'sizes' appears twice", "line 2")


@pytest.mark.parametrize(
    ("value", "reads_as", "words"),
    [("1:20", 80, "base 60"), ("1:20.5", 80.5, "base 60"), ("0064", 52, "octal"), ("-017", -15, "octal")],
)
def test_a_number_yaml_1_1_reads_otherwise_is_refused_with_its_line(tmp_path, capsys, value, reads_as, words):
    # YAML 1.1, which PyYAML speaks, reads 1:20 in base 60 and 0064 in octal: a study would train at 80 tokens/param
    # or a sequence of 52 without a word
    assert yaml.safe_load(f"x: {value}")["x"] == reads_as
    text = yaml.safe_dump(GOOD).replace("ladder:\n", f"ladder:\n  tokens_per_param: {value}\n", 1)
    at = text.splitlines().index(f"  tokens_per_param: {value}") + 1
    path = _study(tmp_path, text=text)
    line = one_line(run_cli(capsys, "studies", "validate", path), value, words, f"reads as {reads_as}", f"line {at}")
    assert "quote it" in line
    one_line(run_cli(capsys, "plan", path, "--dry-run"), value, words)


def test_numbers_yaml_1_1_reads_as_written_are_still_accepted(tmp_path):
    from ladder.studies.yaml_load import load_yaml

    assert load_yaml("a: [0, 00, 0.5, 1_000, 0x10, 20, '1:20', 10:20:30 text]") == {
        "a": [0, 0, 0.5, 1000, 16, 20, "1:20", "10:20:30 text"]
    }


def test_a_tracker_that_is_not_installed_is_refused_at_validate_time(tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    path = _study(tmp_path, tracking={"kind": "wandb", "project": "p"})
    one_line(run_cli(capsys, "studies", "validate", path), "tracking.kind = 'wandb'", "pip install 'ladder[wandb]'")
    one_line(run_cli(capsys, "plan", path, "--out", tmp_path / "out"), "ladder[wandb]")
    assert not (tmp_path / "out").exists()
    one_line(
        run_cli(capsys, "studies", "validate", _study(tmp_path, tracking={"kind": "mlflow"})),
        "tracking.kind",
        "'tensorboard'",
        "'wandb'",
    )


MODEL_INFO = [
    (["--aspect-ratio", "0"], ["--aspect-ratio 0", "positive"]),
    (["--aspect-ratio", "-3"], ["--aspect-ratio -3"]),
    (["--aspect-ratio", "nan"], ["--aspect-ratio nan"]),
    (["--aspect-ratio", "inf"], ["--aspect-ratio inf"]),
    (["--kv-ratio", "0"], ["--kv-ratio 0", ">= 1"]),
    (["--head-dim", "0"], ["--head-dim 0", "positive"]),
    (["--head-dim", "15"], ["--head-dim 15", "even"]),
    (["--params", "10"], ["--params '10'", "outside what this family builds"]),
    # which setting keeps the nearest shape too large: the 49,152-row embedding of the default vocabulary
    (
        ["--params", "800K"],
        ["embedding alone has 3,145,728 (49,152 x 64)", "--vocab-size", "--convention non_embedding"],
    ),
    (["--params", "10", "--convention", "non_embedding"], ["a smaller --head-dim (now 64)"]),
    (["--params", "-5"], ["--params '-5'", "positive count"]),
    (["--convention", "all"], ["--convention 'all'", "'total' or 'non_embedding'"]),
    (["--aspect-ratio", "abc"], ["'--aspect-ratio'", "see `ladder model info --help`"]),  # a click usage error
]


@pytest.mark.parametrize("extra,words", MODEL_INFO, ids=[" ".join(e) for e, _ in MODEL_INFO])
def test_model_info_bad_values(capsys, extra, words):
    one_line(run_cli(capsys, "model", "info", "--params", "135M", *extra), *words)


def test_model_info_bad_explicit_shape(capsys):
    one_line(run_cli(capsys, "model", "info", "--d-model", "0", "--n-layers", "2"), "--d-model 0")
    one_line(run_cli(capsys, "model", "info", "--d-model", "64", "--n-layers", "-1"), "--n-layers -1")


def test_tokenizer_commands_check_their_options(tmp_path, capsys, tiny_tokenizer, tiny_jsonl_corpus):
    before = _files(tmp_path)
    ev = ("data", "tokenizer", "eval", tiny_tokenizer, tiny_jsonl_corpus)
    one_line(run_cli(capsys, *ev, "--max-bytes", "abc"), "--max-bytes 'abc'", "8M")
    one_line(run_cli(capsys, *ev, "--max-bytes", "-1M"), "--max-bytes '-1M'")
    one_line(run_cli(capsys, *ev, "--validation-fraction", "2"), "--validation-fraction 2", "between 0 and 1")
    one_line(run_cli(capsys, *ev, "--validation-fraction", "0"), "--validation-fraction 0")
    one_line(run_cli(capsys, "data", "tokenizer", "eval", tmp_path / "nope", tiny_jsonl_corpus), "no such tokenizer")
    out = tmp_path / "tok"
    tr = ("data", "tokenizer", "train", tiny_jsonl_corpus, "--vocab-size", "300", "--out", out)
    one_line(run_cli(capsys, *tr, "--validation-fraction", "2"), "--validation-fraction 2")
    one_line(run_cli(capsys, *tr, "--max-bytes", "lots"), "--max-bytes 'lots'")
    one_line(run_cli(capsys, *tr[:4], "--vocab-size", "abc", "--out", out), "'--vocab-size'")
    assert _files(tmp_path) == before


def test_a_corpus_without_the_text_key_says_so(tmp_path, capsys, tiny_tokenizer):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"content": f"document {i} " * 20}) + "\n" for i in range(60)))
    one_line(run_cli(capsys, "data", "tokenizer", "eval", tiny_tokenizer, corpus), "--text-key 'text'")


@pytest.fixture()
def planned(tmp_path):
    from tests.fake_runs import plan_micro

    root = tmp_path / "study"
    plan_micro(root)
    return root


@pytest.mark.parametrize("command", ["status", "collect", "fit", "report", "submit", "cancel", "hero", "eval"])
def test_a_study_file_where_a_study_directory_goes_is_named_as_such(tmp_path, capsys, command):
    """`ladder status study.yaml` said "not a planned study directory (no plan.json); run `ladder plan` first",
    though the study was planned: it names the file and the directory to give instead."""
    spec = _study(tmp_path)
    one_line(run_cli(capsys, command, spec), f"{spec} is a study file", f"ladder plan {spec}", "--out")
    other = tmp_path / "notes.txt"
    other.write_text("x")
    one_line(run_cli(capsys, command, other), f"{other} is a file; give a study directory")
    from tests.fake_runs import plan_micro

    run = tmp_path / "study" / "runs" / plan_micro(tmp_path / "study")[0].run_id
    one_line(run_cli(capsys, command, run), f"{run} is a run directory", f"({tmp_path / 'study'})")
    # /dev/null said "not a planned study directory (no plan.json); run `ladder plan` first"
    one_line(run_cli(capsys, command, "/dev/null"), "/dev/null is not a directory", "give a study directory")


@pytest.mark.parametrize("command", ["status", "collect", "submit", "eval"])
def test_a_folder_inside_a_study_or_a_missing_one_is_not_sent_to_ladder_plan(tmp_path, capsys, planned, command):
    """`ladder status S/runs` (or S's model/, logs/) and `ladder status TYPO` said "run `ladder plan` first",
    advice that plans a second study: they name the enclosing study, or say the path is not there."""
    for inside in (planned / "runs", planned / "runs" / "x" / "model"):
        inside.mkdir(parents=True, exist_ok=True)
        one_line(run_cli(capsys, command, inside), f"{inside} is inside the study directory {planned}")
    missing = tmp_path / "studdy"
    one_line(run_cli(capsys, command, missing), f"{missing} does not exist")
    # and where a study (file or directory) goes: sanity, data prepare, plan, run
    other = {"status": ["sanity"], "collect": ["data", "prepare"], "submit": ["plan"], "eval": ["run"]}[command]
    one_line(run_cli(capsys, *other, planned / "runs"), f"{planned / 'runs'} is inside the study directory {planned}")
    assert not missing.exists()
    half = tmp_path / "half"  # a study.yaml without plan.json: planning it in place is the repair
    half.mkdir()
    (half / "study.yaml").write_text((planned / "study.yaml").read_text())
    one_line(run_cli(capsys, command, half), f"run `ladder plan {half}`")
    assert run_cli(capsys, "plan", half).code == 0 and (half / "plan.json").is_file()


def _directory_commands() -> list[tuple[str, ...]]:
    """Every command whose positional argument is a study or run directory, from the command tree itself."""
    from ladder.cli import DIRECTORY_ARGUMENTS, _command

    found = []

    def walk(command, path):
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, (*path, name))
        if any(
            p.param_type_name == "argument" and p.name in DIRECTORY_ARGUMENTS for p in getattr(command, "params", [])
        ):
            found.append(path)

    walk(_command(), ())
    return found


@pytest.mark.parametrize("command", _directory_commands(), ids=" ".join)
def test_an_empty_directory_argument_is_named_not_read_as_the_current_directory(tmp_path, capsys, command, monkeypatch):
    """`ladder forecast show ""` said "no study at ." and `ladder status ""` ". is not a planned study directory":
    click reads "" as the current directory, which the user never named (an unset shell variable, most often)."""
    monkeypatch.chdir(tmp_path)
    assert len(_directory_commands()) >= 10  # the walk finds the commands (status, fit, report, forecast ...)
    for args in (("",), ("--", "")):
        line = one_line(run_cli(capsys, *command, *args), "an empty", "give a")
        assert " . " not in line and "no study at" not in line, line
    # an empty option value is the option's to judge, and "." named on purpose stays the current directory
    assert "an empty STUDY_DIR" not in run_cli(capsys, *command, ".").stderr


@pytest.mark.parametrize("damage", ["empty", "missing"])
def test_a_planned_study_without_a_readable_study_yaml_names_the_repair(tmp_path, capsys, planned, damage):
    """An emptied study.yaml of a planned study said "top level must be a mapping of fields, got NoneType" and a
    deleted one "no such study file" (submit) or "give a study file" (plan): they name the command that puts it
    back in place, and following it works."""
    good = tmp_path / "good.yaml"
    good.write_text((planned / "study.yaml").read_text())
    if damage == "empty":
        (planned / "study.yaml").write_text("")
    else:
        (planned / "study.yaml").unlink()
    for command in ("plan", "submit", "eval"):
        line = one_line(run_cli(capsys, command, planned), f"`ladder plan STUDY_FILE --out {planned}`")
        assert "NoneType" not in line
    assert run_cli(capsys, "plan", good, "--out", planned).code == 0
    assert run_cli(capsys, "plan", planned, "--dry-run").code == 0


def test_a_study_file_that_is_empty_or_no_mapping_says_so_in_words(tmp_path, capsys):
    for text, words in (("", "the file is empty"), ("# only a comment\n", "the file is empty"), ("5\n", "a number")):
        (tmp_path / "s.yaml").write_text(text)
        assert "NoneType" not in one_line(run_cli(capsys, "studies", "validate", tmp_path / "s.yaml"), words)


def test_report_refuses_what_its_siblings_refuse(tmp_path, capsys, planned):
    empty = tmp_path / "empty"
    empty.mkdir()
    for command in ("status", "collect", "fit", "report"):
        one_line(run_cli(capsys, command, empty), "not a planned study directory")
    assert _files(empty) == []
    target = tmp_path / "a-file"
    target.write_text("x")
    before = _files(tmp_path)
    one_line(run_cli(capsys, "report", planned, "--out", target), "--out", "not a folder")
    one_line(run_cli(capsys, "report", planned, "--format", ""), "--format ''", "html, pdf")
    one_line(run_cli(capsys, "report", planned, "--format", "docx"), "--format 'docx'", "html, pdf")
    assert _files(tmp_path) == before


def test_fit_messages(tmp_path, capsys, planned):
    assert run_cli(capsys, "collect", planned).code == 0
    one_line(run_cli(capsys, "fit", planned), "no finished runs")
    one_line(run_cli(capsys, "fit", planned, "--predict", "1e400:1e12"), "--predict '1e400:1e12'", "too large")
    one_line(run_cli(capsys, "fit", planned, "--predict", "0:1e12"), "params must be positive")
    one_line(run_cli(capsys, "fit", planned, "--predict", "7e9"), "PARAMS:TOKENS")
    one_line(run_cli(capsys, "fit", planned, "--predict", "big:1e12"), "params 'big' is not a count")
    one_line(run_cli(capsys, "fit", planned, "--bootstrap", "x"), "'--bootstrap'")
    one_line(run_cli(capsys, "fit", planned, "--columns", "params=n"), "--columns", "--runs")
    one_line(run_cli(capsys, "fit"), "--runs FILE")
    runs = tmp_path / "runs.csv"
    runs.write_text("n,d,l\n1e5,2e6,3.1\n2e5,4e6,2.9\n")
    one_line(run_cli(capsys, "fit", "--runs", runs, "--columns", "params"), "--columns 'params'", "NAME=COLUMN")
    one_line(run_cli(capsys, "fit", "--runs", runs, "--columns", "size=n"), "size", "choose from params")
    one_line(run_cli(capsys, "fit", "--runs", runs, "--columns", "params=N_params"), "no column 'N_params'", "n, d, l")
    one_line(run_cli(capsys, "fit", "--runs", tmp_path / "none.csv"), "no such runs file")


@pytest.mark.parametrize("gpus", [0, 1])
def test_a_device_this_machine_lacks_is_refused_before_the_run_is_touched(planned, capsys, monkeypatch, gpus):
    """`train --device tpu` (or cuda on a machine without one) was a torch traceback, and left the run recorded
    as failed: the next submit skipped it. It is one line, and the run directory is left as it was."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    run = next((planned / "runs").iterdir())
    before = _files(run)
    one_line(run_cli(capsys, "train", run, "--device", "tpu"), "--device 'tpu'", "cpu, cuda")
    have = "no CUDA GPU" if not gpus else "only 1 CUDA GPU(s) (0 to 0)"
    one_line(run_cli(capsys, "train", run, "--device", "cuda:1"), "--device 'cuda:1'", have, "--device cpu")
    if not gpus:
        one_line(run_cli(capsys, "train", run, "--device", "cuda"), "--device 'cuda'", have)
        one_line(run_cli(capsys, "eval", planned, "--device", "cuda", "--executor", "debug"), "--device 'cuda'", have)
    assert _files(run) == before


def test_a_gpu_id_given_twice_is_refused(tmp_path, capsys, planned):
    one_line(run_cli(capsys, "submit", planned, "--gpus", "0,0"), "--gpus '0,0'", "GPU 0 given twice", "--runs-per-gpu")
    spec = _study(tmp_path, model__vocab_size=320, ladder__sizes=["10K", "20K", "40K", "80K", "160K"])
    one_line(run_cli(capsys, "run", spec, "--gpus", "1,2,1"), "GPU 1 given twice")
    spec = _study(tmp_path, executor__local__gpus=[1, 1])
    one_line(run_cli(capsys, "studies", "validate", spec), "executor.local", "gpus has repeated values [1, 1]")


def test_executor_and_run_options(tmp_path, capsys, planned):
    one_line(
        run_cli(capsys, "run", "default", "--executor", "kubernetes", "--out", tmp_path / "r"),
        "--executor 'kubernetes'",
        "slurm, local, debug",
    )
    assert not (tmp_path / "r").exists()
    one_line(run_cli(capsys, "submit", planned, "--executor", "k8s"), "--executor 'k8s'")
    one_line(run_cli(capsys, "submit", planned, "--gpus", "a,b"), "--gpus")
    one_line(run_cli(capsys, "submit", planned, "--sbatch", "exclusive"), "--sbatch 'exclusive'", "KEY=VALUE")
    one_line(run_cli(capsys, "status", planned, "--interval", "0"), "--interval 0")
    one_line(run_cli(capsys, "train", next((planned / "runs").iterdir()), "--threads", "0"), "--threads 0")
    one_line(run_cli(capsys, "train", tmp_path), "not a run directory")


def test_usage_errors_are_one_line_too(capsys):
    one_line(
        run_cli(capsys, "studies", "show", "default", "--yaml"),
        "No such option: --yaml",
        "see `ladder studies show --help`",
    )
    one_line(run_cli(capsys, "plan"), "Missing argument", "see `ladder plan --help`")
    # an option without its value, last on the line: click's parser raised it without the command, and the line
    # stopped at "requires an argument"
    one_line(
        run_cli(capsys, "forecast", "score", "x", "--loss"),
        "Option '--loss' requires an argument; see `ladder forecast score --help`",
    )
    one_line(run_cli(capsys, "plan", "--out"), "'--out' requires an argument; see `ladder plan --help`")
    one_line(run_cli(capsys, "nosuch"), "No such command 'nosuch'")
    one_line(run_cli(capsys, "status", "x", "--interval", "soon"), "'--interval'")


def test_a_bad_row_of_a_runs_file_is_named_by_its_line(tmp_path, capsys):
    runs = tmp_path / "runs.csv"
    runs.write_text("params,tokens,loss\n1e5,2e6,3.1\n2e5,4e6,\n4e5,8e6,2.7\n8e5,1.6e7,2.5\n")
    one_line(run_cli(capsys, "fit", "--runs", runs), "column loss has NaN", "line 3")  # the header is line 1
    runs = tmp_path / "runs.jsonl"
    runs.write_text(
        "".join(
            json.dumps({"config": {"n": n, "d": 20 * n}, "summary": {"loss": loss}}) + "\n"
            for n, loss in ((1e5, 3.1), (2e5, 2.9), (4e5, float("inf")), (8e5, 2.5))
        )
    )
    one_line(
        run_cli(capsys, "fit", "--runs", runs, "--columns", "params=config.n,tokens=config.d,loss=summary.loss"),
        "column loss has NaN",
        "line 3",
    )
    # params in billions (a model card's "7") or a broken token count: no count is below one
    runs = tmp_path / "runs.csv"
    runs.write_text("params,tokens,loss\n0.1,2e9,3.1\n0.2,4e9,2.9\n0.4,8e9,2.7\n0.8,1.6e10,2.5\n")
    one_line(run_cli(capsys, "fit", "--runs", runs), "column params counts below 1 in 4 run(s)", "line 2")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.csv", "runs.jsonl"]


def test_a_runs_file_of_params_flops_and_loss_is_told_how_tokens_follow_from_flops(tmp_path, capsys):
    """Chinchilla's runs as Epoch AI extracted them give params, FLOPs and loss: the refusal named the missing
    tokens without saying that they follow from the FLOPs."""
    rows = [{"params": r["params"], "flops": 6 * r["params"] * r["tokens"], "loss": r["loss"]} for r in _ladder_rows()]
    one_line(
        run_cli(capsys, "fit", "--runs", _jsonl(tmp_path / "runs.jsonl", rows)),
        "lacks column(s) tokens",
        "tokens = flops / (6 x params)",
    )


def test_a_finished_run_of_a_runs_file_without_a_loss_names_both_ways_out(tmp_path, capsys):
    """A W&B export's run marked finished with an empty loss refused the fit, naming the row but no remedy."""
    rows = _ladder_rows()
    rows[1]["loss"] = None
    runs = _jsonl(tmp_path / "runs.jsonl", rows)
    one_line(run_cli(capsys, "fit", "--runs", runs), "column loss has NaN", "line 2", "status column", "not done")
    rows[1]["status"] = "crashed"  # the way out it names: the fit leaves the run out and says so
    r = run_cli(capsys, "fit", "--runs", _jsonl(tmp_path / "runs.jsonl", rows), "--bootstrap", "3")
    assert r.code == 0 and "1 run(s) excluded from the fits (not done: 1 crashed)" in " ".join(
        (r.stdout + r.stderr).split()
    )


def test_a_key_given_twice_in_a_json_runs_file_is_refused_naming_its_line(tmp_path, capsys):
    """JSON keeps the last of a key given twice: the fit would read one loss of two without a word."""
    lines = [json.dumps({"params": n, "tokens": 20 * n, "loss": loss}) for n, loss in
             ((1e5, 3.1), (2e5, 2.9), (4e5, 2.7), (8e5, 2.5))]  # fmt: skip
    lines[2] = lines[2][:-1] + ', "loss": 2.0}'
    runs = tmp_path / "runs.jsonl"
    runs.write_text("\n".join(lines) + "\n")
    one_line(run_cli(capsys, "fit", "--runs", runs), "line 3", "'loss' twice")
    lines[2] = '{"params": 4e5, "tokens": 8e6, "loss": 2.7, "config": {"lr": 1e-3, "lr": 2e-3}}'
    runs.write_text("\n".join(lines) + "\n")
    one_line(run_cli(capsys, "fit", "--runs", runs), "line 3", "'lr' twice")
    array = tmp_path / "runs.json"
    array.write_text("[" + ", ".join(lines) + "]")
    one_line(run_cli(capsys, "fit", "--runs", array), "a run", "'lr' twice")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.json", "runs.jsonl"]


def test_a_runs_path_that_is_no_file_and_a_name_mapped_twice_are_named(tmp_path, capsys):
    """`fit --runs /dev/null` said "no such runs file" of a path that exists; `--columns params=a,params=b` kept
    the last mapping silently and then missed a column the user had mapped."""
    one_line(run_cli(capsys, "fit", "--runs", "/dev/null"), "/dev/null is not a regular file", ".csv")
    one_line(run_cli(capsys, "fit", "--runs", tmp_path), f"{tmp_path} is a directory", "runs file")
    runs = tmp_path / "runs.csv"
    runs.write_text("params,tokens,loss\n1e5,2e6,3.1\n2e5,4e6,2.9\n4e5,8e6,2.7\n8e5,1.6e7,2.5\n")
    r = run_cli(capsys, "fit", "--runs", runs, "--columns", "params=params,params=tokens,loss=loss")
    one_line(r, "params is given twice")


# ---- issue 28: what a user trial found ----------------------------------------------------------------------

LATE_CTRL_C = """
import os, signal, sys, time

sys.argv = ["ladder", "collect", sys.argv[1]]
from ladder.cli import entry


class LateCtrlC:  # deleted in the interpreter's teardown, after Python gave SIGINT back its default action
    def __del__(self, kill=os.kill, pid=os.getpid(), sig=signal.SIGINT):
        kill(pid, sig)


late = LateCtrlC() if sys.argv[2:] == [] else None
entry()
if late is None:  # Ctrl-C at once after the command returned, before the exit handlers
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(10)
"""


@pytest.mark.parametrize("when", ["teardown", "after return"])
def test_a_ctrl_c_after_the_command_finished_does_not_turn_it_into_a_silent_130(planned, when):
    """`timeout -s INT 0.7 ladder collect S` printed "collected ..." and exited 130 with no word: the Ctrl-C
    landed on the way out. The work is done and reported, so the command's own code stands."""
    import subprocess
    import sys

    args = [sys.executable, "-c", LATE_CTRL_C, str(planned)] + (["now"] if when == "after return" else [])
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert "collected" in r.stdout and "Traceback" not in r.stderr, r.stderr


def test_plan_of_a_study_directory_plans_it_again_in_place(tmp_path, capsys, monkeypatch, planned):
    """`status` says a damaged study is repaired by planning it again; `ladder plan DIR` wrote a new study under
    ./ladder-runs instead and left DIR broken."""
    import shutil

    from ladder import layout

    monkeypatch.chdir(tmp_path)
    lost = sorted(layout.StudyDir(planned).runs.iterdir())[0]
    shutil.rmtree(lost)
    assert "damaged" in run_cli(capsys, "status", planned).stdout
    r = run_cli(capsys, "plan", planned)
    assert r.code == 0, r.stderr
    assert f"wrote {planned}: 1 new run, 11 already planned" in " ".join(r.stdout.split())
    assert (lost / "spec.json").is_file() and not (tmp_path / "ladder-runs").exists()
    s = run_cli(capsys, "status", planned)
    assert s.code == 0 and "damaged" not in s.stdout
    r = run_cli(capsys, "plan", planned, "--json")  # again: a no-op
    assert r.code == 0 and r.json()["new"] == [] and r.json()["study_dir"] == str(planned)


@pytest.mark.parametrize(
    "changes,words",
    [
        ({"model__vocab_size": 3}, ["model.vocab_size = 3", "at least 259"]),
        ({"data__max_bytes": 10}, ["data.max_bytes = 10", "validation_tokens"]),
    ],
    ids=["vocab", "max_bytes"],
)
def test_plan_refuses_what_data_preparation_refuses_as_validate_does(tmp_path, capsys, changes, words):
    path = _study(tmp_path, ladder__sizes=["10K", "20K", "40K", "80K"], **changes)  # a ladder the fit takes
    before = _files(tmp_path)
    validate = run_cli(capsys, "studies", "validate", path)
    one_line(validate, *words)
    for extra in ([], ["--dry-run"], ["--json"]):
        r = run_cli(capsys, "plan", path, "--out", tmp_path / "D", *extra)
        one_line(r, *words)
        assert r.stderr == validate.stderr  # the same line
    assert _files(tmp_path) == before


def test_hero_seed_has_the_bounds_of_a_study_seed(capsys, planned):
    before = _files(planned)
    for seed in ("99999999999999999999", "4294967296", "-1"):
        one_line(run_cli(capsys, "hero", planned, "--seed", seed), f"--seed {seed}", "0 to 2^32-1")
    assert _files(planned) == before


def test_eval_refuses_a_device_and_an_executor_before_looking_for_work(capsys, planned, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a machine without CUDA
    before = _files(planned)  # no finished run: nothing to evaluate
    one_line(run_cli(capsys, "eval", planned, "--device", "tpu", "--executor", "debug"), "--device 'tpu'", "cuda:N")
    one_line(run_cli(capsys, "eval", planned, "--device", "cuda:x", "--executor", "debug"), "--device 'cuda:x'")
    one_line(run_cli(capsys, "eval", planned, "--executor", "nosuch"), "--executor 'nosuch'", "slurm, local, debug")
    one_line(run_cli(capsys, "eval", planned, "--executor", "nosuch", "--device", "cpu"), "--executor 'nosuch'")
    for device, executor in (("cpu", "debug"), ("cuda", "slurm"), ("cuda:1", "slurm")):  # SLURM: the node's GPUs
        r = run_cli(capsys, "eval", planned, "--device", device, "--executor", executor)
        assert r.code == 0 and "nothing to evaluate" in r.stdout, (device, r.stderr)
    one_line(run_cli(capsys, "eval", planned, "--device", "cuda", "--executor", "local"), "no CUDA GPU")
    assert _files(planned) == before


def test_model_info_has_the_bounds_of_a_study(capsys):
    one_line(
        run_cli(capsys, "model", "info", "--params", "135M", "--aspect-ratio", "1e30"),
        "--aspect-ratio 1e+30",
        "at most 10000",
        "model.aspect_ratio",
    )
    assert run_cli(capsys, "model", "info", "--params", "135M", "--aspect-ratio", "1e4").code == 0  # the bound
    for big in ("1e30", "2P"):  # the bound `ladder hero --params` and a study's sizes name
        one_line(
            run_cli(capsys, "model", "info", "--params", big),
            f"--params '{big}'",
            "beyond what this family builds (at most 1P parameters)",
        )


@pytest.mark.parametrize("loss", ["1e-300", "1e5"])
def test_a_runs_file_with_an_implausible_loss_is_named_by_its_line(tmp_path, capsys, loss):
    """Issue 28: `fit --runs` with a loss of 1e-300 failed with numpy's "operands could not be broadcast together"
    (and a RuntimeWarning); a loss of 1e5 was fitted. Both lie outside 0.001 to 100 nats/token, the bounds
    `forecast score --loss` has: one line naming the row, nothing written."""
    runs = tmp_path / "runs.csv"
    runs.write_text(f"params,tokens,loss\n1e5,2e6,3.1\n2e5,4e6,{loss}\n4e5,8e6,2.7\n8e5,1.6e7,2.5\n1.6e6,3.2e7,2.4\n")
    one_line(run_cli(capsys, "fit", "--runs", runs), "outside 0.001 to 100 nats/token", f"line 3 ({float(loss):g})")
    assert [p.name for p in tmp_path.iterdir()] == ["runs.csv"]


def test_a_runs_file_with_no_finished_run_names_the_status_words(tmp_path, capsys):
    """Issue 28: with --runs and no row whose status means finished, fit said "see `ladder status`", a command
    for a study, not for a table; it now names the status words it fits."""
    runs = tmp_path / "runs.csv"
    runs.write_text("params,tokens,loss,status\n1e5,2e6,3.1,weird\n2e5,4e6,2.9,weird\n4e5,8e6,2.7,weird\n")
    one_line(run_cli(capsys, "fit", "--runs", runs), "none of the 3 run(s) is done (weird)", "finished")


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".parquet"])
def test_a_runs_file_with_a_repeated_column_name_is_refused_naming_it(tmp_path, capsys, suffix):
    """Issue 28: a --runs CSV with two `loss` columns was fitted on the first without a word (pandas renames the
    second `loss.1`); a table with a repeated column name is refused in one line naming it. With --columns, only
    a repeated column the mapping reads is refused (a W&B UI export may repeat a config and a summary name)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [(1e5, 2e6, 3.1, 9.0), (2e5, 4e6, 2.9, 9.1), (4e5, 8e6, 2.7, 9.2), (8e5, 1.6e7, 2.5, 9.3)]
    runs = tmp_path / f"runs{suffix}"
    if suffix == ".parquet":
        pq.write_table(pa.table(list(zip(*rows)), names=["params", "tokens", "loss", "loss"]), runs)
    else:
        sep = "\t" if suffix == ".tsv" else ","
        runs.write_text("".join(sep.join(map(str, r)) + "\n" for r in [("params", "tokens", "loss", "loss"), *rows]))
    one_line(run_cli(capsys, "fit", "--runs", runs), "more than one column is named 'loss'")
    mapped = "params=params,tokens=tokens,loss=loss"
    one_line(run_cli(capsys, "fit", "--runs", runs, "--columns", mapped), "more than one column is named 'loss'")
    if suffix == ".csv":  # a repeated name the mapping does not read is no matter
        runs.write_text("params,lr,tokens,loss,lr\n" + "".join(f"{n},1,{d},{lo},2\n" for n, d, lo, _ in rows))
        one_line(run_cli(capsys, "fit", "--runs", runs), "more than one column is named 'lr'")
        assert run_cli(capsys, "fit", "--runs", runs, "--columns", mapped, "--bootstrap", "5").code == 0
    assert [p.name for p in tmp_path.iterdir()] == [runs.name]


def _ladder_rows() -> list[dict]:
    """Nine runs of a Chinchilla-like law: three sizes at three tokens/param."""
    return [
        {"params": n, "tokens": n * r, "loss": round(1.7 + 400 / n**0.34 + 410 / (n * r) ** 0.28, 4)}
        for n in (1e6, 2e6, 4e6)
        for r in (10, 20, 40)
    ]


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_runs_file_with_list_valued_cells_is_fitted(tmp_path, capsys):
    """Issue 28: a W&B export's `tags` (a list, even `[]`) made `fit --runs` fail with "TypeError: unhashable
    type: 'list'"; so did a list in a mapped column or in W&B's `state`. A list is read as its JSON text."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [dict(r, tags=["a"] if i % 2 else [], extra={"k": i}) for i, r in enumerate(_ladder_rows())]
    flat = _jsonl(tmp_path / "flat.jsonl", rows)
    assert run_cli(capsys, "fit", "--runs", flat, "--bootstrap", "3").code == 0
    mapped = "params=params,tokens=tokens,loss=loss,variant=tags"
    r = run_cli(capsys, "fit", "--runs", flat, "--columns", mapped, "--bootstrap", "3")
    assert r.code == 0, r.stderr
    assert '"a"' in r.stdout  # the variants are named by the tags' text
    wandb = _jsonl(tmp_path / "wandb.jsonl", [dict(r, state=["finished"]) for r in rows])
    r = run_cli(capsys, "fit", "--runs", wandb, "--columns", "params=params,tokens=tokens,loss=loss")
    one_line(r, "is done", "finished")  # W&B's state serves as the status: a list is no status word
    parquet = tmp_path / "runs.parquet"
    pq.write_table(pa.Table.from_pylist([dict(r, extra=None) for r in rows]), parquet)
    assert run_cli(capsys, "fit", "--runs", parquet, "--bootstrap", "3").code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flat.jsonl", "runs.parquet", "wandb.jsonl"]


def test_an_integer_beyond_a_float_in_a_runs_file_is_one_line(tmp_path, capsys):
    """Issue 28: JSON allows an integer of 400 digits; pandas failed on it with an OverflowError traceback (with or
    without --predict). It is infinite for the fit, which names the row."""
    rows = _ladder_rows()
    rows[1]["params"] = 10**400
    runs = _jsonl(tmp_path / "runs.jsonl", rows)
    one_line(run_cli(capsys, "fit", "--runs", runs), "column params has NaN or infinite values", "line 2")
    r = run_cli(capsys, "fit", "--runs", runs, "--predict", "1e9:2e10")
    one_line(r, "column params has NaN or infinite values", "line 2")
    csv = tmp_path / "runs.csv"
    csv.write_text("params,tokens,loss\n" + "".join(f"{r['params']},{r['tokens']},{r['loss']}\n" for r in rows))
    one_line(run_cli(capsys, "fit", "--runs", csv, "--predict", "1e9:2e10"), "params has NaN or infinite", "line 3")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.csv", "runs.jsonl"]


def test_true_false_in_a_numeric_column_of_a_runs_file_is_refused(tmp_path, capsys):
    """Issue 28: a JSON `true` in the params column was read as 1 and fitted."""
    rows = _ladder_rows()
    rows[2]["params"] = True
    one_line(
        run_cli(capsys, "fit", "--runs", _jsonl(tmp_path / "runs.jsonl", rows)),
        "column params holds true/false in 1 row(s) (line 3)",
        "give numbers",
    )
    csv = tmp_path / "runs.csv"
    csv.write_text("params,tokens,loss\n" + "".join(f"{r['params']},{r['tokens']},True\n" for r in _ladder_rows()))
    one_line(run_cli(capsys, "fit", "--runs", csv), "column loss holds true/false in 9 row(s)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.csv", "runs.jsonl"]


def test_a_runs_file_that_hides_one_value_behind_another_is_refused(tmp_path, capsys):
    """Issue 28: a top-level "config.n" next to a nested {"config": {"n": ...}} flattened to one column and the
    nested one won silently; one file column mapped to two names fitted params against themselves; a row of 1e16
    params was fitted (--predict refuses more than 1e15); `--runs ''` was called the directory '.'."""
    rows = [{"config": {"n": r["params"], "d": r["tokens"]}, "loss": r["loss"]} for r in _ladder_rows()]
    rows[3]["config.n"] = 5
    runs = _jsonl(tmp_path / "runs.jsonl", rows)
    one_line(
        run_cli(capsys, "fit", "--runs", runs, "--columns", "params=config.n,tokens=config.d,loss=loss"),
        "line 4 gives 'config.n' both as a dotted key and nested",
    )
    del rows[3]["config.n"]
    _jsonl(runs, rows)
    one_line(
        run_cli(capsys, "fit", "--runs", runs, "--columns", "params=config.n,tokens=config.n,loss=loss"),
        "params and tokens both read column 'config.n'",
    )
    big = _ladder_rows()
    big[0]["params"] = 1e16
    one_line(run_cli(capsys, "fit", "--runs", _jsonl(tmp_path / "big.jsonl", big)), "params is beyond 1P", "line 1")
    one_line(run_cli(capsys, "fit", "--runs", ""), "--runs '': an empty path")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.jsonl", "runs.jsonl"]


@pytest.mark.parametrize("group", [(), ("studies",), ("forecast",), ("data", "tokenizer")])
def test_a_group_without_a_command_shows_its_help_and_says_what_is_missing(capsys, group):
    """Issue 28: `ladder`, `ladder studies`, ... printed their help and exited 2 with no word of what was wrong."""
    r = run_cli(capsys, *group)
    one_line(r, f"`{' '.join(('ladder', *group))}` needs a command")
    assert "Commands" in r.stdout


def test_model_info_refuses_a_width_that_is_no_whole_number_of_heads(capsys):
    """Issue 28: `model info --d-model 10 --head-dim 64` built one 64-wide head on a 10-wide model; a width that
    is not a multiple of the head dim dropped the rest silently (d_model 100: one head of 64)."""
    r = run_cli(capsys, "model", "info", "--d-model", "10", "--n-layers", "2", "--head-dim", "64")
    one_line(r, "--d-model 10: not a whole number of heads of --head-dim 64")
    one_line(run_cli(capsys, "model", "info", "--d-model", "100", "--n-layers", "2"), "default head_dim of 64")
    assert run_cli(capsys, "model", "info", "--d-model", "100", "--n-layers", "2", "--n-heads", "2").code == 0


def test_an_empty_study_name_or_a_folder_without_a_study_is_named_as_such(tmp_path, capsys, monkeypatch):
    """Issue 28: `studies show ''` said "study.yaml: no such study file" (the empty path read as '.')."""
    monkeypatch.chdir(tmp_path)
    for command in (("studies", "show"), ("studies", "validate"), ("plan",)):
        one_line(run_cli(capsys, *command, ""), "study '': an empty name", "built-in")
        one_line(run_cli(capsys, *command, str(tmp_path)), f"{tmp_path}: a directory but no planned study")
    assert list(tmp_path.iterdir()) == []


def test_tokenizer_train_says_when_the_corpus_is_too_small_or_the_text_key_empty(tmp_path, capsys):
    """Issue 28 re-trial: a one-line corpus trained "a 258-id byte-level BPE" for --vocab-size 5000 without a word
    (only the --json said what was asked); `--text-key ''` said "the training texts are empty"."""
    corpus = tmp_path / "corp"
    corpus.mkdir()
    (corpus / "a.txt").write_text("hello world\n")
    r = run_cli(capsys, "data", "tokenizer", "train", corpus, "--vocab-size", "5000", "--out", tmp_path / "tk")
    assert r.code == 0 and "trained a 258-id" in r.stdout
    assert "gave only 258 of the 5,000 ids asked for" in r.stderr
    r = run_cli(
        capsys, "data", "tokenizer", "train", corpus, "--vocab-size", "500", "--out", tmp_path / "tk2", "--text-key", ""
    )
    one_line(r, "--text-key '': an empty name")
    assert not (tmp_path / "tk2").exists()


def test_tokenizer_eval_with_a_tiny_byte_cap_names_the_cap(capsys, tiny_tokenizer, tiny_jsonl_corpus):
    """`data tokenizer eval TOK CORPUS --max-bytes 100` said "try a larger --validation-fraction", which did not
    help at 0.4: the cap bounds the text read before the split, so the message names it first."""
    line = one_line(
        run_cli(capsys, "data", "tokenizer", "eval", tiny_tokenizer, tiny_jsonl_corpus, "--max-bytes", "100"),
        "no held-out documents",
        "--max-bytes",
    )
    assert "first 100 bytes of text" in line  # "the first 100 of text" named no unit
    one = run_cli(capsys, "data", "tokenizer", "eval", tiny_tokenizer, tiny_jsonl_corpus, "--max-bytes", "1")
    assert "first 1 byte of text" in one_line(one, "no held-out documents")
    assert run_cli(capsys, "data", "tokenizer", "eval", tiny_tokenizer, tiny_jsonl_corpus).code == 0


def test_an_option_of_another_executor_is_refused_not_ignored(tmp_path, capsys, planned):
    """`submit S --executor debug --partition gpu --parallel 3` trained in process, ignoring both options in
    silence; an option of an executor that does not run is refused, naming the executor that would read it."""
    before = _files(planned)
    line = one_line(run_cli(capsys, "submit", planned, "--executor", "debug", "--partition", "gpu"), "--partition")
    assert "slurm executor" in line and "--executor slurm" in line
    one_line(run_cli(capsys, "submit", planned, "--executor", "slurm", "--parallel", "3"), "--parallel", "local")
    one_line(run_cli(capsys, "submit", planned, "--executor", "local", "--sbatch", "a=b"), "--sbatch", "slurm")
    one_line(run_cli(capsys, "run", planned, "--executor", "debug", "--gpus", "0"), "--gpus", "--executor local")
    assert _files(planned) == before


@pytest.mark.parametrize("command", ["plan", "run"])
def test_an_empty_out_is_refused_not_taken_for_the_current_directory(tmp_path, capsys, monkeypatch, command):
    """`ladder plan S --out ""` (an unset shell variable) planned the study into the current directory itself:
    plan.json, runs/ and study.yaml among the user's files."""
    monkeypatch.chdir(tmp_path)
    spec = "default"  # a design the plan has nothing to warn of: the refusal is the one line
    before = _files(tmp_path)
    for value in ("", "  "):
        one_line(run_cli(capsys, command, spec, "--out", value), f"--out {value!r}", "an empty path")
    one_line(run_cli(capsys, "data", "tokenizer", "train", tmp_path, "--vocab-size", "300", "--out", ""), "--out ''")
    assert _files(tmp_path) == before


@pytest.mark.parametrize("command", ["plan", "dry-run", "run"])
def test_an_out_folder_of_other_files_is_refused_not_written_into(tmp_path, capsys, command):
    """Retrial 9: `ladder plan S --out ..` (or `--out /`) wrote plan.json, study.yaml and runs/ among the user's
    own files. A new or empty folder, and a study's own (even a damaged one), are still planned into."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    before = _files(tmp_path)
    args = {"plan": ("plan",), "dry-run": ("plan", "--dry-run"), "run": ("run", "--executor", "debug")}[command]
    one_line(
        run_cli(capsys, args[0], "default", "--out", mine, *args[1:]),
        f"{mine} holds other files (notes.txt) and no study",
        "choose a new or empty --out folder",
    )
    assert _files(tmp_path) == before
    (tmp_path / "empty").mkdir()
    assert run_cli(capsys, "plan", "default", "--out", tmp_path / "empty").code == 0
    (tmp_path / "empty" / "study.yaml").unlink()  # a damaged study: its plan.json and runs/ say it is one
    assert run_cli(capsys, "plan", "default", "--out", tmp_path / "empty").code == 0


def test_a_broken_link_in_the_way_is_named_as_one(tmp_path, capsys, monkeypatch):
    """`./ladder-runs` a link to a folder that is gone: `ladder plan` said "cannot use ladder-runs: File exists"."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ladder-runs").symlink_to(tmp_path / "gone")
    one_line(run_cli(capsys, "plan", "tied-vs-untied"), "ladder-runs", f"a link to {tmp_path / 'gone'}")


def test_train_of_what_is_no_run_directory_says_what_it_is(tmp_path, capsys, planned):
    """`ladder train STUDY_DIR` (or a run's model/, or a typo) said "run `ladder plan` first" of a planned study."""
    from ladder import layout

    run = next(p for p in (planned / "runs").iterdir() if (p / layout.SPEC).is_file())
    (run / "model").mkdir(exist_ok=True)
    one_line(run_cli(capsys, "train", planned), f"{planned} is a study directory", f"`ladder submit {planned}`")
    one_line(run_cli(capsys, "train", planned / "runs"), f"a folder of the study {planned}")
    one_line(run_cli(capsys, "train", run / "model"), f"inside the run directory {run}")
    one_line(run_cli(capsys, "train", tmp_path / "nope"), "does not exist")
    for r in (planned, planned / "runs", run / "model", tmp_path / "nope"):
        assert "ladder plan` first" not in run_cli(capsys, "train", r).stderr


@pytest.mark.parametrize(
    "tokenizer, words",
    [("", "give 'train'"), (" train ", "give 'train'"), ("/nonexistent/tok", "no such tokenizer folder")],
)
def test_validate_refuses_a_tokenizer_data_preparation_will_not_find(tmp_path, capsys, tokenizer, words):
    """`data.tokenizer: /nonexistent` (or '') passed validate and plan; the run failed at data preparation."""
    spec = yaml.safe_load(yaml.safe_dump(GOOD))
    spec["model"]["vocab_size"] = 300
    spec["ladder"]["sizes"] = ["10K", "20K", "40K", "80K"]
    spec["data"]["tokenizer"] = tokenizer
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    one_line(run_cli(capsys, "studies", "validate", tmp_path / "s.yaml"), f"data.tokenizer = {tokenizer!r}", words)
    (tmp_path / "tok").mkdir()
    spec["data"]["tokenizer"] = str(tmp_path / "tok")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    one_line(run_cli(capsys, "plan", tmp_path / "s.yaml", "--dry-run"), "holds no tokenizer.json")
