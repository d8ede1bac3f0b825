import re

import pytest
import typer.main

from tests.cli_helpers import run_cli

# Every command and command group, by the group it hangs from, in the order `--help` lists them. A command
# dropped from the app (or added without being listed here) fails test_help_lists_every_command.
COMMANDS = {
    (): [
        "plan",
        "sanity",
        "train",
        "submit",
        "status",
        "collect",
        "cancel",
        "fit",
        "report",
        "hero",
        "eval",
        "run",
        "studies",
        "model",
        "data",
        "forecast",
    ],
    ("studies",): ["list", "show", "validate"],
    ("model",): ["info"],
    ("data",): ["prepare", "tokenizer"],
    ("data", "tokenizer"): ["train", "eval"],
    ("forecast",): ["freeze", "show", "score"],
}


def _groups(group, path: tuple[str, ...] = ()):
    yield path, group
    for name, command in group.commands.items():
        if hasattr(command, "commands"):  # a command group (typer brings its own click: no isinstance)
            yield from _groups(command, (*path, name))


def _registered() -> dict[tuple[str, ...], list[str]]:
    from ladder.cli import app

    return {path: list(group.commands) for path, group in _groups(typer.main.get_command(app))}


def _listed(help_text: str) -> list[str]:
    """The names in the Commands panel of a group's --help (a wrapped description continues indented)."""
    panel = help_text.split("─ Commands ─", 1)[1]
    return re.findall(r"^│ (\S+)", panel, flags=re.M)


def test_help_lists_every_command(capsys):
    assert _registered() == COMMANDS
    for path, names in COMMANDS.items():
        r = run_cli(capsys, *path, "--help")
        assert r.code == 0, r.stderr
        assert _listed(r.stdout) == names, path


def test_every_command_has_help(capsys):
    for path, names in _registered().items():
        for name in names:
            r = run_cli(capsys, *path, name, "--help")
            assert r.code == 0, (path, name, r.stderr)
            assert re.search(rf"Usage: .*ladder {' '.join((*path, name))} ", r.stdout), (path, name)


def test_the_bootstrap_options_help_states_its_cap(capsys, monkeypatch):
    """`fit --bootstrap` is capped (issue 28: 1e8 resamples grew to 22 GB and were killed); its help says where."""
    from ladder.cli.fit_report import MAX_BOOTSTRAP

    monkeypatch.setenv("COLUMNS", "300")  # rich wraps the help to the terminal: one line per option here
    r = run_cli(capsys, "fit", "--help")
    assert r.code == 0, r.stderr
    [line] = [ln for ln in r.stdout.splitlines() if "--bootstrap" in ln]
    assert f"1 to {MAX_BOOTSTRAP:,}" in line and MAX_BOOTSTRAP == 10_000, line


def test_version(capsys):
    r = run_cli(capsys, "--version")
    assert r.code == 0 and r.stdout.startswith("ladder ")


# SmolLM2-135M's shape (its config.json): 134,515,008 parameters tied
SMOLLM2 = ("model", "info", "--d-model", "576", "--n-layers", "30", "--n-heads", "9", "--n-kv-heads", "3")
SMOLLM2 += ("--ffn-dim", "1536", "--vocab-size", "49152")


def test_model_info_json_smollm2(capsys):
    r = run_cli(capsys, *SMOLLM2, "--json")
    data = r.json()
    assert data["params_total"] == 134_515_008
    assert data["params_embedding"] + data["params_non_embedding"] == data["params_total"]
    assert set(data) >= {
        "params_total",
        "params_embedding",
        "params_non_embedding",
        "flops_per_token",
        "flops_per_token_6n",
        "shape",
    }
    assert data["shape"] == {
        "d_model": 576,
        "n_layers": 30,
        "n_heads": 9,
        "n_kv_heads": 3,
        "head_dim": 64,
        "ffn_dim": 1536,
        "vocab_size": 49152,
        "tied": True,
    }
    untied = run_cli(capsys, *SMOLLM2, "--untied", "--json")
    assert untied.json()["params_total"] == 162_826_560


def test_model_info_from_target_size(capsys):
    r = run_cli(capsys, "model", "info", "--params", "135M", "--aspect-ratio", "19.2", "--kv-ratio", "3", "--json")
    data = r.json()
    assert abs(data["params_total"] / 135e6 - 1) < 0.02


def test_model_info_bad_shape_exits_2(capsys):
    r = run_cli(capsys, "model", "info", "--d-model", "64", "--n-layers", "2", "--n-heads", "4", "--n-kv-heads", "3")
    assert r.code == 2 and "not divisible" in r.stderr
    r = run_cli(capsys, "model", "info", "--params", "lots")
    assert r.code == 2 and "--params" in r.stderr


def test_a_ctrl_c_lost_on_its_way_up_is_raised_again_at_the_next_status_poll():
    """`ladder run` remembers Ctrl-C: should the KeyboardInterrupt be swallowed (raised inside a destructor, say),
    the wait for the runs raises it again instead of waiting the stopped workers out; the handler is restored."""
    import os
    import signal
    import time

    from ladder.cli.run import _ctrl_c

    before = signal.getsignal(signal.SIGINT)
    with _ctrl_c() as pressed:
        pressed.check()  # nothing pressed yet
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # the handler raises at once
        except KeyboardInterrupt:
            pass  # lost on its way up
        with pytest.raises(KeyboardInterrupt):
            pressed.check()
    assert signal.getsignal(signal.SIGINT) is before


def test_model_info_says_how_far_off_a_size_is_without_python_exponents(capsys):
    """`model info --params 1` said "(3.22e+06x the target)"."""
    r = run_cli(capsys, "model", "info", "--params", "1")
    assert r.code == 2 and "e+0" not in r.stderr and "e6x the target" in r.stderr, r.stderr
