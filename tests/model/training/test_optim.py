"""AdamW parameter groups: decay on matrices only, tied embeddings are one tensor."""

import pytest
import torch

from ladder.model.config import OptimizerConfig
from ladder.model.shape import ModelShape
from ladder.model.training.llama import build_model
from ladder.model.training.optim import (
    build_optimizer,
    classify_parameters,
    param_groups,
)


def shape(tied):
    return ModelShape(d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=8, ffn_dim=48, vocab_size=100,
                      tied=tied)  # fmt: skip


def names(groups, label):
    return next((set(g["names"]) for g in groups if g["group"] == label), set())


@pytest.mark.parametrize("tied", [True, False])
def test_groups_decay_matrices_only_and_an_untied_head_unless_listed(tied):
    model = build_model(shape(tied))
    # the embeddings but not the head listed (the default before both were): an untied head decays
    groups = param_groups(model, OptimizerConfig(weight_decay=0.1, no_decay=["embeddings", "norms", "biases"]))
    decay, no_decay = names(groups, "decay"), names(groups, "no_decay")
    all_names = {n for n, _ in model.named_parameters()}
    assert decay | no_decay == all_names and not decay & no_decay
    # every parameter exactly once, counts add up to the model
    assert sum(p.numel() for g in groups for p in g["params"]) == shape(tied).params_total
    assert "model.embed_tokens.weight" in no_decay
    assert all(
        ".norm" in n or "layernorm" in n or n == "model.norm.weight" for n in no_decay - {"model.embed_tokens.weight"}
    )
    assert {n for n in no_decay if "norm" in n} == {n for n in all_names if "norm" in n}
    proj = {n for n in all_names if n.endswith("_proj.weight")}
    assert len(proj) == 2 * 7 and proj <= decay
    if tied:
        assert "lm_head.weight" not in all_names  # one tensor, named once, classified as the embedding
        assert decay == proj
    else:
        assert decay == proj | {"lm_head.weight"}  # an untied head is a matrix: it decays by default
    wd = {g["group"]: g["weight_decay"] for g in groups}
    assert wd == {"decay": 0.1, "no_decay": 0.0}


def test_tied_and_untied_get_the_same_decay_treatment_by_default():
    """A fair tied-vs-untied comparison: by default neither the embedding nor the head decays, so the decayed
    group of a tied and an untied model is the same set of body matrices, and every other parameter gets 0."""
    cfg = OptimizerConfig(weight_decay=0.1)
    assert not cfg.embedding_and_head_differ()
    treatment = {}
    for tied in (True, False):
        model = build_model(shape(tied))
        groups = param_groups(model, cfg)
        opt = build_optimizer(model, cfg, lr=0.1)
        names_of = {id(p): n for n, p in model.named_parameters()}
        treatment[tied] = {names_of[id(p)]: g["weight_decay"] for g in opt.param_groups for p in g["params"]}
        assert names(groups, "decay") == {n for n in treatment[tied] if n.endswith("_proj.weight")}
    assert treatment[True]["model.embed_tokens.weight"] == 0.0  # the tied matrix: embedding and head at once
    assert treatment[False]["model.embed_tokens.weight"] == treatment[False]["lm_head.weight"] == 0.0
    body = {n: wd for n, wd in treatment[False].items() if n != "lm_head.weight"}
    assert body == treatment[True]  # the same body, treated the same way; the untied run adds one head, undecayed
    differ = OptimizerConfig(no_decay=["embeddings", "norms", "biases"])
    assert differ.embedding_and_head_differ()


def test_lm_head_can_be_excluded_and_a_tied_matrix_follows_the_embeddings_rule():
    untied = build_model(shape(False))
    groups = param_groups(untied, OptimizerConfig(no_decay=["embeddings", "norms", "biases", "lm_head"]))
    assert "lm_head.weight" in names(groups, "no_decay")
    tied = build_model(shape(True))
    cats = classify_parameters(tied)
    assert cats["model.embed_tokens.weight"] == "embeddings"
    groups = param_groups(tied, OptimizerConfig(no_decay=["norms", "lm_head"]))  # embeddings decay now
    assert "model.embed_tokens.weight" in names(groups, "decay")
    groups = param_groups(tied, OptimizerConfig(no_decay=[]))
    assert [g["group"] for g in groups] == ["decay"]


def test_optimizer_steps_and_zero_decay_groups_do_not_decay():
    model = build_model(shape(False))
    opt = build_optimizer(model, OptimizerConfig(weight_decay=0.5), lr=0.1)
    norm_before = model.model.norm.weight.detach().clone()
    proj_before = model.model.layers[0].mlp.up_proj.weight.detach().clone()
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()  # zero gradients: only weight decay moves anything
    assert torch.equal(model.model.norm.weight, norm_before)
    assert torch.allclose(model.model.layers[0].mlp.up_proj.weight, proj_before * (1 - 0.1 * 0.5))
    assert opt.defaults["betas"] == (0.9, 0.95)
