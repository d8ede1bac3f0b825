"""Issue 28, retrial 10: the numbers the tool prints agree with each other (fake-trained ladders, no training).

- `forecast show`'s kind column calls a freeze a prediction only where the report and `forecast score` do: its
  hero forecast checked by the hero's final loss, frozen before the hero trained.
"""

from __future__ import annotations

from ladder import layout
from tests.cli_helpers import run_cli
from tests.hero_fixture import hero_spec, train


def _show_kinds(study, capsys) -> dict[int, str]:
    r = run_cli(capsys, "forecast", "show", study, "--json")
    assert r.code == 0, r.stderr
    return {f["number"]: f["kind"] for f in r.json()["forecasts"]}


def test_show_never_calls_a_freeze_made_after_the_hero_a_prediction(study, capsys):
    """`forecast score` says of a freeze made after the hero trained "not a prediction made first", and the report
    never headlines it as one; `forecast show` called it "prediction" because it had a final score."""
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    assert run_cli(capsys, "hero", study).code == 0
    train(layout.StudyDir(study), hero_spec(study), 3.5)
    assert run_cli(capsys, "forecast", "freeze", study, "--note", "late").code == 0
    r = run_cli(capsys, "forecast", "score", study)
    assert r.code == 0, r.stderr
    kinds = _show_kinds(study, capsys)
    assert kinds[1] == "prediction"
    assert kinds[2] != "prediction", kinds
    human = run_cli(capsys, "forecast", "show", study)
    assert human.code == 0, human.stderr
    row2 = next(line for line in human.stdout.splitlines() if line.lstrip("│┃ ").startswith("2 "))
    assert "prediction" not in row2, row2


def test_show_calls_the_hero_forecast_a_projection_when_only_another_point_was_scored(study, capsys):
    """A hero planned at another size is scored at the freeze's --predict point; the hero forecast beside the kind
    (the fit's own hero, far beyond) was never checked, so it stays a projection, as the report says."""
    assert run_cli(capsys, "forecast", "freeze", study, "--predict", "100K:2M").code == 0
    assert run_cli(capsys, "hero", study, "--params", "100K", "--tokens", "2M").code == 0
    spec = hero_spec(study)
    train(layout.StudyDir(study), spec, 3.5)
    r = run_cli(capsys, "forecast", "score", study, "--json")
    assert r.code == 0, r.stderr
    [s] = r.json()["scores"]
    assert s["final"] and s["point"] != "hero", s
    assert _show_kinds(study, capsys)[1] == "projection"
