"""Learning-rate schedules as one pure function of the step (no state, so a resumed run needs only its step).

Step convention: ``lr_at(step, ...)`` is the learning rate of the optimizer update number ``step + 1``, i.e. the
update that takes the run from ``step`` completed updates to ``step + 1``; ``step`` runs over
``0 .. total_steps - 1``.

- warmup: linear, ``peak * (step + 1) / warmup_steps`` for the first ``warmup_steps`` updates (the first update is
  never at LR 0, the last warmup update is at ``peak``);
- ``cosine``: half a cosine from ``peak`` (first update after warmup) to ``floor = final_lr_fraction * peak``
  (the last update, ``step = total_steps - 1``);
- ``wsd`` (warmup-stable-decay, Hägele et al. 2024): ``peak`` until the last ``round(cooldown_fraction *
  total_steps)`` updates, which go down to ``floor`` (reached at the last update), linearly or as ``1 - sqrt``;
- ``constant``: ``peak`` after warmup (``final_lr_fraction`` is not used).

A cooldown branch (a ``wsd`` run of ``n`` steps started from a longer ``wsd`` trunk) shares the trunk's LR at every
update before its ``cooldown_start(n, schedule)``: both are at ``peak`` (or warming up) there, since the trunk's
own cooldown starts later.

When warmup and the decay overlap (a very short run), the smaller of the two wins. Steps past the end keep the
last value.
"""

from __future__ import annotations

import math

from ladder.model.config import ScheduleConfig


def cooldown_start(total_steps: int, schedule: ScheduleConfig) -> int:
    """``wsd``: the step of the first cooldown update of a run of ``total_steps`` updates (``total_steps`` when
    it has no cooldown); the plan branches a budget off its trunk there."""
    return total_steps - int(round(schedule.cooldown_fraction * total_steps))


def lr_at(step: int, *, peak: float, total_steps: int, warmup_steps: int, schedule: ScheduleConfig) -> float:
    """The learning rate of update ``step + 1`` (see the module docstring for the shapes)."""
    if total_steps <= 0:
        raise ValueError(f"total_steps must be positive, got {total_steps}")
    if not 0 <= warmup_steps <= total_steps:
        raise ValueError(f"warmup_steps must be within [0, total_steps={total_steps}], got {warmup_steps}")
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    step = min(step, total_steps - 1)
    warm = peak * (step + 1) / warmup_steps if step < warmup_steps else peak
    floor = schedule.final_lr_fraction * peak
    last = total_steps - 1

    if schedule.kind == "constant":
        decay = peak
    elif schedule.kind == "cosine":
        span = last - warmup_steps
        if span <= 0:  # at most one update after warmup: it runs at peak
            progress = 0.0
        else:
            progress = min(1.0, max(0.0, (step - warmup_steps) / span))
        decay = floor + (peak - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
    elif schedule.kind == "wsd":
        start = cooldown_start(total_steps, schedule)
        cooldown = total_steps - start
        if cooldown <= 0 or step < start:
            decay = peak
        else:
            q = (step - start + 1) / cooldown  # in (0, 1], 1 at the last update
            if schedule.cooldown_shape == "linear":
                decay = peak - (peak - floor) * q
            else:  # "1-sqrt"
                decay = floor + (peak - floor) * (1.0 - math.sqrt(q))
    else:  # pragma: no cover - the config's Literal rules this out
        raise ValueError(f"unknown schedule kind {schedule.kind!r}")
    return float(min(warm, decay))


def lr_curve(*, peak: float, total_steps: int, warmup_steps: int, schedule: ScheduleConfig) -> list[float]:
    """``lr_at`` for every update of a run, for plots and tests."""
    return [
        lr_at(s, peak=peak, total_steps=total_steps, warmup_steps=warmup_steps, schedule=schedule)
        for s in range(total_steps)
    ]
