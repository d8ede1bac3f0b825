"""ladder.plan.compiling: ``training.compile: auto`` compiles the groups of runs whose faster steps repay the
compile."""

from __future__ import annotations

import pytest

from ladder.errors import SpecError
from ladder.plan.compiling import CPU_COSTS, CompileCosts, compile_group, resolve_compile
from ladder.plan.planner import expand
from ladder.studies import load_study
from ladder.studies.spec import StudySpec, parse_study


def _study(compile_setting, hardware: str = "cpu", sizes=("24K", "50K")) -> StudySpec:
    study = load_study("default")
    data = study.model_dump(mode="json")
    data["training"]["compile"] = compile_setting
    data["ladder"]["sizes"] = list(sizes)
    data["ladder"].pop("extra_runs", None)
    data["ladder"]["replicates"] = None
    data["executor"] = {"kind": "local", "hardware": hardware}
    return StudySpec.model_validate(data)


def test_costs_pay_back_by_hand_arithmetic():
    c = CompileCosts(speedup=1.25, cold_s=30.0, warm_s=4.0)
    assert c.break_even_s() == pytest.approx(150.0)  # 30 s / (1 - 1/1.25) = 30 / 0.2
    assert c.saves(150.0, 1) == pytest.approx(0.0)
    assert c.saves(300.0, 3) == pytest.approx(300 * 0.2 - 30 - 2 * 4)
    assert CPU_COSTS.break_even_s() == pytest.approx(440.0)  # 40 s at 1.10x: the module docstring's ~7 minutes


def test_auto_compiles_only_the_groups_that_pay(monkeypatch):
    monkeypatch.setattr("ladder.plan.compiling.cxx_compiler", lambda: "g++")
    runs = expand(_study(False)).runs
    groups = {compile_group(r) for r in runs}
    assert len(groups) == 2  # tied and untied runs of a size share their layers (and so one compiled graph)
    long_group = compile_group(runs[-1])
    estimates = {r.run_id: (400.0 if compile_group(r) == long_group else 20.0) for r in runs}
    out, note = resolve_compile(runs, "auto", "cpu", estimates)
    assert [r.run_id for r in out] == [r.run_id for r in runs]  # the science (and so the ids) untouched
    assert all(r.compile == (compile_group(r) == long_group) for r in out)
    n_long = sum(compile_group(r) == long_group for r in runs)
    assert n_long > 1 and 400 * n_long * (1 - 1 / 1.1) > 40 + 5 * (n_long - 1)  # why the long group compiles
    assert note.startswith(f"compile auto: {n_long} of {len(runs)} run(s) compiled")
    # the same group with too little training left to repay a cold compile stays eager
    lean = {r.run_id: 40.0 / len(runs) for r in runs}
    assert not any(r.compile for r in resolve_compile(runs, "auto", "cpu", lean)[0])


def test_auto_stays_eager_on_gpus_and_without_a_cxx_compiler(monkeypatch):
    runs = expand(_study(False)).runs
    long = {r.run_id: 1e5 for r in runs}
    out, note = resolve_compile(runs, "auto", "h100", long)
    assert not any(r.compile for r in out) and "not measured on a GPU" in note
    monkeypatch.setattr("ladder.plan.compiling.cxx_compiler", lambda: None)
    out, note = resolve_compile(runs, "auto", "cpu", long)
    assert not any(r.compile for r in out) and "no C++ compiler" in note


def test_true_and_false_are_kept_as_given():
    runs = expand(_study(False)).runs
    for setting in (True, False):
        out, note = resolve_compile(runs, setting, "cpu", {})
        assert note is None and all(r.compile is setting for r in out)


def test_the_plan_decides_and_says_so(monkeypatch):
    monkeypatch.setattr("ladder.plan.compiling.cxx_compiler", lambda: "g++")
    plan = expand(_study("auto"))
    assert not any(r.compile for r in plan.runs)  # the default study's small rungs train for seconds
    assert any(n.startswith(f"compile auto: 0 of {len(plan.runs)} run(s) compiled") for n in plan.notes)
    assert all(r.compile for r in expand(_study(True)).runs)


def test_a_bad_compile_setting_names_the_field():
    data = _study(False).model_dump(mode="json")
    data["training"]["compile"] = "sometimes"
    with pytest.raises(SpecError, match=r"training\.compile"):
        parse_study(data)
    data["training"]["compile"] = "auto"
    assert parse_study(data).training.compile == "auto"


def test_plan_json_says_which_runs_compile(tmp_path, capsys, monkeypatch):
    import yaml

    from tests.cli_helpers import run_cli

    monkeypatch.setattr("ladder.plan.compiling.cxx_compiler", lambda: "g++")
    study = tmp_path / "s.yaml"
    study.write_text(yaml.safe_dump(_study(True).model_dump(mode="json")))
    r = run_cli(capsys, "plan", study, "--out", tmp_path / "out", "--json")
    assert r.code == 0, r.stderr
    assert [run["compile"] for run in r.json()["runs"]] == [True] * len(r.json()["runs"])
