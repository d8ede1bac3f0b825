"""Re-trial 13 of issue 28, "author my own study": a demanding user writes a study YAML from the docs (not from a
built-in one) and tries every documented field. What `studies validate` and `plan` let through must be what the
later stages do; a contradictory field is one line naming it, exit 2, nothing written; a field the study's other
choices leave unread is said, not ignored in silence. Validate/plan level only: nothing trains."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.cli_helpers import one_line, run_cli

BASE = {
    "name": "mine",
    "data": {"corpus": "embedded", "seq_len": 64, "max_bytes": "8M"},
    "model": {"vocab_size": 384, "head_dim": 8, "aspect_ratio": 16},
    "ladder": {"sizes": ["20K", "40K", "80K", "160K"], "tokens_per_param": 20, "budgets": [1, 2]},
    "hero": {"params": "1M"},
}


def _study(tmp_path: Path, name: str = "mine", **sections) -> Path:
    d = json.loads(json.dumps(BASE))
    for key, value in sections.items():
        d[key] = {**d.get(key, {}), **value} if isinstance(value, dict) else value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(d, sort_keys=False), encoding="utf-8")
    return path


def _refused_everywhere(capsys, tmp_path: Path, spec: Path, *words: str) -> None:
    """`studies validate` and `plan` both refuse ``spec`` in one line holding ``words``, and plan writes nothing."""
    one_line(run_cli(capsys, "studies", "validate", spec), *words)
    out = tmp_path / "planned"
    one_line(run_cli(capsys, "plan", spec, "--out", out), *words)
    assert not out.exists()


def _warnings(capsys, spec: Path) -> str:
    r = run_cli(capsys, "studies", "validate", spec)
    assert r.code == 0, r.stderr
    return " ".join(r.stderr.split())


def test_a_batch_cap_below_the_batch_floor_is_refused(tmp_path, capsys):
    """`batch_max_tokens: 128` with `batch_min_sequences: 8` of 64 tokens: the floor won, every batch was planned at
    512 tokens, four times the cap, and the plan's note said "at most batch_max_tokens 128: 20K 1,087 -> 512"."""
    spec = _study(tmp_path, training={"batch_max_tokens": 128, "batch_min_sequences": 8})
    _refused_everywhere(
        capsys, tmp_path, spec, "training.batch_max_tokens = 128", "batch_min_sequences 8", "data.seq_len 64", "512"
    )
    # a cap at the floor is a study that can be planned
    fine = _study(tmp_path, "fine", training={"batch_max_tokens": 512, "batch_min_sequences": 8})
    assert run_cli(capsys, "studies", "validate", fine).code == 0


@pytest.mark.parametrize(
    "executor, field",
    [
        ({"kind": "local", "local": {"gpus": [0, 1]}}, "executor.local.gpus = [0, 1]"),
        ({"kind": "slurm", "slurm": {"gpus_per_task": 2}}, "executor.slurm.gpus_per_task = 2"),
    ],
)
def test_gpus_on_cpu_hardware_are_refused(tmp_path, capsys, executor, field):
    """GPUs listed for the executor that runs the study, with executor.hardware left at its default cpu: the runs were
    planned in fp32 (precision auto on a CPU, part of each run's id) with CPU memory and time estimates, then
    trained on the GPUs, without a word."""
    spec = _study(tmp_path, executor=executor)
    _refused_everywhere(capsys, tmp_path, spec, field, "executor.hardware is 'cpu'", "h100")
    assert (
        run_cli(capsys, "studies", "validate", _study(tmp_path, "gpu", executor={**executor, "hardware": "h100"})).code
        == 0
    )
    # the GPUs of an executor the study does not run on are not read: no contradiction
    other = {"kind": "local"} if executor["kind"] == "slurm" else {"kind": "slurm"}
    assert run_cli(capsys, "studies", "validate", _study(tmp_path, "other", executor={**executor, **other})).code == 0


def test_isoflop_sizes_in_chinchilla_mode_are_refused(tmp_path, capsys):
    """`isoflop_sizes` beside `sizes` in mode chinchilla was planned as if it were not there ('compute_budgets' there
    is refused)."""
    spec = _study(tmp_path, ladder={"isoflop_sizes": ["10K", "20K", "30K"]})
    _refused_everywhere(capsys, tmp_path, spec, "isoflop_sizes", "mode: isoflop")


def test_fields_the_study_leaves_unread_are_said(tmp_path, capsys):
    """A cooldown under a cosine schedule, a final LR under a constant one, a warmup_fraction beside warmup_tokens,
    the LR and batch rules' knobs beside absolute values, the IsoFLOP knobs in mode chinchilla: each was accepted
    and ignored in silence. validate and plan now warn, naming the field and what makes it unread."""
    cosine = _study(tmp_path, "cos", training={"schedule": {"kind": "cosine", "cooldown_fraction": 0.3}})
    said = _warnings(capsys, cosine)
    assert "training.schedule.cooldown_fraction = 0.3 is not used: schedule.kind cosine has no cooldown" in said
    constant = _study(
        tmp_path,
        "const",
        training={
            "lr": 0.01,
            "lr_scale": 0.2,
            "lr_max": 0.016,
            "batch_tokens": 1024,
            "batch_scale": 2,
            "schedule": {"kind": "constant", "final_lr_fraction": 0, "warmup_tokens": "4K", "warmup_fraction": 0.1},
        },
    )
    said = _warnings(capsys, constant)
    for words in (
        "training.schedule.final_lr_fraction = 0.0 is not used: schedule.kind constant",
        "training.schedule.warmup_fraction = 0.1 is not used: training.schedule.warmup_tokens sets the warmup",
        "training.lr_scale = 0.2, training.lr_max = 0.016 are not used: training.lr 0.01",
        "training.batch_scale = 2.0 is not used: training.batch_tokens 1,024",
    ):
        assert words in said, (words, said)
    iso = _study(tmp_path, "iso", ladder={"isoflop_points": 7})
    assert "ladder.isoflop_points = 7 is not used: mode chinchilla" in _warnings(capsys, iso)
    r = run_cli(capsys, "plan", iso, "--dry-run", "--json")
    assert r.code == 0 and any("isoflop_points" in w for w in r.json()["warnings"])


@pytest.mark.parametrize("name", ["default", "chinchilla", "tied-vs-untied", "depth-vs-width", "batch-lr"])
def test_a_study_printed_by_studies_show_has_no_unread_field(tmp_path, capsys, name):
    """`ladder studies show` prints every field, defaults included: none of them is said to be unread."""
    r = run_cli(capsys, "studies", "show", name)
    path = tmp_path / f"{name}.yaml"
    path.write_text(r.stdout, encoding="utf-8")
    r = run_cli(capsys, "studies", "validate", path, "--no-fit-check")
    assert r.code == 0 and "not used" not in r.stderr, r.stderr


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_a_text_key_the_corpus_lacks_is_refused_at_validate(tmp_path, capsys, kind):
    """A local corpus whose records hold their text under another name than data.text_key passed validate and plan;
    `ladder data prepare` then said "has no training documents: is text_key ('text') not the field...", after the
    plan. Now validate names the field and the fields the file has."""
    docs = [f"document {i} " * 40 for i in range(30)]
    if kind == "jsonl":
        corpus = tmp_path / "docs.jsonl"
        corpus.write_text("".join(json.dumps({"content": d}) + "\n" for d in docs), encoding="utf-8")
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        corpus = tmp_path / "docs.parquet"
        pq.write_table(pa.table({"content": docs}), corpus)
    data = {"corpus": str(corpus), "seq_len": 64, "validation_tokens": 256, "validation_fraction": 0.3}
    spec = _study(tmp_path, data=data)
    _refused_everywhere(capsys, tmp_path, spec, "data.text_key = 'text'", str(corpus), "'content'")
    ok = _study(tmp_path, "ok", data={**data, "text_key": "content"})
    assert run_cli(capsys, "studies", "validate", ok).code == 0


def test_a_micro_batch_below_one_sequence_is_refused(tmp_path, capsys):
    """`micro_batch_tokens: 10` at seq_len 64 was planned as one 64-token sequence per forward pass, above the memory
    cap the study set, without a word; a batch below one sequence was already refused."""
    spec = _study(tmp_path, training={"micro_batch_tokens": 10})
    _refused_everywhere(capsys, tmp_path, spec, "training.micro_batch_tokens = 10", "data.seq_len 64", "at least 64")
    assert (
        run_cli(capsys, "studies", "validate", _study(tmp_path, "one", training={"micro_batch_tokens": 64})).code == 0
    )


@pytest.mark.parametrize(
    "extra, words",
    [
        ({"size": "320K", "seed": -1}, ["ladder.extra_runs[0].seed = -1"]),
        ({"size": "320K", "seed": 2**40}, ["ladder.extra_runs[0].seed", "4294967296"]),
        ({"size": "320K", "budget": 1e9}, ["extra_runs[0].budget = 1e9", "2e10 tokens per parameter", "100,000"]),
        ({"size": 100}, ["ladder.extra_runs[0].size = 100", "below what this family builds", "664"]),
    ],
)
def test_an_extra_run_is_bounded_as_a_rung_is(tmp_path, capsys, extra, words):
    """ladder.extra_runs (what `plan --suggest --add` writes, and a user may write by hand) took a seed of -1 or
    1e14 (training.seed is 0 to 2^32), a budget of 1e9 (2e10 tokens per parameter: "up to 3.07e+06 days", "the
    ladder costs 1.11e+08x the hero's compute") and a size of 100 that became a 664-parameter model, without a word;
    ladder.sizes and ladder.budgets refuse each."""
    ladder = {**BASE["ladder"], "extra_runs": [extra]}
    _refused_everywhere(capsys, tmp_path, _study(tmp_path, ladder=ladder), *words)


def test_an_extra_run_at_a_size_of_the_grid_is_not_a_duplicate_rung(tmp_path, capsys):
    """Another budget or seed at a size the grid has is what an extra run is for: not "become the same model"."""
    ladder = {**BASE["ladder"], "extra_runs": [{"size": "40K", "budget": 0.5}, {"size": "20K", "seed": 9}]}
    r = run_cli(capsys, "plan", _study(tmp_path, ladder=ladder), "--dry-run", "--json")
    assert r.code == 0, r.stderr
    assert len(r.json()["runs"]) == 8 + 1 + 2  # 40K at 0.5x; 20K with seed 9 at each of ladder.budgets


def test_a_ladder_far_dearer_than_its_hero_is_said_in_plain_numbers(tmp_path, capsys):
    """The cost warning wrote "1.11e+08x the hero's compute" (Python's exponent) where every other number of the
    plan reads 1.11e8."""
    from ladder.model.config import share_of_hero

    assert share_of_hero(1.11e10) == ("1.11e8x", "the hero's compute")
    assert share_of_hero(3861.5) == ("38.6x", "the hero's compute")
    # and the other way: the README's own study with its `hero: {compute: 1e21}` cost "2.0e-06% of the hero's compute"
    assert share_of_hero(2.0e-6) == ("2.00e-6%", "of the hero's compute")
    spec = _study(tmp_path, hero={"params": "20K", "tokens": "1K"})  # the ladder costs 69,957x it
    r = run_cli(capsys, "plan", spec, "--dry-run", "--no-fit-check")
    assert r.code == 0 and "e+" not in r.stdout + r.stderr, r.stderr


def test_runs_and_a_hero_beyond_what_the_corpus_can_hold_are_warned(tmp_path, capsys):
    """A folder of .txt files of 40 KB fed runs of up to 6.4M tokens, 160 passes over it, and nothing said so: the
    trainer wraps around its windows in silence. A token is at least one byte, so tokens beyond the corpus's bytes
    are read more than once; validate and plan say it, of the runs and of the hero."""
    folder = tmp_path / "txt"
    folder.mkdir()
    for i in range(40):
        (folder / f"d{i}.txt").write_text(f"text {i} " * 120, encoding="utf-8")
    data = {"corpus": str(folder), "seq_len": 64, "validation_tokens": "1K", "validation_fraction": 0.3}
    said = _warnings(capsys, _study(tmp_path, data=data))
    assert "8 run(s) train on more tokens than" in said and "read their training data more than once" in said, said
    assert "the hero trains on 20M tokens, more than" in said, said
    # the embedded corpus under data.max_bytes: only the hero is beyond it
    said = _warnings(capsys, _study(tmp_path, "capped"))
    assert (
        "run(s) train on more tokens" not in said
        and "the hero trains on 20M tokens, more than data.max_bytes 8M" in said
    )
    assert "can hold" not in _warnings(capsys, _study(tmp_path, "roomy", data={"max_bytes": "30M"}))


def test_a_depth_ladder_is_not_told_its_sizes_hold_a_parameter_count(tmp_path, capsys):
    """ladder.depths with tied and untied runs under param_count total: the plan's note said "sizes hold total
    parameters fixed: an untied run spends another V x d on its head, so its body is smaller", above a table where
    the tied and untied runs of each depth have one shape (32x2) and 36K and 48.29K parameters; and its cost warning
    said "check ladder.sizes", which a depth ladder has none of."""
    spec = _study(
        tmp_path,
        ladder={"sizes": None, "depths": [2, 3, 4, 5], "budgets": [1, 2], "param_count": "total"},
        ablations={"tie_embeddings": [True, False]},
        data={"max_bytes": "30M"},
    )
    r = run_cli(capsys, "plan", spec, "--dry-run", "--json")
    assert r.code == 0, r.stderr
    plan = r.json()
    notes = " ".join(plan["notes"])
    assert "sizes hold" not in notes and "body is smaller" not in notes, notes
    assert "depths hold the shape fixed" in notes and "share the body" in notes, notes
    shapes = {(json.dumps(x["shape"] | {"tied": None}), x["shape"]["tied"]) for x in plan["runs"]}
    assert len({s for s, _ in shapes}) == 4  # one shape per depth, tied or not: what the note now says
    said = " ".join(plan["warnings"])
    assert "check ladder.depths and hero" in said and "ladder.sizes" not in said, said


def test_an_evals_limit_above_one_is_a_whole_number(tmp_path, capsys):
    """`evals: {limit: 1.5}` passed validate, and lm-eval took int(1.5) = 1 example per task in silence, where
    `ladder eval --limit 2.5` is refused for the same reason."""
    _refused_everywhere(capsys, tmp_path, _study(tmp_path, evals={"limit": 1.5}), "evals.limit = 1.5", "whole number")
    for fine in (0.5, 1, 20):
        assert run_cli(capsys, "studies", "validate", _study(tmp_path, "ok", evals={"limit": fine})).code == 0


def test_an_ffn_multiple_too_coarse_for_the_widths_is_said(tmp_path, capsys):
    """`model.ffn_multiple: 256` on rungs 24 to 72 wide: sizing keeps ffn_dim within ffn_band of ffn_ratio x d_model
    (the guide's words), but one multiple is already 10.7x d_model at 20K, and the plan said nothing of it."""
    spec = _study(tmp_path, model={"ffn_multiple": 256})
    r = run_cli(capsys, "plan", spec, "--dry-run", "--json")
    assert r.code == 0, r.stderr
    notes = " ".join(r.json()["notes"])
    assert "model.ffn_multiple 256 is wider than the band" in notes and "20K ffn_dim 256 = 10.7x d_model 24" in notes
    r = run_cli(capsys, "plan", _study(tmp_path, "regular"), "--dry-run", "--json")
    assert "ffn_multiple" not in " ".join(r.json()["notes"])


def test_a_split_whose_interval_reaches_zero_does_not_size_a_compute_hero(monkeypatch):
    """`hero: {compute: 7.49e11}` on a 4-size ladder: the Chinchilla law's N_opt at the hero had the 90% interval
    [0, 2.48M], which allocation.undetermined read as "no bootstrap" and so as determined: fit sized the hero at
    3.566 parameters x 35.01B tokens, loss 90% [0.078, 1.06e6] (+-25,487,933%), and recommended it. An interval that
    reaches zero determines nothing: the hero falls back to the study's tokens_per_param rule, with the reason."""
    from ladder.reports.fits import fit_study
    from ladder.reports.fits.loss.allocation import undetermined
    from ladder.reports.fits.study import study_hero
    from tests.reports.fits.synthetic import make_study, study_table

    split = {"form": "chinchilla", "compute_6nd": 6e11, "ci90": {"params": [0.0, 2.073e6]}}
    said = undetermined(split)
    assert said and "[0, 2.073M], reaches zero" in said and "does not determine the split" in said
    assert undetermined({**split, "ci90": {"params": [1e5, 3.9e5]}}) is None
    assert undetermined({**split, "ci90": {}}) is None  # no bootstrap: it stands

    study = make_study(
        ladder={"sizes": ["25K", "50K", "100K", "200K"], "param_count": "non_embedding", "tokens_per_param": 20,
                "budgets": [0.5, 1, 2]},
        ablations={},
        hero={"compute": 2e15},
    )  # fmt: skip
    real = study_hero.allocation

    def reaching_zero(law, c):
        out = real(law, c)
        return {**out, "params": 3.566, "tokens": c / 6 / 3.566, "ci90": {**out["ci90"], "params": [0.0, 2.48e6]}}

    monkeypatch.setattr(study_hero, "allocation", reaching_zero)
    d = fit_study(study_table(study, noise=0.003), study=study, n_boot=20).to_dict()
    hero = d["hero"]
    assert hero["allocation"] == "rule" and "reaches zero" in hero["allocation_reason"], hero["allocation_reason"]
    assert hero["params"] > 1e5 and hero["tokens"] / hero["params"] == pytest.approx(20)
    assert d["compute_optimal"]["determined"] is False


@pytest.mark.parametrize(
    "training, ablations, field",
    [
        ({"batch_tokens": 8192, "batch_max_tokens": 2048}, {}, "training.batch_tokens = 8,192"),
        ({"batch_max_tokens": 2048}, {"batch_tokens": [1024, 4096, 16384]}, "ablations.batch_tokens[1] = 4,096"),
    ],
)
def test_a_batch_the_study_sets_above_its_own_cap_is_refused(tmp_path, capsys, training, ablations, field):
    """A batch and a cap both written in the study: the cap won in silence but for a note ("8,192 -> 2,048"), and
    a batch sweep of [1024, 4096, 16384] under a 2,048 cap became two batches, its warning saying "spread the
    values", which would not have helped."""
    spec = _study(tmp_path, training=training, ablations=ablations)
    _refused_everywhere(capsys, tmp_path, spec, field, "training.batch_max_tokens 2,048", "raise batch_max_tokens")
    at_cap = _study(tmp_path, "at-cap", training={"batch_tokens": 2048, "batch_max_tokens": 2048})
    assert run_cli(capsys, "studies", "validate", at_cap).code == 0


def test_a_local_corpus_too_small_for_its_validation_set_is_refused_at_validate(tmp_path, capsys):
    """A 60-file folder of .txt files (about 180 KB) passed validate and plan; `ladder data prepare` then tokenized
    it and refused: "no document of the corpus fell in the validation split ... validation_tokens = 131,072 are
    needed". data.max_bytes was already checked so; the corpus's own size now is too."""
    folder = tmp_path / "txt"
    folder.mkdir()
    for i in range(60):
        (folder / f"d{i}.txt").write_text(f"document {i} " * 250, encoding="utf-8")
    spec = _study(tmp_path, data={"corpus": str(folder), "seq_len": 64, "max_bytes": None})
    # the split is a hash share of the documents, so the bound is what documents of even size need, said as such
    words = ("data.corpus", "data.validation_tokens 131,072", "documents of even size need", "about 6.554M bytes")
    _refused_everywhere(capsys, tmp_path, spec, *words)
    fits = {
        "corpus": str(folder),
        "seq_len": 64,
        "max_bytes": None,
        "validation_tokens": "2K",
        "validation_fraction": 0.3,
    }
    assert run_cli(capsys, "studies", "validate", _study(tmp_path, "fits", data=fits)).code == 0


def test_the_tokenizer_commands_name_a_text_key_the_corpus_lacks(tmp_path, capsys):
    """`ladder data tokenizer train CORPUS` on a jsonl file whose records hold 'content' said only "no training text
    was read (an empty corpus, the text under another key, or files that are not UTF-8 text)"; it now names the
    key and the fields the records have, as validate does of data.text_key, and writes nothing."""
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"content": f"text {i} " * 50}) + "\n" for i in range(40)), encoding="utf-8")
    out = tmp_path / "tok"
    r = run_cli(capsys, "data", "tokenizer", "train", corpus, "--vocab-size", 300, "--out", out)
    one_line(r, "--text-key 'text'", "'content'", "set --text-key")
    assert not out.exists()
    r = run_cli(capsys, "data", "tokenizer", "eval", tmp_path, corpus, "--text-key", "body")
    one_line(r, "--text-key 'body'", "'content'")


def test_a_depth_ladder_with_an_aspect_sweep_is_counted_in_depths(tmp_path, capsys):
    """ladder.depths [2, 3, 4] with ablations.aspect_ratio [8, 16, 32]: each depth is three models of other sizes,
    and the fit keeps the best of each; the plan's warning said "the ladder has 6 runs at 3 sizes (6.736K, 20.9K,
    47.39K)", the narrowest aspect ratio's, as if they were the ladder's."""
    spec = _study(
        tmp_path,
        ladder={"sizes": None, "depths": [2, 3, 4], "budgets": [1, 2]},
        ablations={"aspect_ratio": [8, 16, 32]},
        data={"max_bytes": "80M"},
        hero={"params": "3M"},
    )
    said = _warnings(capsys, spec)
    assert "6 runs at 3 depths (L2, L3, L4; the fit keeps each depth's best aspect ratio)" in said, said
    assert "6.736K" not in said, said


def test_a_check_across_sections_names_its_field_without_a_top_level_prefix(tmp_path, capsys):
    """Replicate seeds that repeat ablations.seed were refused as "(top level): ladder.replicates.seeds [1] repeat
    ...": the message names its fields itself, and "(top level)" pointed nowhere."""
    spec = _study(tmp_path, ladder={"replicates": {"sizes": ["20K"], "seeds": [1]}}, ablations={"seed": [0, 1]})
    line = one_line(run_cli(capsys, "studies", "validate", spec), "ladder.replicates.seeds [1] repeat")
    assert "(top level)" not in line and line.startswith(f"error: {spec}: ladder.replicates.seeds"), line
