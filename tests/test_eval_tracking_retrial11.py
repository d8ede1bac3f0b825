"""Re-trial 11e: the parts around training (the trainer's progress lines, `ladder eval`, `ladder sanity`, the
experiment trackers): what the terminal says agrees with what the run's files say."""

from __future__ import annotations

import re

import pytest

from ladder.model.training.loop import train
from tests.model.training.tiny_runs import make_spec, tiny_data


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread, as the model tests train (the CPU is shared)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_the_finished_line_gives_the_throughput_result_json_gives(tmp_path, capsys):
    """Without a terminal, `ladder train` ended "finished: 66.24K/66.24K tok (100%), loss 2.8329, 131,618 tok/s" and
    then "done: ... 66,240 tokens in 32s": the rate of the last step alone, 58x what result.json and `ladder status`
    give (2,249 tok/s)."""
    spec = make_spec(steps=20, log_interval=5, eval_interval=10, checkpoint_interval=100)
    run = tmp_path / "study" / "runs" / spec.run_id
    run.mkdir(parents=True)
    (run / "spec.json").write_text(spec.model_dump_json(indent=2))
    result = train(run, dataset=tiny_data(), progress=True)
    lines = capsys.readouterr().out.splitlines()
    finished = next(line for line in lines if " finished: " in line)
    rate = re.search(r"([\d,]+) tok/s", finished)
    assert rate and rate.group(1) == f"{result['tokens_per_s']:,.0f}", (finished, result["tokens_per_s"])
