"""lm-eval on a run's checkpoint, offline: shipped tasks, a user's include path, results collect can read."""

import hashlib
import json
import math
import socket
import sys
import sysconfig
from pathlib import Path

import pytest

from ladder import layout
from ladder.books.collect import _read_tasks
from ladder.errors import SpecError, StateError
from ladder.model.evaluation import downstream, results
from ladder.model.evaluation.tasks import DATA_DIR, SHIPPED_TASKS, TASKS_DIR
from ladder.model.evaluation.tasks import build as task_build


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> layout.RunDir:
    """A finished run with a tiny untrained model (accuracy near chance is fine: this tests the plumbing)."""
    from ladder.model.data.tokenizer import train_tokenizer
    from ladder.model.shape import ModelShape
    from ladder.model.training.llama import build_model, save_model

    study = tmp_path_factory.mktemp("study")
    rd = layout.RunDir(study / "runs" / "tiny01")
    rd.path.mkdir(parents=True)
    rd.spec.write_text("{}")
    rd.result.write_text('{"status": "done"}')
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    train_tokenizer([p.read_text(encoding="utf-8") for p in sorted(stdlib.glob("[a-c]*.py"))[:20]], 300, rd.model)
    shape = ModelShape(
        d_model=32,
        n_layers=2,
        n_heads=2,
        n_kv_heads=2,
        head_dim=16,
        ffn_dim=64,
        vocab_size=300,
        tied=True,
        max_seq_len=256,
    )
    save_model(build_model(shape, bos_token_id=0, eos_token_id=0, pad_token_id=1), rd.model)
    return rd


@pytest.fixture
def no_network(monkeypatch):
    """Refuses every network connection and records the attempts (the test asserts there were none: a library
    that catches the error would hide a raised one)."""
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args[1:2] or args[:1])
        raise OSError("network access refused by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    yield attempts
    assert attempts == [], f"network access attempted: {attempts}"


def test_shipped_tasks_offline_write_results_collect_reads_and_are_not_redone(run_dir, no_network):
    study = run_dir.path.parent.parent
    assert results.runs_to_evaluate(study, limit=4) == [run_dir]
    out = downstream.evaluate_run(run_dir, limit=4, batch_size=8, device="cpu", save_samples=True)
    assert out["evaluated"] == list(SHIPPED_TASKS) and out["skipped"] == []
    for task in SHIPPED_TASKS:
        data = json.loads(results.results_file(run_dir, task).read_text())
        assert data["ladder"]["limit"] == 4 and data["config"]["limit"] == 4
        assert data["n-samples"][task]["effective"] == 4 and task in data["versions"] and task in data["configs"]
        assert data["config"]["model_args"]["pretrained"] == str(run_dir.model)
        assert "samples" not in data
    cols, problems = _read_tasks(run_dir)
    assert problems == []
    for key in ("acc", "acc_norm", "bpb"):
        assert f"task/ladder_py_next_line/{key}" in cols
    assert 0 <= cols["task/ladder_py_next_line/acc"] <= 1
    assert 0 < cols["task/ladder_py_next_line/bpb"] < 20 and 0 < cols["task/ladder_py_ppl/bits_per_byte"] < 20
    assert not any("stderr" in k for k in cols)
    assert out["results"]["ladder_py_ppl"]["bits_per_byte"] == cols["task/ladder_py_ppl/bits_per_byte"]

    # bpb is the mean over documents of -loglik(correct) / ln 2 / bytes(correct continuation)
    samples = [json.loads(x) for x in results.samples_file(run_dir, "ladder_py_next_line").read_text().splitlines()]
    assert len(samples) == 4
    expected = (
        sum(
            -s["filtered_resps"][s["doc"]["label"]][0]
            / math.log(2)
            / len(s["doc"]["choices"][s["doc"]["label"]].encode())
            for s in samples
        )
        / 4
    )
    assert cols["task/ladder_py_next_line/bpb"] == pytest.approx(expected)

    mtimes = {t: results.results_file(run_dir, t).stat().st_mtime_ns for t in SHIPPED_TASKS}
    again = downstream.evaluate_run(run_dir, limit=4, device="cpu")
    assert again["evaluated"] == [] and again["skipped"] == list(SHIPPED_TASKS)
    assert {t: results.results_file(run_dir, t).stat().st_mtime_ns for t in SHIPPED_TASKS} == mtimes
    assert again["results"]["ladder_py_next_line"]["acc"] == cols["task/ladder_py_next_line/acc"]
    assert results.runs_to_evaluate(study, limit=4) == []
    assert results.runs_to_evaluate(study, limit=5) == [run_dir]

    # another limit is another evaluation
    other = downstream.evaluate_run(run_dir, ["ladder_py_next_line"], limit=2, device="cpu")
    assert other["evaluated"] == ["ladder_py_next_line"]
    assert json.loads(results.results_file(run_dir, "ladder_py_next_line").read_text())["ladder"]["limit"] == 2


def test_evaluating_outside_a_git_repository_prints_no_git_error(run_dir, no_network, tmp_path, monkeypatch, capfd):
    """retrial8: lm-eval asks `git describe` of the working directory, and git printed "fatal: not a git
    repository" to the user's terminal from every study folder outside a repository."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))  # no repository above tmp_path either
    out = downstream.evaluate_run(run_dir, ["ladder_py_ppl"], limit=2, device="cpu", redo=True)
    assert out["evaluated"] == ["ladder_py_ppl"]
    assert "not a git repository" not in capfd.readouterr().err
    assert json.loads(results.results_file(run_dir, "ladder_py_ppl").read_text())["git_hash"] is None


def test_lm_evals_advice_to_pass_metadata_in_console_is_not_shown(run_dir, no_network, caplog):
    """`ladder eval` printed lm-eval's "Custom kwargs can be passed to `--metadata` in console" for each shipped
    task: an option `ladder eval` does not have. Its other warnings still reach the user."""
    import logging

    caplog.set_level(logging.INFO)
    out = downstream.evaluate_run(run_dir, ["ladder_py_ppl"], limit=2, device="cpu", redo=True)
    assert out["evaluated"] == ["ladder_py_ppl"]
    assert "--metadata" not in caplog.text
    logging.getLogger("lm_eval.api.task").warning("another warning")  # the filter is gone with the evaluation
    assert "another warning" in caplog.text


@pytest.mark.parametrize(("value", "said"), [(0.375, "0.3750"), (1807.1543, "1807.1543"), (1.6623e30, "1.66e30")])
def test_the_eval_table_writes_a_huge_metric_in_a_power_of_ten(value, said):
    """An untrained model's word perplexity read "1662295150872978170480879992832.0000"."""
    from ladder.cli.evaluate import metric_text

    assert metric_text(value) == said


def test_user_include_path_task(run_dir, no_network, tmp_path):
    data = tmp_path / "qa.jsonl"
    rows = [{"q": f"x = {i}\ny = x +", "choices": [" 1", " banana"], "label": 0} for i in range(5)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tasks = tmp_path / "my_tasks"
    tasks.mkdir()
    (tasks / "my_add.yaml").write_text(
        "task: my_add\n"
        "dataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {data}\n"
        "output_type: multiple_choice\ntest_split: test\n"
        "doc_to_text: q\ndoc_to_choice: choices\ndoc_to_target: label\ntarget_delimiter: ''\n"
        "metric_list:\n  - metric: acc\n"
    )
    out = downstream.evaluate_run(run_dir, ["my_add"], include_path=tasks, limit=3, device="cpu")
    assert out["evaluated"] == ["my_add"]
    cols, _ = _read_tasks(run_dir)
    assert "task/my_add/acc" in cols and "task/my_add/bpb" in cols


def test_errors(run_dir, tmp_path, monkeypatch):
    with pytest.raises(StateError, match="no final model"):
        downstream.evaluate_run(tmp_path / "unfinished")
    with pytest.raises(SpecError, match="not a folder"):
        downstream.evaluate_run(run_dir, ["x"], include_path=tmp_path / "missing")
    with pytest.raises(SpecError, match="limit must be positive"):
        downstream.evaluate_run(run_dir, limit=0)
    # unknown names: lm-eval's own index (15k YAMLs, slow to scan) is left out here
    real = downstream._task_manager
    monkeypatch.setattr(downstream, "_task_manager", lambda include, defaults: real(include, False))
    with pytest.raises(SpecError, match=r"unknown lm-eval task.*ladder_py_next_lin'.*did you mean ladder_py_next_line"):
        downstream.resolve_task_manager(["ladder_py_next_lin"])
    # retrial8: a broken YAML in the user's --include-path, and the advice was "add your own with --include-path"
    mine = tmp_path / "my_tasks"
    mine.mkdir()
    (mine / "broken.yaml").write_text("task: [unclosed\n")
    with pytest.raises(SpecError, match="unknown lm-eval task") as caught:
        downstream.resolve_task_manager(["broken"], include_path=mine)
    assert "add your own with --include-path" not in str(caught.value)
    assert f"nor in --include-path {mine.resolve()}" in str(caught.value) and "cannot read" in str(caught.value)


def test_shipped_task_data_is_small_well_formed_and_reproducible():
    next_line = [json.loads(x) for x in (DATA_DIR / task_build.NEXT_LINE_FILE).read_text().splitlines()]
    ppl = [json.loads(x) for x in (DATA_DIR / task_build.PPL_FILE).read_text().splitlines()]
    assert len(next_line) == task_build.N_NEXT_LINE and len(ppl) == task_build.N_PPL
    assert sum(p.stat().st_size for p in DATA_DIR.iterdir()) < 300_000
    for ex in next_line:
        assert len(ex["choices"]) == 4 and 0 <= ex["label"] < 4
        assert len({c.strip() for c in ex["choices"]}) == 4 and all(c.startswith("\n") for c in ex["choices"])
        assert ex["context"] and not ex["context"].endswith("\n")
    assert {ex["label"] for ex in next_line} == {0, 1, 2, 3}
    assert all(len(p["text"]) >= task_build.MIN_PPL_CHARS for p in ppl)
    assert sorted(p.stem for p in TASKS_DIR.glob("*.yaml")) == sorted(SHIPPED_TASKS)
    # rebuilding gives the committed files, where this interpreter's standard library is the one they came from
    meta = json.loads((DATA_DIR / task_build.SOURCES_FILE).read_text())
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    try:
        same = all(
            hashlib.sha256((stdlib / s["path"]).read_bytes()).hexdigest() == s["sha256"] for s in meta["sources"]
        )
    except OSError:
        same = False
    if not same:
        pytest.skip(f"this Python's standard library ({sys.version.split()[0]}) is not the one the data came from")
    built = task_build.build(stdlib)
    for name in (task_build.NEXT_LINE_FILE, task_build.PPL_FILE):
        assert built[name] == (DATA_DIR / name).read_text(), name
