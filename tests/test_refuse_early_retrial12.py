"""Re-trial 12 of issue 28, item 3 (refuse early): a new user's own studies, validated, planned, fake-trained
(no training), fitted. What `ladder fit` leaves out or refuses for a reason the design already holds must be said by
`studies validate` and `plan` before any run trains, in the fit's own terms; and neither may refuse or deny what the
fit does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests import hero_fixture as hf
from tests.cli_helpers import one_line, run_cli


def _study_file(tmp_path: Path, name: str = "s", **kw) -> Path:
    """A hero_fixture study a user could run (a vocabulary data preparation accepts) as a YAML file."""
    d = hf.study_dict(name=name, **kw)
    d["model"]["vocab_size"] = 320
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(d), encoding="utf-8")
    return path


def _said(r) -> str:
    return " ".join(r.stderr.split())


def _rollout_rows(root: Path) -> list:
    return (json.loads((root / "fit.json").read_text())["loss"].get("rollout") or {}).get("rows") or []


def test_three_sizes_whose_budgets_share_compute_levels_are_not_denied_a_rollout(tmp_path, capsys):
    """3 sizes 1.4x apart at budgets 0.5x, 1x, 2x (a wsd trunk and its branches): validate and plan warned "no rollout
    backtest, which needs >= 4 sizes", and `ladder fit` on the trained ladder ran one (4 forecasts): the fit grows
    such a ladder by compute level, not by size."""
    sizes, budgets = hf.SIZES[:3], [0.5, 1, 2]
    spec = _study_file(tmp_path, sizes=sizes, budgets=budgets)
    for command in (("studies", "validate"), ("plan", "--dry-run")):
        r = run_cli(capsys, *command, spec)
        assert r.code == 0 and "rollout" not in r.stderr, _said(r)
    root = hf.make_ladder(tmp_path / "fitted", sizes=sizes, budgets=budgets, n_boot=5)
    assert _rollout_rows(root)
    # 3 sizes 2x apart at the same budgets share no compute level: neither has a rollout, and the plan says so
    wide = ["25K", "50K", "100K"]
    r = run_cli(capsys, "studies", "validate", _study_file(tmp_path, "wide", sizes=wide, budgets=budgets))
    assert r.code == 0 and "no rollout backtest, which needs >= 4 sizes" in _said(r), _said(r)
    assert not _rollout_rows(hf.make_ladder(tmp_path / "wide", sizes=wide, budgets=budgets, n_boot=5))


def _isoflop_file(tmp_path: Path, name: str, points: int, span: float = 8.0) -> Path:
    d = hf.study_dict(name=name)
    d["model"]["vocab_size"] = 320
    d["ladder"] = {"mode": "isoflop", "compute_budgets": [1e12], "isoflop_points": points, "isoflop_span": span}
    d["hero"] = {"compute": 1e14}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(d), encoding="utf-8")
    return path


def _fake_fit(tmp_path: Path, spec: Path, capsys):
    """Plan ``spec`` (past the fit check), give every run the fixture's law as its loss, collect and fit."""
    from ladder import layout
    from ladder.plan.planner import read_plan

    root = tmp_path / (spec.stem + "-study")
    assert run_cli(capsys, "plan", spec, "--out", root, "--no-fit-check").code == 0
    sd = layout.StudyDir(root)
    for run in read_plan(root)[1]:
        hf.train(sd, run, hf.law_loss(run.params, run.tokens))
    assert run_cli(capsys, "collect", root).code == 0
    return run_cli(capsys, "fit", root, "--bootstrap", "5")


def test_an_isoflop_budget_of_five_sizes_is_not_refused_when_the_fit_fits_it(tmp_path, capsys):
    """One isoFLOP budget of 5 sizes (5 runs, 5 tokens/param ratios): validate and plan refused it ("either >= 2
    tokens/param ratios with >= 6 runs for the Chinchilla law"), and `ladder fit` fitted it: the overtrain law has
    4 constants and needs 5 runs. With 4 sizes both refuse, and the refusal names the isoflop fields to grow."""
    five = _isoflop_file(tmp_path, "five", 5)
    for command in (("studies", "validate"), ("plan", "--dry-run")):
        r = run_cli(capsys, *command, five)
        assert r.code == 0, _said(r)
    r = _fake_fit(tmp_path, five, capsys)
    assert r.code == 0 and "overtrain" in r.stdout, r.stderr
    four = _isoflop_file(tmp_path, "four", 4, span=2.0)
    r = run_cli(capsys, "studies", "validate", four)
    assert r.code == 2 and ">= 5 runs for its (N, D) laws" in r.stderr, r.stderr
    assert "ladder.compute_budgets" in r.stderr and "ladder.sizes" not in r.stderr, r.stderr
    r = _fake_fit(tmp_path, four, capsys)
    assert r.code == 2 and "overtrain: needs >= 5 runs" in r.stderr, r.stderr


def test_the_fewest_constants_of_an_n_d_law_validate_counts_are_the_fits():
    from ladder.plan import requirements
    from ladder.reports.fits.loss import loss_forms
    from ladder.reports.fits.runs import SIZE_TOL

    nd = [f.engine.n_params for f in loss_forms.LOSS_FORMS.values() if not f.on_compute]
    assert requirements.FIT_ND_PARAMS == min(nd) and requirements.FIT_MIN_SPREAD == loss_forms.MIN_SPREAD
    assert requirements.FIT_SIZE_TOL == SIZE_TOL and requirements.FIT_LEVEL_TOL == loss_forms.LEVEL_TOL


def _design(tmp_path: Path, name: str, ablations=None, ladder=None, hero=None, training=None) -> Path:
    d = hf.study_dict(name=name, sizes=hf.SIZES[:5])
    d["model"]["vocab_size"] = 320
    if ablations:
        d["ablations"] = ablations
    d["ladder"].update(ladder or {})
    if ladder and ladder.get("mode") == "isoflop":
        d["ladder"] = ladder
    d["hero"] = hero or d["hero"]
    d["training"].update(training or {})
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(d), encoding="utf-8")
    return path


# (study, what validate and plan now warn, what `ladder fit` said of the trained ladder, with no word before)
PARTLY = {
    "lr2": (
        {"ablations": {"lr_multipliers": [0.5, 2]}},
        "ablations.lr_multipliers [0.5, 2]: no LR optimum and no LR law",
        "no rung has 3 or more learning rates",
    ),
    "batch-alone": (
        {"ablations": {"batch_multipliers": [0.5, 1, 2]}},
        "so a rung needs >= 3 learning rates too",
        "hyperparameter laws: ",  # "this study has no LR sweep": not a word of the batch sweep it has
    ),
    "aspect2": (
        {"ablations": {"aspect_ratio": [8, 32]}},
        "ablations.aspect_ratio [8, 32]: no depth-vs-width fit",
        "no rung has 3 or more aspect ratios",
    ),
    "isoflop1": (
        {"ladder": {"mode": "isoflop", "compute_budgets": [1e12], "isoflop_points": 7}, "hero": {"compute": 1e14}},
        "ladder.compute_budgets [1.00e12]: no IsoFLOP fit",
        "isoflop fit: needs >= 2 compute budgets",
    ),
    "hero-compute": (
        {"hero": {"compute": 2e13}},
        "hero.compute: every run has one tokens/param ratio",
        "split by the study's tokens_per_param rule, not by the fit",
    ),
}


@pytest.mark.parametrize("case", sorted(PARTLY))
def test_a_part_the_fit_leaves_out_by_design_is_warned_by_validate_and_plan(tmp_path, capsys, case):
    """Each study passed validate and plan without a word; `ladder fit` of the trained ladder then left a part out
    (an LR or batch law, the depth-vs-width fit, the IsoFLOP fit, the hero's compute-optimal split) for a reason
    the plan already held."""
    kw, warned, fit_said = PARTLY[case]
    spec = _design(tmp_path, case, **kw)
    for command in (("studies", "validate"), ("plan", "--dry-run")):
        r = run_cli(capsys, *command, spec)
        assert r.code == 0 and warned in _said(r), (command, _said(r))
    r = _fake_fit(tmp_path, spec, capsys)
    assert r.code == 0 and fit_said in " ".join(r.stdout.split()), r.stdout[-3000:]


def test_a_batch_sweep_that_rounds_to_fewer_batches_names_the_one_size_that_keeps_three(tmp_path, capsys):
    """batch_multipliers [0.5, 1, 2] with batch_min_sequences 48: at 25K-71K the x0.5 and x1 batches both round up to
    48 sequences (the plan noted the rounding), so only 100K keeps 3 batch sizes, and the fit's batch law ("needs at
    least 2 rungs") had none; validate said nothing of the law."""
    spec = _design(
        tmp_path, "bs48", ablations={"batch_multipliers": [0.5, 1, 2], "lr_multipliers": [0.5, 1, 2]},
        training={"batch_min_sequences": 48},
    )  # fmt: skip
    r = run_cli(capsys, "studies", "validate", spec)
    assert r.code == 0, r.stderr
    assert "no batch law across scale" in _said(r) and "only 100K has them" in _said(r), _said(r)
    assert "at least batch_min_sequences 48" in _said(r) and "no LR" not in _said(r), _said(r)


def test_a_sweep_the_fit_can_use_is_not_warned(tmp_path, capsys):
    spec = _design(tmp_path, "full", ablations={"batch_multipliers": [0.5, 1, 2], "lr_multipliers": [0.5, 1, 2]})
    r = run_cli(capsys, "studies", "validate", spec)
    assert r.code == 0 and "ablations." not in r.stderr, r.stderr
    iso = _design(tmp_path, "iso", ladder={"mode": "isoflop", "compute_budgets": [3e11, 1e12]},
                  hero={"compute": 1e14})  # fmt: skip
    r = run_cli(capsys, "studies", "validate", iso)
    assert r.code == 0 and "IsoFLOP" not in r.stderr and "hero.compute" not in r.stderr, r.stderr


def test_the_ablation_thresholds_validate_checks_are_the_fits():
    from ladder.plan import requirements
    from ladder.reports.fits.isoflop import isoflop_fit
    from ladder.reports.fits.study import table

    assert requirements.ISOFLOP_MIN_SIZES == isoflop_fit.MIN_SIZES
    assert requirements.ISOFLOP_MIN_BUDGETS == isoflop_fit.MIN_BUDGETS
    assert requirements.TUNING_AXES == table.TUNING_AXES


def _tokenizer(folder: Path, vocab: int, special: bool = True) -> Path:
    """A byte-level BPE of ``vocab`` ids trained on a few words (with or without the end-of-sequence token)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from ladder.model.data.tokenizer import SPECIAL_TOKENS, train_tokenizer

    words = [" ".join(f"{a}{b}{c}" for a in "abcdefgh" for b in "ijklmnop" for c in "qrstuvwx")] * 4
    if special:
        return train_tokenizer(words, vocab, folder)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(words, trainer=trainer)
    folder.mkdir(parents=True)
    tok.save(str(folder / "tokenizer.json"))
    assert not set(SPECIAL_TOKENS) & set(tok.get_vocab())
    return folder


def test_a_local_tokenizer_data_preparation_refuses_is_refused_by_validate_and_plan(tmp_path, capsys):
    """A 400-id tokenizer of the user's own for a model.vocab_size of 320 passed validate and plan; `ladder data
    prepare` (the first step of every run) then refused it: "the tokenizer ... has 400 ids but the model's
    vocab_size is 320". So did one without an end-of-sequence token ("documents could not be separated")."""
    big = _tokenizer(tmp_path / "t400", 400)
    spec = _study_file(tmp_path, "tok", data={"corpus": "embedded", "tokenizer": str(big), "seq_len": 64})
    for command in (("studies", "validate"), ("plan", "--dry-run")):
        one_line(run_cli(capsys, *command, spec), "has 400 ids, more than model.vocab_size = 320", "at least 400")
    ok = _study_file(tmp_path, "tok-ok", data={"corpus": "embedded", "tokenizer": str(big), "seq_len": 64})
    d = yaml.safe_load(ok.read_text())
    d["model"]["vocab_size"] = 400
    ok.write_text(yaml.safe_dump(d))
    assert run_cli(capsys, "studies", "validate", ok).code == 0
    no_eos = _tokenizer(tmp_path / "no-eos", 300, special=False)
    spec = _study_file(tmp_path, "no-eos", data={"corpus": "embedded", "tokenizer": str(no_eos), "seq_len": 64})
    one_line(run_cli(capsys, "studies", "validate", spec), "no end-of-sequence token")


def test_a_validation_set_the_embedded_corpus_cannot_hold_is_refused_by_validate_and_plan(tmp_path, capsys):
    """validation_tokens: 50M on the embedded corpus passed validate and plan; `ladder data prepare` then tokenized
    the whole corpus (84 s on 2 cores) to say "the validation split has 595,731 tokens ..., fewer than the
    validation_tokens = 50,000,000 the config asks for". The embedded corpus reads at most 64 MB unless
    data.max_bytes says more, so 2% of it holds at most 1.28M tokens."""
    data = {"corpus": "embedded", "tokenizer": "train", "seq_len": 64, "validation_tokens": 2_000_000}
    spec = _study_file(tmp_path, "val", data=data)
    for command in (("studies", "validate"), ("plan", "--dry-run")):
        one_line(run_cli(capsys, *command, spec), "data.validation_tokens = 2,000,000", "at most 1.28M tokens")
    for ok in (
        {**data, "validation_fraction": 0.04},
        {**data, "max_bytes": "200M"},
        {**data, "validation_tokens": "1M"},
    ):
        r = run_cli(capsys, "studies", "validate", _study_file(tmp_path, "val-ok", data=ok))
        assert r.code == 0, (ok, r.stderr)


def test_validate_and_hero_give_the_tokens_per_parameter_bound_in_the_same_digits(tmp_path, capsys):
    """validate said "hero.tokens = 1P: 2.5e+09 tokens per parameter of its 400K, beyond 100000" where `ladder hero
    --tokens 1e15` says "2.50e9 tokens per parameter, beyond 100,000"; its budgets bound said "budgets[0] = 1e+06: x
    tokens_per_param 20 is 2e+07 tokens per parameter ... between 0.01 and 100000": Python's e-notation."""
    spec = _study_file(tmp_path, "tok-bound")
    spec.write_text(spec.read_text().replace("params: 400K", "params: 400K\n  tokens: 1.0e+15"))
    one_line(run_cli(capsys, "studies", "validate", spec), "2.50e9 tokens per parameter of its 400K, beyond 100,000")
    spec = _study_file(tmp_path, "budget-bound", budgets=[1e6])
    line = one_line(run_cli(capsys, "studies", "validate", spec), "budgets[0] = 1e6", "is 2e7 tokens per parameter")
    assert "e+" not in line and "and 100,000" in line, line
    d = hf.study_dict(name="tpp")
    d["ladder"]["tokens_per_param"] = 1e7
    (tmp_path / "tpp.yaml").write_text(yaml.safe_dump(d))
    one_line(run_cli(capsys, "studies", "validate", tmp_path / "tpp.yaml"), "tokens_per_param = 1e7: must be")


def test_a_hero_at_another_ratio_than_a_one_ratio_ladder_is_warned_before_it_trains(tmp_path, capsys):
    """ladder.budgets [2] (every run at 40 tokens/param, "train the ladder at 2x Chinchilla") and a hero at
    tokens_per_param 20: validate and plan said nothing, and `ladder fit` of the trained ladder said "hero forecast
    unavailable: no fitted law form can forecast 400K params x 8M tokens (20 tokens/param): frontier: only at 40
    tokens/param". So did hero.tokens at 100 tokens/param over a ladder at 20."""
    spec = _design(tmp_path, "b2", ladder={"budgets": [2]})
    for command in (("studies", "validate"), ("plan", "--dry-run")):
        r = run_cli(capsys, *command, spec)
        said = _said(r)
        assert r.code == 0 and "every run trains at 40 tokens/param" in said, said
        assert "and the hero at 20" in said and "`ladder fit` will give no hero forecast" in said, said
    r = _fake_fit(tmp_path, spec, capsys)
    assert r.code == 0 and "hero forecast unavailable" in r.stdout, r.stdout[-2000:]
    spec = _design(tmp_path, "hero100", hero={"params": "400K", "tokens": "40M"})
    r = run_cli(capsys, "studies", "validate", spec)
    assert r.code == 0 and "and the hero at 100 (hero.tokens / hero.params)" in _said(r), _said(r)
    for ok in ({"budgets": [1, 2]}, {"budgets": [1]}):
        r = run_cli(capsys, "studies", "validate", _design(tmp_path, "ok", ladder=ok))
        assert r.code == 0 and "hero forecast" not in r.stderr, (ok, r.stderr)


def test_a_hero_of_a_tie_no_run_trains_is_warned_before_the_ladder_trains(tmp_path, capsys):
    """hero.tied: false over a ladder of tied runs (no tie_embeddings ablation): validate and plan said nothing, and
    `ladder fit` forecast the untied hero with the tied runs' law, without a word of it."""
    spec = _design(tmp_path, "untied-hero", hero={"params": "400K", "tied": False})
    for command in (("studies", "validate"), ("plan", "--dry-run")):
        r = run_cli(capsys, *command, spec)
        said = _said(r)
        assert r.code == 0 and "hero.tied = false, but every run of the ladder is tied" in said, said
        assert "ablations.tie_embeddings [true, false]" in said, said
    r = _fake_fit(tmp_path, spec, capsys)
    assert r.code == 0 and "all runs are tied" in r.stdout, r.stdout[-2000:]
    said = " ".join(r.stdout.split())  # and fit says whose law forecasts the untied hero
    assert "hero.tied is false, but no untied run was trained: the hero's forecast is the tied runs' law" in said, said
    for ok in ({"params": "400K", "tied": True}, {"params": "400K"}):
        r = run_cli(capsys, "studies", "validate", _design(tmp_path, "ok", hero=ok))
        assert r.code == 0 and "hero.tied" not in r.stderr, r.stderr
    both = _design(
        tmp_path, "both", ablations={"tie_embeddings": [True, False]}, hero={"params": "400K", "tied": False}
    )
    assert "hero.tied" not in run_cli(capsys, "studies", "validate", both).stderr


def test_a_one_size_sweep_is_not_blamed_on_other_sizes(tmp_path, capsys):
    """A depth-vs-width sweep at one size (with --no-fit-check in mind) was warned "only 50K has them (whole heads
    and layers build one shape of nearby aspect ratios at the others)": there are no others. With sizes where the
    sweep's shapes collapse, the words stay."""
    one = _design(tmp_path, "one", ablations={"aspect_ratio": [4, 16, 64]}, ladder={"sizes": ["50K"]})
    said = _said(run_cli(capsys, "studies", "validate", one, "--no-fit-check"))
    assert "no depth-vs-width trend to the hero" in said and "only 50K has them" in said, said
    assert "at the others" not in said, said
    few = _design(tmp_path, "few", ablations={"aspect_ratio": [8, 16, 32]}, ladder={"sizes": hf.SIZES[:4]})
    said = _said(run_cli(capsys, "studies", "validate", few))
    assert "only 71K has them (whole heads and layers build one shape of nearby aspect ratios at the others)" in said


def test_an_evaluated_ladder_too_small_for_the_task_forecasts_is_warned(tmp_path, capsys):
    """4 sizes at one ratio with `evals: {}`: validate and plan warned of the rollout only, and `ladder fit` of the
    evaluated ladder said "task task_a: 4 runs ...; the step-2 sigmoid has 4 parameters and needs at least 5 runs"."""
    import math

    from ladder import layout
    from ladder.plan.planner import read_plan

    spec = _design(tmp_path, "ev4", ladder={"sizes": hf.SIZES[:4]})
    spec.write_text(spec.read_text() + "evals: {}\n")
    for command in (("studies", "validate"), ("plan", "--dry-run")):
        said = _said(run_cli(capsys, *command, spec))
        assert "evals: the task forecasts" in said and "needs >= 5 runs" in said and "this plan has 4" in said, said
    root = tmp_path / "ev4-study"
    assert run_cli(capsys, "plan", spec, "--out", root).code == 0
    sd = layout.StudyDir(root)
    for run in read_plan(root)[1]:
        loss = hf.law_loss(run.params, run.tokens)
        hf.train(sd, run, loss)
        sd.run(run.run_id).lm_eval.mkdir()
        bpb = loss / math.log(2) / 3
        task = {"acc,none": 1 / (1 + math.exp(8 * (bpb - 0.55))), "bpb,none": bpb}
        (sd.run(run.run_id).lm_eval / "results_a.json").write_text(json.dumps({"results": {"task_a": task}}))
    assert run_cli(capsys, "collect", root).code == 0
    r = run_cli(capsys, "fit", root, "--bootstrap", "5")
    assert r.code == 0 and "needs at least 5 runs" in " ".join(r.stdout.split()), r.stdout[-2000:]
    five = _design(tmp_path, "ev5", ladder={"sizes": hf.SIZES[:5]})
    five.write_text(five.read_text() + "evals: {}\n")
    assert "evals:" not in run_cli(capsys, "studies", "validate", five).stderr


def test_the_task_thresholds_validate_checks_are_the_fits():
    from ladder.plan import requirements
    from ladder.reports.fits.tasks import task_forecast

    assert requirements.TASK_MIN_RUNS == {k: task_forecast.MIN_RUNS[k] for k in ("compute", "sigmoid")}


def test_the_plan_table_gives_an_isoflop_budget_as_every_compute_is_given(tmp_path, capsys):
    """An isoFLOP plan's table said "C=3e+11" beside FLOPs of "2.99e11" in the next column."""
    iso = _design(tmp_path, "iso", ladder={"mode": "isoflop", "compute_budgets": [3e11, 1e12]}, hero={"compute": 1e14})
    r = run_cli(capsys, "plan", iso, "--dry-run")
    assert r.code == 0 and "C=3.00e11" in r.stdout and "C=1.00e12" in r.stdout and "e+" not in r.stdout, r.stdout


def test_isoflop_points_that_land_on_one_model_are_named_as_such(tmp_path, capsys):
    """At a budget of 3e9 FLOPs the two smallest isoFLOP points both land on the family's smallest models; the plan
    said "1 point(s) of the ablation grid train the very model of another ...: base at 1.706K as base", of a study
    without an ablation."""
    iso = _design(tmp_path, "tiny", ladder={"mode": "isoflop", "compute_budgets": [3e9, 3e10, 3e11]},
                  hero={"compute": 1e14})  # fmt: skip
    r = run_cli(capsys, "plan", iso, "--dry-run")
    said = " ".join(r.stdout.split())
    assert r.code == 0 and "ablation grid" not in said and "base at" not in said, said
    assert "1 isoFLOP size point(s) land on the model of another point of their budget" in said, said
    assert "targets 1.014K and 1.706K at C=3.00e9 (both 2.608K)" in said, said


def test_a_batch_sweep_whose_values_round_to_one_batch_is_told_to_spread_them(tmp_path, capsys):
    """batch_tokens [1000, 1024, 1050] at seq_len 64 all round to 16 sequences: the warning said "add a value",
    which would not help."""
    spec = _design(tmp_path, "bt", ablations={"batch_tokens": [1000, 1024, 1050], "lr_multipliers": [0.5, 1, 2]})
    said = _said(run_cli(capsys, "studies", "validate", spec))
    assert "have at most 1: batches are whole sequences" in said and "spread the values" in said, said
    assert "add a value" not in said, said


def test_fit_of_a_batch_sweep_without_an_lr_sweep_names_the_batch_sweep(tmp_path, capsys):
    """`ladder fit` of batch_multipliers [0.5, 1, 2] with one LR said "hyperparameter laws: this study has no LR sweep
    (no rung has 3 or more learning rates)": not a word of the batch sweep the study has, or why it gave nothing."""
    spec = _design(tmp_path, "batch-only", ablations={"batch_multipliers": [0.5, 1, 2]})
    r = _fake_fit(tmp_path, spec, capsys)
    said = " ".join(r.stdout.split())
    assert r.code == 0 and "its batch sweep (batch_multipliers [0.5, 1, 2]) gives no batch law" in said, said[-3000:]


def test_a_hero_at_another_context_than_the_ladder_is_warned_by_plan_and_fit(tmp_path, capsys):
    """hero.seq_len 256 on a ladder trained at data.seq_len 64: plan and fit forecast the hero's loss per token
    from losses at a 64-token context, and neither said so (only the hero's FLOPs changed)."""
    hero = {"params": "400K", "seq_len": 256}
    spec = _study_file(tmp_path, hero=hero["params"])
    d = yaml.safe_load(spec.read_text())
    d["hero"] = hero
    spec.write_text(yaml.safe_dump(d))
    warning = "hero.seq_len 256 is not the ladder's data.seq_len 64: the laws are fitted on eval losses at a 64-token"
    for command in (["studies", "validate", spec], ["plan", spec, "--out", tmp_path / "planned"]):
        r = run_cli(capsys, *command)
        assert r.code == 0 and warning in _said(r), (command, r.stderr)
    root = hf.make_ladder(tmp_path / "study", hero=hero["params"])
    fit = json.loads((root / "fit.json").read_text())
    assert not any("hero.seq_len" in w for w in fit["warnings"])  # the same ladder, its hero at its own context
    root = hf.make_ladder(tmp_path / "study2", hero=hero)
    fit = json.loads((root / "fit.json").read_text())
    assert any(w.startswith(warning) for w in fit["warnings"]), fit["warnings"]
