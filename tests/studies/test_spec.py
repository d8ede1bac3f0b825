"""Bad study specs fail before anything is written, naming the field, the value and what is allowed."""

import os

import pytest
import yaml

from ladder.studies import builtin_names, load_study
from tests.cli_helpers import run_cli

GOOD = {
    "name": "t",
    "data": {"seq_len": 64},
    "model": {"vocab_size": 256, "head_dim": 16},
    "ladder": {"sizes": ["10K", "20K"]},
    "hero": {"params": "1M"},
}


def _with(path: str, value):
    spec = yaml.safe_load(yaml.safe_dump(GOOD))
    node = spec
    keys = path.split(".")
    for k in keys[:-1]:
        node = node.setdefault(k, {})
    if value is _DELETE:
        node.pop(keys[-1])
    else:
        node[keys[-1]] = value
    return yaml.safe_dump(spec)


_DELETE = object()

BAD = [
    # (case, file text, words the message must contain)
    (
        "unknown top-level field",
        _with("ladderr", {"sizes": [1]}),
        ["ladderr", "unknown field", "allowed here", "ladder"],
    ),
    ("unknown nested field (typo)", _with("training.lr_rle", 0.1), ["training.lr_rle", "unknown field", "lr_rule"]),
    ("negative size", _with("ladder.sizes", ["10K", -5]), ["ladder.sizes[1]", "-5", "greater than 0"]),
    ("zero size", _with("ladder.sizes", [0]), ["ladder.sizes[0]", "greater than 0"]),
    ("empty axis", _with("ablations.tie_embeddings", []), ["ablations.tie_embeddings", "at least 1"]),
    ("string where a number belongs", _with("data.seq_len", "long"), ["data.seq_len", "'long'", "integer"]),
    ("unknown executor", _with("executor.kind", "kubernetes"), ["executor.kind", "kubernetes", "'local'", "'slurm'"]),
    ("unknown schedule", _with("training.schedule.kind", "cosin"), ["training.schedule.kind", "'cosine'", "'wsd'"]),
    ("lr both ways", _with("ablations", {"lr": [0.1], "lr_multipliers": [1]}), ["ablations", "not both"]),
    ("hero both ways", _with("hero", {"params": "1M", "compute": 1e18}), ["hero", "exactly one"]),
    (
        "sizes and depths",
        _with("ladder", {"sizes": [1000], "depths": [2]}),
        ["ladder", "exactly one of 'sizes' or 'depths'"],
    ),
    ("duplicate sizes", _with("ladder.sizes", ["10K", "10K"]), ["sizes", "repeated"]),
    ("missing required section", _with("ladder", _DELETE), ["ladder", "required"]),
    ("bad count suffix", _with("ladder.sizes", ["10Q"]), ["ladder.sizes[0]", "'10Q'"]),
    (
        "wsd without a stable phase",
        _with("training.schedule", {"kind": "wsd", "warmup_fraction": 0.5, "cooldown_fraction": 0.6}),
        ["warmup_fraction + cooldown_fraction"],
    ),
    ("invalid YAML", "name: t\nladder: {sizes: [1K\n", ["invalid YAML", "line"]),
    ("top level not a mapping", "- 1\n- 2\n", ["top level must be a mapping"]),
    (
        "fraction out of range",
        _with("data.validation_fraction", 0.9),
        ["data.validation_fraction", "0.9", "less than 0.5"],
    ),
]


@pytest.mark.parametrize("case,text,words", BAD, ids=[c for c, _, _ in BAD])
@pytest.mark.parametrize("command", ["plan", "validate"])
def test_bad_spec_exits_2_naming_the_problem_and_writes_nothing(tmp_path, capsys, case, text, words, command):
    spec = tmp_path / "study.yaml"
    spec.write_text(text)
    out_dir = tmp_path / "out"
    before = sorted(os.listdir(tmp_path))
    args = ["plan", spec, "--out", out_dir] if command == "plan" else ["studies", "validate", spec]
    r = run_cli(capsys, *args)
    assert r.code == 2, (r.stdout, r.stderr)
    message = " ".join(r.stderr.split())
    for word in words:
        assert word in message, f"{case}: {word!r} not in {message!r}"
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 or len(message) > 150  # one line (rich may wrap long ones)
    assert sorted(os.listdir(tmp_path)) == before and not out_dir.exists()


def test_missing_file_and_unknown_builtin(tmp_path, capsys):
    r = run_cli(capsys, "plan", tmp_path / "nope.yaml", "--out", tmp_path / "o")
    assert r.code == 2 and "no such study file" in r.stderr
    r = run_cli(capsys, "plan", "no-such-study")
    assert r.code == 2 and "built-ins" in r.stderr and "default" in r.stderr
    assert not (tmp_path / "o").exists()


def test_non_utf8_file(tmp_path, capsys):
    f = tmp_path / "s.yaml"
    f.write_bytes(b"name: \xff\xfe\n")
    r = run_cli(capsys, "studies", "validate", f)
    assert r.code == 2 and "UTF-8" in r.stderr


def test_every_builtin_loads_and_round_trips(tmp_path):
    assert {"default", "chinchilla", "tied-vs-untied", "depth-vs-width", "batch-lr"} <= set(builtin_names())
    for name in builtin_names():
        study = load_study(name)
        again = tmp_path / f"{name}.yaml"
        again.write_text(study.to_yaml())
        assert load_study(again) == study


def test_counts_accept_suffixes():
    from ladder.studies.spec import parse_study

    s = parse_study({**GOOD, "ladder": {"sizes": ["50K", "1.5M", 2000]}, "hero": {"compute": "1e21"}})
    assert s.ladder.sizes == [50_000, 1_500_000, 2000]
    assert s.hero.compute == 1e21


BEYOND_SCHEMA = [  # (check, change, words): sanity trains one model, so it does not check what `ladder fit` needs
    ("size check", {"hero": {"params": 1}}, "hero.params = 1: below what this family builds"),
    ("data requirement", {"model": {"vocab_size": 3, "head_dim": 16}}, "model.vocab_size = 3"),
    ("fit requirement", {"ladder": {"sizes": ["10K", "20K"]}}, "`ladder fit` will refuse this ladder"),
]
BEYOND_CASES = [
    (command, change, words)
    for command in ("validate", "plan", "run", "sanity")
    for check, change, words in BEYOND_SCHEMA
    if not (command == "sanity" and check == "fit requirement")
]


@pytest.mark.parametrize("command,change,words", BEYOND_CASES, ids=[f"{c}-{w[:20]}" for c, _, w in BEYOND_CASES])
def test_the_checks_beyond_the_schema_name_the_study_file_too(tmp_path, capsys, change, words, command):
    """Schema errors start with the file ("study.yaml: ..."); the size, machine, data and fit checks run on the
    loaded study once lacked it. Each command that checks a study names its file in all of them."""
    good = {**GOOD, "model": {"vocab_size": 320, "head_dim": 16}, "ladder": {"sizes": ["10K", "20K", "40K", "80K"]}}
    spec = tmp_path / "study.yaml"
    spec.write_text(yaml.safe_dump({**good, "sanity_check": False, **change}))
    args = {"validate": ["studies", "validate", spec], "plan": ["plan", spec, "--dry-run"]}.get(
        command, [command, spec]
    )
    r = run_cli(capsys, *args)
    lines = r.stderr.strip().splitlines()
    assert r.code == 2 and len(lines) == 1, (r.code, r.stderr[-1000:])
    assert lines[0].startswith(f"error: {spec}: ") and words in lines[0], lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["study.yaml"]


def test_a_huge_or_alias_expanded_value_is_shown_cut_short(tmp_path, capsys):
    """A 10 MB `name` put a 10 MB error line on stderr, and a 'billion laughs' YAML (aliases nested 8 deep) a
    226 MB one: the value is shown cut short, and the line stays one line."""
    from tests.cli_helpers import one_line, run_cli

    huge = tmp_path / "huge.yaml"
    huge.write_text(f"name: {'x' * 1_000_000}\n")
    line = one_line(run_cli(capsys, "studies", "validate", huge), "name = 'xxx", "at most 200 characters")
    assert len(line) < 1000
    rows = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    rows += [f"{b}: &{b} [{', '.join(['*' + a] * 9)}]" for a, b in zip("abcdefg", "bcdefgh")]
    laughs = tmp_path / "laughs.yaml"
    laughs.write_text("\n".join(rows) + "\nname: *h\n")
    line = one_line(run_cli(capsys, "studies", "validate", laughs), "name = [[")
    assert len(line) < 2000


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"replicates": {"sizes": ["10K"], "seeds": [0]}}, ["replicates.seeds [0]", "training.seed 0"]),
        (
            {"replicates": {"sizes": ["10K"], "seeds": [1, 2]}, "ablations": {"seed": [0, 1]}},
            ["replicates.seeds [1]", "ablations.seed [0, 1]"],
        ),
    ],
)
def test_a_replicate_with_the_studys_own_seed_is_refused(tmp_path, capsys, changes, words):
    """`replicates: {sizes: [4K], seeds: [0]}` with the default seed 0 planned no replicate at all (the planner
    merged it into the run itself), while the plan said "replicates at 4K with seeds 0"."""
    import yaml

    from tests.cli_helpers import one_line, run_cli

    spec = {
        "name": "t",
        "data": {"seq_len": 64},
        "model": {"vocab_size": 256, "head_dim": 16},
        "ladder": {"sizes": ["10K", "20K", "40K", "80K"]},
        "hero": {"params": "1M"},
    }
    spec["ladder"]["replicates"] = changes["replicates"]
    if "ablations" in changes:
        spec["ablations"] = changes["ablations"]
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    one_line(run_cli(capsys, "studies", "validate", tmp_path / "s.yaml"), "another seed", *words)


def test_an_integer_field_given_1e30_is_called_too_large_not_unparsable(tmp_path, capsys):
    """`hero.tokens: 1e30` said "Unable to parse input string as an integer, exceeded maximum size"."""
    from tests.cli_helpers import one_line, run_cli

    (tmp_path / "s.yaml").write_text(
        "name: t\ndata: {seq_len: 64}\nmodel: {vocab_size: 256, head_dim: 16}\n"
        "ladder: {sizes: [10K, 20K, 40K, 80K]}\nhero: {params: 1M, tokens: 1.0e+30}\n"
    )
    line = one_line(run_cli(capsys, "studies", "validate", tmp_path / "s.yaml"), "hero.tokens", "far too large")
    assert "parse input string" not in line


def test_a_name_in_another_script_keeps_its_letters_in_the_default_directory():
    """`name: 名前` was planned into ./ladder-runs/study (and `ünï 名前` into ./ladder-runs/n), so two such studies
    collided there; ASCII names keep their slugs."""
    from ladder.studies.spec import StudySpec

    def slug(name):
        return StudySpec.model_validate(
            {"name": name, "ladder": {"sizes": ["10K", "20K"]}, "hero": {"params": "1M"}}
        ).slug

    assert (slug("名前"), slug("ünï 名前"), slug("a/b"), slug(".."), slug("my ladder!")) == (
        "名前",
        "ünï-名前",
        "a-b",
        "study",
        "my-ladder",
    )


def test_the_default_descriptions_hero_multiples_are_the_plans():
    """User retrial (issue 28): `ladder studies list` said of the default study "the hero (800K, 8x the top
    rung)", while the top rung (its own YAML's word, and docs/in-context.md's) is the untied 201.3K: `ladder fit`
    says 3.97x the ladder's largest model. 8x is the largest tied rung, as the README says."""
    import re

    from ladder.plan.planner import expand

    study = load_study("default")
    runs = [r for r in expand(study).runs if r.role != "hero"]
    top = {"top rung": max(r.params for r in runs), "tied rung": max(r.params for r in runs if r.shape.tied)}
    said = re.findall(r"(\d+)x the (?:largest |untied )?(top rung|tied rung)", study.description)
    assert said, study.description
    for times, which in said:
        assert int(times) == round(study.hero.params / top[which]), (times, which, top)
