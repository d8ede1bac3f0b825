"""A run's id is its science: the hash covers what changes the numbers and nothing else."""

from __future__ import annotations

import pytest

from ladder.model.config import (
    NOT_SCIENCE_FIELDS,
    SCIENCE_FIELDS,
    DivergenceConfig,
    OptimizerConfig,
    RunSpec,
)
from ladder.plan.planner import expand
from ladder.studies.spec import parse_study


@pytest.fixture(scope="module")
def spec() -> RunSpec:
    study = parse_study(
        {
            "name": "h",
            "data": {"seq_len": 32},
            "model": {"vocab_size": 320, "head_dim": 16, "ffn_multiple": 8},
            "ladder": {"sizes": ["8K"]},
            "hero": {"params": "1M"},
        }
    )
    return expand(study).runs[0]


def test_every_field_is_science_or_says_why_not():
    fields = set(RunSpec.model_fields)
    assert set(SCIENCE_FIELDS) <= fields
    assert not set(SCIENCE_FIELDS) & set(NOT_SCIENCE_FIELDS)
    assert fields <= set(SCIENCE_FIELDS) | set(NOT_SCIENCE_FIELDS), "a new RunSpec field must be classified"


@pytest.mark.parametrize(
    "change",
    [
        {"micro_batch_size": 3},
        {"eval_interval": 1},
        {"log_interval": 1},
        {"checkpoint_interval": 1},
        {"checkpoint_minutes": 0.5},
        {"compile": True},
        {"study": "renamed"},
        {"axes": {"size": "other"}},
        {"variant": "x"},
        {"param_convention": "total"},
        {"params": 1},
        {"flops": 1.0},
        {"flops_per_token": 1},
    ],
)
def test_what_does_not_change_the_numbers_keeps_the_id(spec, change):
    assert spec.model_copy(update=change).content_hash() == spec.content_hash()


def test_how_a_run_relates_to_others_keeps_the_id(spec):
    """A branch has the id of the independent run with the same science: its trunk, a trunk's branch steps and a
    warmup given in tokens (resolved into warmup_steps, which is hashed) are not science."""
    from ladder.model.config import TrunkRef

    assert spec.model_copy(update={"trunk": TrunkRef(run_id="abc", step=3)}).content_hash() == spec.content_hash()
    assert spec.model_copy(update={"branch_steps": [2, 5]}).content_hash() == spec.content_hash()
    tokens = spec.schedule.model_copy(update={"warmup_tokens": 4096})
    assert spec.model_copy(update={"schedule": tokens}).content_hash() == spec.content_hash()


@pytest.mark.parametrize(
    "change",
    [
        {"lr": 1e-3},
        {"seed": 1},
        {"tokens": 999},
        {"steps": 7},
        {"batch_tokens": 64},
        {"warmup_steps": 3},
        {"grad_clip": None},
        {"precision": "bf16"},
        {"eval_tokens": 64},
        {"divergence": DivergenceConfig(patience=3)},
        {"optimizer": OptimizerConfig(weight_decay=0.0)},
    ],
)
def test_what_changes_the_numbers_changes_the_id(spec, change):
    assert spec.model_copy(update=change).content_hash() != spec.content_hash()


def test_shape_data_and_schedule_are_science(spec):
    assert (
        spec.model_copy(update={"shape": spec.shape.model_copy(update={"ffn_dim": 8})}).content_hash()
        != spec.content_hash()
    )
    assert (
        spec.model_copy(update={"data": spec.data.model_copy(update={"seq_len": 16})}).content_hash()
        != spec.content_hash()
    )
    wsd = spec.schedule.model_copy(update={"kind": "wsd"})
    assert spec.model_copy(update={"schedule": wsd}).content_hash() != spec.content_hash()


def test_a_micro_batch_that_does_not_divide_the_batch_is_kept(spec):
    from ladder.model.recipe import micro_batch_for

    assert micro_batch_for(7, 256, 1024) == 4  # 4 + 3, not a fallback to a divisor
    assert micro_batch_for(24, 256, 2048) == 8 and micro_batch_for(5, 256, 1 << 20) == 5
    assert spec.model_copy(update={"batch_tokens": 7 * 32, "micro_batch_size": 4}).grad_accum_steps == 2


def test_one_count_check_names_the_option_it_reads():
    """`positive_count` is the one check of a count an option takes, over the one parser (`parse_count`)."""
    from ladder.errors import SpecError
    from ladder.model.config import positive_count, read_count

    assert read_count("400K") == 400_000 and read_count("1.5e6") == 1_500_000 and read_count(8) == 8
    assert read_count("8 apples") is None and read_count(True) is None
    assert positive_count("8M", "--tokens") == 8_000_000 and positive_count("0.5", "--budget") == 0.5
    for text, kw in (("0", {}), ("-25K", {}), ("lots", {}), ("0.5", {"at_least_one": True}), ("2P", {"below": 1e15})):
        with pytest.raises(SpecError, match=f"^--params '{text}': must be a positive count such as 64M$"):
            positive_count(text, "--params", **kw)


@pytest.mark.parametrize(
    ("x", "said"),
    [
        (1.0, "1x"),
        (23.44, "23.4x"),
        (999.4, "999x"),
        (4058.2, "4,058x"),
        (3221824.0, "3.22e6x"),
        (0.5, "0.5x"),
        (0.0123, "0.0123x"),
        (6.25e-8, "6.25e-8x"),
    ],
)
def test_a_multiple_is_written_for_people_never_as_python_exponents(x, said):
    """`ladder model info --params 1` said "3.22e+06x the target" and the report "4.06e+03× in compute"."""
    from ladder.model.config import format_multiple

    assert format_multiple(x) == said
    assert format_multiple(x, "×") == said[:-1] + "×"


@pytest.mark.parametrize(("x", "said"), [(63114240000000, "6.31e13"), (1.0, "1"), (999.0, "999"), (1500, "1.50e3")])
def test_compute_is_written_without_a_zero_exponent(x, said):
    """`plan --suggest --budget 1` read the budget back as "1.00e0 FLOPs"."""
    from ladder.model.config import format_flops

    assert format_flops(x) == said
