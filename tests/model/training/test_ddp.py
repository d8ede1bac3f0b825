"""Two CPU processes (gloo DDP, launched the way torchrun launches them: RANK / WORLD_SIZE / MASTER_* in the
environment) follow the same loss curve as one process with the same global batch."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import numpy as np
import pytest

from ladder.layout import RunDir
from ladder.model.training.loop import train
from tests.model.training.tiny_runs import (
    REPO,
    SUBPROCESS_CODE,
    make_run,
    make_spec,
    metrics,
    subprocess_env,
    tiny_data,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_process_gloo_ddp_matches_one_process(tmp_path):
    # 7 sequences per step in micro-batches of 2: rank 0 gets 3 (2 + 1), rank 1 gets 4 (2 + 2); one process 2+2+2+1
    spec = make_spec(steps=12, seqs_per_step=7, micro=2, log_interval=1, eval_interval=6, checkpoint_interval=5)
    single = make_run(tmp_path / "single", spec)
    ref = train(single, dataset=tiny_data())

    multi = make_run(tmp_path / "ddp", spec)
    port = free_port()
    procs = []
    for rank in range(2):
        env = subprocess_env()
        env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))  # fmt: skip
        procs.append(subprocess.Popen([sys.executable, "-c", SUBPROCESS_CODE, str(multi)], cwd=REPO, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))  # fmt: skip
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    results = [json.loads(out.split("RESULT ", 1)[1]) for out, _ in outs]
    assert results[0]["world_size"] == results[1]["world_size"] == 2
    assert results[0]["status"] == results[1]["status"] == "done"
    assert json.loads(RunDir(multi).result.read_text()) == results[0]  # rank 0 wrote it

    a, b = metrics(single, "train"), metrics(multi, "train")
    assert [r["step"] for r in a] == [r["step"] for r in b] == list(range(1, 13))  # one writer: no duplicates
    np.testing.assert_allclose([r["loss"] for r in b], [r["loss"] for r in a], rtol=1e-5)
    np.testing.assert_allclose([r["grad_norm"] for r in b], [r["grad_norm"] for r in a], rtol=1e-4)
    ea, eb = metrics(single, "eval"), metrics(multi, "eval")
    assert [r["step"] for r in ea] == [r["step"] for r in eb] == [6, 12]
    np.testing.assert_allclose([r["eval_loss"] for r in eb], [r["eval_loss"] for r in ea], rtol=1e-5)
    assert results[0]["final_eval_loss"] == pytest.approx(ref["final_eval_loss"], rel=1e-5)
    assert (multi / "model" / "model.safetensors").is_file()
