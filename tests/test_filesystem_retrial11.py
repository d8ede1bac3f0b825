"""Issue 28, re-trial 11b: the file system around a real study. A run folder another user owns, a folder where a
run's result.json goes, a study folder that cannot be written: one line naming what to fix, exit 2, nothing
trained for nothing, and the rest of the study goes on. Permissions are tested for real: as root, through capsh
with the capabilities that bypass them dropped (skipped where capsh is missing), else as the user that we are."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ladder import layout
from tests.cli_helpers import CliResult, one_line, run_cli
from tests.fake_runs import finish, plan_micro

STRANGER = 65534  # nobody: the owner of what "another user's" files are here


def _as_a_user(*args: str, cwd: Path) -> CliResult:
    """`ladder ARGS` in a fresh process bound by permission bits: as root, with the capabilities that bypass them
    dropped (a file of another user is then out of reach, as for anyone else)."""
    command = [sys.executable, "-m", "ladder", *map(str, args)]
    if os.geteuid() == 0:
        if shutil.which("capsh") is None:
            pytest.skip("as root, permission bits bind only with capsh's dropped capabilities")
        drop = "--drop=cap_dac_override,cap_dac_read_search,cap_fowner"
        command = ["capsh", drop, "--", "-c", shlex.join(command)]
    r = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)
    return CliResult(r.returncode, r.stdout, r.stderr)


def _strangers(path: Path, mode: int) -> None:
    """``path`` of another user (as root; else our own), with permission bits ``mode``."""
    if os.geteuid() == 0:
        os.chown(path, STRANGER, STRANGER)
    os.chmod(path, mode)


@pytest.fixture
def micro(tmp_path: Path):
    root = tmp_path / "micro"
    specs = plan_micro(root)
    yield root, specs
    for p in [root, *root.rglob("*")]:  # ours again, so that pytest can clean up and nothing stays nobody's
        if not p.is_symlink():
            os.chmod(p, 0o755)
            if os.geteuid() == 0:
                os.chown(p, 0, 0)


def test_an_unwritable_folder_is_named_not_a_temporary_file_that_never_existed(capsys):
    """`fit` of a study the user cannot write said "cannot use S/.fit.json.k2x9.tmp: Permission denied (check its
    permissions...)": a name `ls` never shows; the folder is what to check."""
    from ladder.cli import os_error_line

    folder = Path(__file__).parent
    line = os_error_line(PermissionError(13, "Permission denied", str(folder / ".fit.json.k2x9.tmp")))
    assert f"cannot use {folder}: Permission denied" in line and ".tmp" not in line, line


def test_collect_of_a_study_another_user_owns_names_the_study_folder(micro):
    root, specs = micro
    sd = layout.StudyDir(root)
    for spec in specs:
        finish(sd, spec, loss=4.0)
    _strangers(root, 0o755)
    r = _as_a_user("collect", root, cwd=root.parent)
    line = one_line(r, f"cannot use {root}: Permission denied")
    assert ".tmp" not in line and sorted(p.name for p in root.iterdir()) == sorted(["runs", "plan.json", "study.yaml"])


def test_submit_refuses_a_run_folder_it_cannot_write_and_trains_nothing_there(micro):
    """The debug executor said "failed: [Errno 13] Permission denied: '.../.lock' (`ladder status S` shows its
    error)" while status showed the run planned, with no error; a local worker left it planned without a word."""
    root, specs = micro
    rd = layout.StudyDir(root).run(specs[0].run_id)
    _strangers(rd.path, 0o555)
    r = _as_a_user("submit", root, "--executor", "debug", "--run", rd.run_id, cwd=root.parent)
    one_line(r, rd.run_id, "not submitted", f"cannot write {rd.path}", "Permission denied", "fix its permissions")
    assert sorted(p.name for p in rd.path.iterdir()) == [layout.SPEC]
    assert not layout.StudyDir(root).jobs.exists()


def test_a_run_that_cannot_be_written_does_not_hold_up_the_rest(micro, capsys, monkeypatch):
    from ladder.jobs import submit

    root, specs = micro
    blocked = layout.StudyDir(root).run(specs[0].run_id)
    real = layout.check_writable

    def check_writable(folder):
        if Path(folder) == blocked.path:
            raise PermissionError(13, "Permission denied", str(folder))
        real(folder)

    trained: list[str] = []
    monkeypatch.setattr(layout, "check_writable", check_writable)
    monkeypatch.setattr(submit, "_run_debug", lambda sd, runs: trained.extend(r.run_id for r in runs) or {})
    r = run_cli(capsys, "submit", root, "--executor", "debug")
    assert r.code == 2 and r.stderr.strip().splitlines()[-1].startswith(f"error: {blocked.run_id} not submitted")
    assert trained == [s.run_id for s in specs[1:]]


def test_retry_sets_aside_a_folder_where_result_json_goes_before_training(micro, capsys, monkeypatch):
    """`submit --retry-failed` of a run whose result.json is a folder trained the run to its end, then failed to
    write result.json there: the whole training spent for nothing."""
    from ladder.jobs import submit

    root, specs = micro
    rd = finish(layout.StudyDir(root), specs[0])
    rd.result.unlink()
    rd.result.mkdir()
    trained: list[str] = []
    monkeypatch.setattr(submit, "_run_debug", lambda sd, runs: trained.extend(r.run_id for r in runs) or {})
    r = run_cli(capsys, "submit", root, "--executor", "debug", "--run", rd.run_id, "--retry-failed")
    assert r.code == 0 and trained == [rd.run_id], r.stderr
    assert not os.path.lexists(rd.result)
    assert [p.is_dir() for p in rd.path.glob("result.unusable-*.json")] == [True]  # kept for the books


def test_train_refuses_a_folder_where_result_json_goes_before_training(micro, capsys, monkeypatch):
    """`ladder train` of such a run trained it to its end, printed two tracebacks and then the error."""
    import ladder.model.training.loop as loop

    root, specs = micro
    rd = layout.StudyDir(root).run(specs[0].run_id)
    rd.result.mkdir()
    monkeypatch.setattr(loop, "train", lambda *a, **k: pytest.fail("trained a run whose result.json is a folder"))
    one_line(run_cli(capsys, "train", rd.path), f"{rd.result} is not a file (a directory)", f"rm -r {rd.result}")
    assert rd.result.is_dir()


def test_report_goes_on_past_a_run_folder_it_cannot_search(micro):
    """`status` and `collect` show such a run as damaged; `report` stopped at it: "cannot use
    S/runs/<id>/result.json: Permission denied", and the rest of the study had no report."""
    root, specs = micro
    sd = layout.StudyDir(root)
    for spec in specs:
        finish(sd, spec, loss=4.0)
    assert _as_a_user("collect", root, cwd=root.parent).code == 0
    _strangers(sd.run(specs[0].run_id).path, 0o000)
    r = _as_a_user("report", root, "--format", "html", cwd=root.parent)
    assert r.code == 0 and "Traceback" not in r.stderr, r.stderr
    assert (sd.report / "report.html").is_file()


def test_a_result_json_of_another_run_is_corrupt_not_that_runs_numbers(micro, capsys):
    """A result.json linked (or copied) from another run's folder made the run done with the other's loss and
    FLOPs, which `collect` then handed to the fit as this run's."""
    root, specs = micro
    sd = layout.StudyDir(root)
    small, other = finish(sd, specs[0], loss=4.0), finish(sd, specs[1], loss=3.0)
    small.result.unlink()
    small.result.symlink_to(Path("..") / other.run_id / layout.RESULT)
    r = run_cli(capsys, "status", root)
    assert f"{small.run_id} corrupt: result.json: is the result of another run ({other.run_id})" in r.stdout
    assert run_cli(capsys, "collect", root).code == 0
    import pandas as pd

    rows = pd.read_parquet(sd.results_parquet).set_index("run_id")
    assert rows.loc[small.run_id, "status"] == "corrupt" and rows.loc[other.run_id, "loss"] == 3.0


def test_a_reused_pid_is_no_live_local_job(micro, capsys):
    """A local worker's pid, recorded in jobs.json, is handed to another process after a reboot (or when pids wrap):
    the run showed "queued" and submit skipped it as "queued (job alive)" for as long as that process lived."""
    import datetime as dt

    from ladder.books import job_records
    from ladder.books.run_status import study_status

    root, specs = micro
    sd = layout.StudyDir(root)
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)  # a process that is no worker of ours
    try:

        def recorded(when: dt.datetime) -> str:
            with job_records.editing(sd) as book:
                book[specs[0].run_id] = [
                    job_records.JobRecord(
                        executor="local",
                        job_ids=[str(other.pid)],
                        folder="submitit/local/%j",
                        submitted_at=when.isoformat(timespec="seconds"),
                    )
                ]
            return study_status(root)[0].state

        now = dt.datetime.now(dt.timezone.utc)
        assert recorded(now) == "queued"  # submitted as it started: its worker
        assert recorded(now - dt.timedelta(days=3)) == "planned"  # it started days after that job's submission
    finally:
        other.kill()
        other.wait()


def test_a_checkpoint_without_its_weights_names_the_repair(micro):
    """`ladder train` of a run whose checkpoint lost its model/ said "no *.safetensors weights in .../model" and
    no more; every other damage of a checkpoint names the files to delete to restart the run."""
    import torch

    from ladder.errors import StateError
    from ladder.model.training.checkpoint import STATE_FILE, resume
    from tests.fake_runs import partial

    root, specs = micro
    rd = partial(layout.StudyDir(root), specs[0], 4)
    (rd.checkpoint_dir(4) / STATE_FILE).write_text("{}")
    with pytest.raises(StateError) as caught:
        resume(rd, model=torch.nn.Linear(1, 1), optimizer=None, spec_hash="x")
    assert "no *.safetensors weights" in str(caught.value)
    assert f"delete the checkpoint (checkpoint.json and {rd.checkpoint_dir(4).name})" in str(caught.value)


def test_a_run_folder_linked_to_another_runs_says_to_remove_the_link(micro, capsys):
    """runs/A a link to runs/B: status named A's spec.json "the spec of another run" and advised `ladder plan ...`,
    which left A as it was, damaged, for ever; removing the link is the repair, and plan then remakes A."""
    root, specs = micro
    sd = layout.StudyDir(root)
    linked, other = sd.run(specs[0].run_id), sd.run(specs[1].run_id)
    shutil.rmtree(linked.path)
    linked.path.symlink_to(other.run_id)
    r = run_cli(capsys, "status", root)
    assert f"it is a link to the folder of run {other.run_id}: remove the link (`rm {linked.path}`)" in r.stdout
    r = run_cli(capsys, "plan", sd.study, "--out", root)
    assert r.code == 0 and other.read_spec().run_id == other.run_id and linked.path.is_symlink()
    linked.path.unlink()
    assert run_cli(capsys, "plan", sd.study, "--out", root).code == 0
    assert linked.read_spec(same_run=True).run_id == linked.run_id


@pytest.mark.parametrize("name", [layout.RESULT, layout.SPEC])
def test_a_pipe_where_a_run_file_goes_is_named_and_blocks_nothing(micro, capsys, name):
    """A named pipe for a run's result.json or spec.json hung `status`, `collect` and `report` for ever (and a link to
    /dev/zero filled the memory): one run's damage, named, and the rest of the study read."""
    root, specs = micro
    sd = layout.StudyDir(root)
    for spec in specs:
        finish(sd, spec, loss=4.0)
    rd = sd.run(specs[0].run_id)
    (rd.path / name).unlink()
    os.mkfifo(rd.path / name)
    for command in ("status", "collect"):
        r = subprocess.run(
            [sys.executable, "-m", "ladder", command, str(root)], capture_output=True, text=True, timeout=60
        )
        assert r.returncode == 0 and "is not a regular file (a pipe or a device" in r.stdout + r.stderr, r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "ladder", "report", str(root), "--format", "html"], capture_output=True, timeout=60
    )
    assert r.returncode == 0 and (sd.report / "report.html").is_file()
