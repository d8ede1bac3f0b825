"""Learning-rate schedules: shapes of warmup, cosine, WSD and constant."""

import math

import pytest

from ladder.model.config import ScheduleConfig
from ladder.model.schedule import lr_at, lr_curve

PEAK = 1e-3


def curve(kind, total=100, warmup=10, **kw):
    return lr_curve(peak=PEAK, total_steps=total, warmup_steps=warmup, schedule=ScheduleConfig(kind=kind, **kw))


def non_increasing(xs):
    return all(b <= a + 1e-18 for a, b in zip(xs, xs[1:]))


@pytest.mark.parametrize("kind", ["cosine", "wsd", "constant"])
def test_warmup_is_linear_from_the_first_step_to_peak(kind):
    lrs = curve(kind, warmup_fraction=0.1)
    assert lrs[:10] == pytest.approx([PEAK * (s + 1) / 10 for s in range(10)])
    assert lrs[0] > 0 and lrs[9] == pytest.approx(PEAK)
    assert max(lrs) == pytest.approx(PEAK)


def test_cosine_decays_monotonically_to_the_floor():
    lrs = curve("cosine", final_lr_fraction=0.1)
    assert lrs[10] == pytest.approx(PEAK)
    assert non_increasing(lrs[10:])
    assert lrs[-1] == pytest.approx(0.1 * PEAK)
    mid = 10 + (99 - 10) / 2  # halfway through the decay: halfway between peak and floor
    assert lr_at(int(mid), peak=PEAK, total_steps=100, warmup_steps=10, schedule=ScheduleConfig()) == pytest.approx(
        0.1 * PEAK + 0.9 * PEAK * 0.5 * (1 + math.cos(math.pi * (int(mid) - 10) / 89))
    )
    assert curve("cosine", final_lr_fraction=0.0)[-1] == pytest.approx(0.0, abs=1e-15)


@pytest.mark.parametrize("shape", ["linear", "1-sqrt"])
def test_wsd_is_flat_then_cools_down_to_the_floor(shape):
    lrs = curve("wsd", cooldown_fraction=0.2, cooldown_shape=shape, final_lr_fraction=0.0)
    assert all(x == PEAK for x in lrs[10:80])  # stable phase
    assert lrs[80] < PEAK and non_increasing(lrs[80:])
    assert lrs[-1] == pytest.approx(0.0, abs=1e-15)
    if shape == "linear":
        assert lrs[89] == pytest.approx(PEAK * 0.5)  # half way through a linear cooldown
    else:
        assert lrs[89] == pytest.approx(PEAK * (1 - math.sqrt(0.5)))  # 1-sqrt drops faster early
    floor = curve("wsd", cooldown_fraction=0.2, cooldown_shape=shape, final_lr_fraction=0.1)[-1]
    assert floor == pytest.approx(0.1 * PEAK)


def test_constant_stays_at_peak_and_steps_past_the_end_keep_the_last_value():
    assert all(x == PEAK for x in curve("constant")[10:])
    cfg = ScheduleConfig()
    assert lr_at(500, peak=PEAK, total_steps=100, warmup_steps=10, schedule=cfg) == lr_at(
        99, peak=PEAK, total_steps=100, warmup_steps=10, schedule=cfg
    )


def test_edge_cases_no_warmup_all_warmup_single_step():
    assert curve("cosine", warmup=0)[0] == pytest.approx(PEAK)
    assert curve("cosine", total=10, warmup=10) == pytest.approx([PEAK * (s + 1) / 10 for s in range(10)])
    assert curve("cosine", total=1, warmup=0) == pytest.approx([PEAK])
    assert curve("wsd", total=1, warmup=0, cooldown_fraction=0.0)[0] == PEAK
    with pytest.raises(ValueError):
        lr_at(0, peak=PEAK, total_steps=10, warmup_steps=11, schedule=ScheduleConfig())
    with pytest.raises(ValueError):
        lr_at(-1, peak=PEAK, total_steps=10, warmup_steps=1, schedule=ScheduleConfig())
