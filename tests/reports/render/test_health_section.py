"""The report's run-health section: what it says of the runs' throughput and MFU."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from ladder.reports.render.builder import Builder
from ladder.reports.render.sections.health import health
from ladder.reports.render.study import StudyData
from tests.reports.texts import texts


def _section(mfu: list[float]) -> str:
    n = len(mfu)
    data = StudyData(path=Path("."), name="s", has_results=True)
    data.runs = pd.DataFrame(
        {
            "run_id": [f"r{i}" for i in range(n)],
            "status": ["done"] * n,
            "variant": ["tied"] * n,
            "role": ["rung"] * n,
            "params": [1e4 * 2**i for i in range(n)],
            "flops": [1e11 * 2**i for i in range(n)],
            "loss": [3.0 - 0.1 * i for i in range(n)],
            "tokens_per_s": [2e4] * n,
            "mfu": mfu,
            "wall_time_s": [10.0] * n,
            "restarts": [0] * n,
        }
    )
    return texts(health(Builder(data)))


@pytest.mark.parametrize("mfu, said", [([0.4, 1.3, 1.6], "2 runs above 100%"), ([0.4, 0.9, 1.02], "1 run above")])
def test_mfu_above_100_percent_is_said_to_be_overstated(mfu, said):
    """The main job's report read "MFU (median, range) 99.5% (15.1% - 160.2%)" with no word: no run computes
    faster than its device's peak, so the peak it was divided by was too low (a CPU's, measured while another
    worker was busy on the same cores)."""
    text = _section(mfu)
    assert f"MFU (median, range) {100 * sorted(mfu)[1]:.1f}%" in text
    assert f"; {said}" in text and "so that MFU is overstated" in text, text


def test_mfu_within_100_percent_carries_no_caveat():
    text = _section([0.2, 0.4, 0.99])
    assert "MFU (median, range) 40.0% (20.0% – 99.0%)" in text and "overstated" not in text
