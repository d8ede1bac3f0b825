"""The hero recommendation picks the fitted winners (tying, LR, aspect ratio) and says where each came from."""

from __future__ import annotations

import math

import pytest
import yaml

from ladder.errors import FitError
from ladder.model.recipe import olmo_lr
from ladder.reports.fits import fit_study
from ladder.reports.fits.recommend import choose_aspect, choose_tied, recommend
from ladder.studies.spec import HeroSpec, TrainingSpec
from tests.reports.fits.synthetic import make_study, study_table, truth

CURV = 0.05  # loss penalty per (ln lr - ln lr*)^2
C_REF = 1e12


def lr_star(flops):
    """The known LR optimum, a power law in the run's FLOPs (near the olmo rule, but not it)."""
    return 0.05 * (flops / C_REF) ** -0.2


def lr_penalty(run):
    return CURV * math.log(run.lr / lr_star(run.flops)) ** 2


@pytest.fixture(scope="module", params=[0.03, -0.03], ids=["tied-better", "untied-better"])
def sweep(request):
    offset = request.param
    study = make_study(ablations={"tie_embeddings": [True, False], "lr_multipliers": [0.25, 0.5, 1, 2, 4]})
    df = study_table(study, loss_fn=lr_penalty, offset=offset, noise=0.001)
    return offset, study, fit_study(df, study=study, n_boot=50)


def test_recommendation_picks_the_better_variant(sweep):
    offset, _, res = sweep
    want = "tied" if offset > 0 else "untied"
    r = res.recommendation
    assert r.tied is (want == "tied")
    assert res.primary_variant == want
    assert r.sources["tied"].startswith("fit: tied-vs-untied ablation")
    d = res.to_dict()
    assert d["loss"]["variant"] == want
    assert d["recommendation"]["tied"] is (want == "tied")


def test_recommendation_takes_the_lr_law_not_the_rule(sweep):
    _, study, res = sweep
    r = res.recommendation
    hero_flops = res.hero["flops"]
    assert r.lr == pytest.approx(lr_star(hero_flops), rel=0.10)
    rule = olmo_lr(r.params_non_embedding)
    assert abs(math.log(r.lr / rule)) > 0.15  # the fit moved it away from the rule
    assert r.sources["lr"].startswith("fit: lr law") and "rungs" in r.sources["lr"]
    assert r.lr_ci90[0] < lr_star(hero_flops) < r.lr_ci90[1]
    hp = res.to_dict()["hparams"]
    assert hp["available"] and hp["hero"]["lr"] == pytest.approx(r.lr)
    # no batch sweep: the batch is the study's rule
    assert r.sources["batch_tokens"].startswith("study rule")
    # the loss law used the tuned runs only: its residuals are small although the sweep spans 16x in LR
    forms = res.to_dict()["loss"]["forms"]
    assert max(abs(r["pct"]) for f in forms.values() for r in f["residuals"]) < 1.5
    assert any("best lr_multipliers configuration" in n for n in res.notes)


def test_recommendation_block_is_complete_and_consistent(sweep):
    offset, study, res = sweep
    r = res.recommendation
    d = r.to_dict()
    for key in (
        "d_model",
        "n_layers",
        "n_heads",
        "n_kv_heads",
        "head_dim",
        "ffn_dim",
        "tied",
        "aspect_ratio",
        "tokens",
        "batch_tokens",
        "lr",
        "warmup_steps",
        "warmup_fraction",
        "schedule",
        "loss",
        "loss_interval",
        "sources",
    ):
        assert key in d, key
    assert d["n_heads"] * d["head_dim"] == d["d_model"]
    assert d["params"] == pytest.approx(3.2e6, rel=0.03)
    assert d["tokens"] == pytest.approx(64e6, rel=0.01)
    assert d["batch_tokens"] % 256 == 0
    assert d["warmup_steps"] == round(0.05 * d["steps"])
    assert d["schedule"]["kind"] == "cosine"
    assert d["loss"] == res.hero["loss"]
    lo, hi = d["loss_interval"]
    true_loss = float(truth(3.2e6, 64e6)) + (0.0 if r.tied else offset)  # the recommended variant's truth
    assert lo < d["loss"] < hi
    # near-noiseless runs give a narrow interval; the reduced (degenerate) law's own error at 8x is ~1-2%
    assert d["loss"] == pytest.approx(true_loss, rel=0.03)
    for key in ("tied", "aspect_ratio", "shape", "tokens", "lr", "batch_tokens", "warmup", "schedule", "loss"):
        assert d["sources"][key], key
    assert d["sources"]["aspect_ratio"].startswith("study default")


def test_yaml_snippet_pastes_into_a_study(sweep):
    _, study, res = sweep
    snippet = res.recommendation.to_yaml_snippet()
    assert snippet.startswith("# ladder hero recommendation")
    data = yaml.safe_load(snippet)
    hero = HeroSpec.model_validate(data["hero"])
    training = TrainingSpec.model_validate(data["training"])
    r = res.recommendation
    assert hero.params == r.params and hero.tokens == r.tokens and hero.tied is r.tied
    assert training.lr == pytest.approx(r.lr, rel=1e-3) and training.batch_tokens == r.batch_tokens
    assert training.schedule.kind == "cosine"
    assert f"d_model {r.shape.d_model}" in snippet
    assert res.to_dict()["recommendation"]["yaml"] == snippet


def test_defaults_without_ablations():
    study = make_study(ablations={}, hero={"params": "3.2M", "tied": False, "aspect_ratio": 24})
    assert choose_tied(study, None) == (False, "study: hero.tied")
    assert choose_aspect(study, None) == (24.0, "study: hero.aspect_ratio")
    plain = make_study(ablations={})
    assert choose_tied(plain, None)[1] == "study default: model.tie_embeddings"
    r = recommend(
        study,
        params=3.2e6,
        tokens=64e6,
        allocation="rule",
        allocation_source="rule",
        tied=False,
        tied_source="study: hero.tied",
        aspect_ratio=24.0,
        aspect_source="study: hero.aspect_ratio",
    )
    assert r.tied is False and r.shape.tied is False
    assert r.aspect_ratio == pytest.approx(24, rel=0.35)
    assert r.lr == pytest.approx(olmo_lr(r.params_non_embedding))
    assert r.sources["lr"].startswith("study rule: olmo")
    assert r.loss is None and r.to_dict()["loss_interval"] == [None, None]


def test_depth_width_sweep_sets_the_aspect_ratio():
    """Shapes are compared at matched compute (ablations module), so the synthetic loss is a law in FLOPs
    plus a penalty around a best aspect ratio that grows with compute."""

    def best(c):
        return 16 * (c / 1e12) ** 0.15

    def loss_fn(run):  # replaces the (N, D) truth by L(C) = 1.7 + 30 C^-0.12, + the aspect penalty
        base = 1.7 + 30 * run.flops**-0.12 - float(truth(run.params, run.tokens))
        return base + 0.02 * math.log(run.shape.aspect_ratio / best(run.flops)) ** 2

    study = make_study(
        ladder={"sizes": ["50K", "100K", "200K", "400K"], "param_count": "non_embedding", "tokens_per_param": 20},
        ablations={"aspect_ratio": [6, 12, 24, 48]},
        hero={"params": "1.6M"},
    )
    res = fit_study(study_table(study, loss_fn=loss_fn, noise=0.0005), study=study, n_boot=20)
    d = res.to_dict()
    assert d["depth_vs_width"]["available"]
    r = res.recommendation
    assert r.sources["aspect_ratio"].startswith("fit: best aspect ratio vs compute over 4 rungs")
    assert r.aspect_ratio_target == pytest.approx(best(res.hero["flops"]), rel=0.1)  # ~39, past the ladder's 26
    assert r.aspect_ratio == pytest.approx(r.aspect_ratio_target, rel=0.35)  # whole heads, whole layers
    assert res.hero["aspect_ratio"] == r.aspect_ratio
    assert d["hparams"]["available"] is False and d["tied_vs_untied"]["available"] is False


def test_sweep_study_too_small_for_a_loss_law_still_gives_its_hyperparameters():
    """Three rungs at a fixed 20 tokens/param cannot fit even the reduced law (needs 4 runs), but an LR sweep
    study's product is its LR law: the fit reports the law as unavailable instead of failing."""
    study = make_study(
        ladder={"sizes": ["25K", "100K", "400K"], "param_count": "non_embedding", "tokens_per_param": 20},
        ablations={"lr_multipliers": [0.25, 0.5, 1, 2, 4]},
    )
    res = fit_study(study_table(study, loss_fn=lr_penalty, noise=0.001), study=study, n_boot=20)
    d = res.to_dict()
    assert res.loss is None
    assert d["loss"]["available"] is False and "needs >= 4 runs for 3 parameters (has 3)" in d["loss"]["reason"]
    assert any("needs >= 4 runs" in w for w in d["warnings"])
    assert d["hero"]["loss"] is None and d["recommendation"]["loss"] is None
    assert d["compute_optimal"]["identifiable"] is False
    assert res.recommendation.lr == pytest.approx(lr_star(res.hero["flops"]), rel=0.15)
    assert res.recommendation.sources["lr"].startswith("fit: lr law")
    # without the sweep the same runs are just too few: a FitError naming the form and the count
    plain = study_table(study, loss_fn=lr_penalty, noise=0.001)
    plain = plain[plain["axis/lr_multipliers"] == 1].drop(columns=[c for c in plain.columns if c.startswith("axis/lr")])
    with pytest.raises(FitError, match=r"ratio: needs >= 4 runs for 3 parameters \(has 3\)"):
        fit_study(plain, study=make_study(ladder=study.ladder.model_dump(), ablations={}), n_boot=20)
