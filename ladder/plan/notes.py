"""What a plan says about its own numbers: the FLOP and parameter convention each one uses, which parameter count
a size holds fixed, and how weight decay treats the embedding and the LM head (a warning when the two differ,
since a tied-vs-untied comparison would then also measure a decay difference).

Pure: a study and its runs in, text out (``ladder plan`` prints it, ``plan.json`` keeps it).
"""

from __future__ import annotations

from ladder.model.config import OptimizerConfig, RunSpec
from ladder.model.shape import LADDER_COST_COUNTS
from ladder.studies.spec import StudySpec

EXACT_FLOPS = (
    "exact counted training FLOPs: flops_per_token x tokens (model/shape.py: 6 x the matmul parameters, "
    "LM head included, plus causal attention)"
)


def conventions(study: StudySpec, runs: list[RunSpec]) -> dict[str, str]:
    """The convention of every number the plan prints, by the name it has in the plan's JSON."""
    conv = study.ladder.param_count
    out = {
        "flops": EXACT_FLOPS + f"; the ladder's cost (totals): {LADDER_COST_COUNTS}",
        "hero_flops": "exact counted FLOPs of the hero's shape x its tokens"
        + (
            "; hero.compute, as the study gives it, is read as exact counted FLOPs, and the hero's size is the one "
            "that spends it at tokens_per_param"
            if study.hero.compute is not None
            else ""
        ),
        "ladder_pct_of_hero": "exact FLOPs the ladder trains (each planned run; a shared trunk once, a cooldown "
        "branch only its own steps) / exact hero FLOPs",
        "ladder_cost": f"totals.flops, the ladder's cost as planned: {LADDER_COST_COUNTS} (the report's ladder cost "
        "is the same count of what the runs spent)",
        "params": f"{conv} parameters (ladder.param_count)",
        "tokens_per_param": f"training tokens / {conv} parameters",
    }
    if any(r.trunk is not None for r in runs):
        out["flops_own"] = (
            "a cooldown branch: exact counted FLOPs of its own steps after its branch step (its "
            "'flops' count all its tokens, the trunk's prefix included: the compute of its point)"
        )
    if study.ladder.mode == "isoflop":
        out["compute_budgets"] = (
            "IsoFLOP compute budgets in exact counted FLOPs: each run of a budget trains "
            "budget / flops_per_token tokens of its shape, so it costs the budget"
        )
    t = study.training
    if "deepseek" in (t.lr_rule if t.lr == "auto" else "", t.batch_rule if t.batch_tokens == "auto" else ""):
        out["deepseek_rules"] = "DeepSeek's LR and batch rules read C as the run's exact counted FLOPs"
    return out


def _treatment(cfg: OptimizerConfig, group: str) -> str:
    return "no decay" if group in cfg.no_decay else f"decay {cfg.weight_decay:g}"


def notes_and_warnings(study: StudySpec, runs: list[RunSpec]) -> tuple[list[str], list[str]]:
    """(notes, warnings) about which parameter count a size holds fixed and the decay of embedding and head."""
    conv = study.ladder.param_count
    tied = {r.shape.tied for r in runs}
    notes, warnings = [], []
    if study.ladder.depths is not None:
        # a depth fixes the shape (d_model = aspect_ratio x n_layers), not a parameter count: "sizes hold total
        # parameters fixed ... an untied run's body is smaller" was said beside tied and untied runs of one shape
        size = (
            f"depths hold the shape fixed (d_model = aspect_ratio x n_layers); a run's {conv} parameters follow from it"
        )
        if tied == {True, False}:
            size += (
                ": tied and untied runs of a depth share the body (the same shape and FLOPs per token), and the "
                f"untied one has another V x d ({study.model.vocab_size} x d_model) parameters in its head"
                + (", so it trains on more tokens at tokens_per_param" if conv == "total" else "")
            )
    elif conv == "non_embedding":
        size = "sizes hold non_embedding parameters fixed"
        if tied == {True, False}:
            size += (
                ": tied and untied runs of a size share the body (the same shape and FLOPs per token) and "
                f"differ by the head's V x d ({study.model.vocab_size} x d_model parameters)"
            )
    else:
        size = "sizes hold total parameters fixed (embedding included)"
        if tied == {True, False}:
            size += (
                ": an untied run spends another V x d on its head, so its body is smaller than that of the "
                "tied run of the same size"
            )
    notes.append(size)
    cfg = study.training.optimizer
    emb, head = _treatment(cfg, "embeddings"), _treatment(cfg, "lm_head")
    if not cfg.embedding_and_head_differ():
        notes.append(
            f"weight decay {cfg.weight_decay:g} on the attention and MLP matrices; the embedding and the "
            f"LM head get the same treatment ({emb}), tied or untied"
        )
    else:
        notes.append(f"weight decay: the embedding and a tied matrix {emb}, an untied LM head {head}")
        if True in tied:
            warnings.append(
                "training.optimizer.no_decay lists one of 'embeddings' and 'lm_head' but not the other: a tied "
                f"matrix follows the embedding ({emb}) while an untied head gets {head}, so tied and untied runs "
                "differ by a decay treatment too; list both or neither for a fair comparison"
            )
    if study.hero_context_warning:
        warnings.append(study.hero_context_warning)
    return notes, warnings
