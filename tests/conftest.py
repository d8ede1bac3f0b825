"""Shared test fixtures. Tests never touch the Hugging Face hub, nor the user's ~/.cache/ladder."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before anything imports huggingface_hub
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# one inductor (torch.compile) cache for the whole test run, shared by every test, xdist worker and subprocess
# (scripts/test.sh exports the same folder); made now, so that no test sees it appear in the repository's root
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(__file__).resolve().parents[1] / ".cache" / "inductor"))
Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]).mkdir(parents=True, exist_ok=True)

_WORDS = (
    "the a ladder model trains small runs and fits laws of scale over tokens with care def return import "
    "class self value data loss step café naïve über 東京 数据 🎉 résumé"
).split()


# Under pytest-xdist with ``--dist loadgroup`` (what scripts/test.sh runs) every test spreads over the workers
# except these, which share something a second test at the same moment would disturb. Each group runs on one
# worker, one test after another:
# - "workers": tests that start local workers (submitit's local executor, `ladder run`/`submit --executor local`)
#   that fill the cores, and tests that submit to the one local SLURM node (besides every test marked ``slurm``);
# - "repo-root": the README's commands check that they write nothing into the repository's root, and the wheel
#   test builds the package there (pip leaves build/ behind).
# - "inductor": the torch.compile tests, one after another, so that the later ones load the kernels the first
#   compiled into the run's one inductor cache (two workers compiling the same graphs at once both miss it).
# Everything else trains in-process on one thread, works in its own tmp_path and $LADDER_CACHE (per xdist worker),
# and picks free ports. A name listed here that its module no longer defines fails the collection.
XDIST_GROUPS = {
    "workers": (
        "test_branches.py::test_local_executor_trains_trunks_then_branches_from_their_snapshots",
        "test_branches.py::test_slurm_branches_start_after_their_trunks_job_and_match_an_undisturbed_run",
        "test_hero.py::test_a_planned_hero_trains_through_debug_and_local_executors_and_is_scored",
        "test_pipeline.py::test_ladder_run_survives_ctrl_c_and_kill_9",
        "test_eval_interrupt_retrial11.py::test_a_signal_to_the_command_alone_stops_its_eval_workers",
        "test_submit.py::test_local_executor_runs_the_micro_study",
        "test_submit.py::test_submit_piped_into_another_process_returns_while_the_runs_go_on",
        "test_submit.py::test_slurm_micro_study_preemption_and_requeue",
        "test_submit.py::test_slurm_a_run_that_raises_shows_its_error",
    ),
    "repo-root": (
        "test_readme.py::test_a_readme_command_runs_as_written",
        "test_layout.py::test_a_wheel_installs_and_runs",
    ),
    "inductor": (
        "model/training/test_compile.py::test_compiled_run_keeps_one_shape_and_the_eager_losses",
        "model/training/test_compile.py::test_a_compiled_run_stopped_and_resumed_ends_bit_identical",
        "model/training/test_compile.py::test_runs_of_other_shapes_compiled_one_after_another_in_one_process_all_compile",
    ),
}

# Module-scoped fixtures that take long to build (seconds on one core, measured): the tests of that module that use
# one run on one worker, one after another, so that it is built once, not once on each worker.
SHARED_FIXTURES = {
    "reports/render/test_report.py": "hostile",  # 29 s: a study planned, fake-trained, fitted, rendered to HTML+PDF
    "reports/render/test_forecast_section.py": "frozen",  # 26 s (with ``scored``, which builds on it)
    "reports/render/test_ablation_sections.py": "study",  # 22 s
    "reports/render/test_pdf.py": "long_pdf",  # 6 s
}


@pytest.hookimpl(wrapper=True)  # around xdist's own hook, which reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]):
    """Pin the tests of :data:`XDIST_GROUPS` (and every ``slurm`` test) to their xdist group, and those using a
    fixture of :data:`SHARED_FIXTURES` to one group per fixture."""
    here = Path(__file__).parent
    group_of = {name: group for group, names in XDIST_GROUPS.items() for name in names}
    modules = {}
    for item in items:
        rel = item.path.relative_to(here).as_posix() if item.path.is_relative_to(here) else item.path.name
        modules.setdefault(rel, getattr(item, "module", None))
        group = group_of.get(f"{rel}::{getattr(item, 'originalname', item.name)}")
        if group is None and item.get_closest_marker("slurm"):
            group = "workers"
        if group is None and SHARED_FIXTURES.get(rel) in getattr(item, "fixturenames", ()):
            group = f"{rel}::{SHARED_FIXTURES[rel]}"
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    stale = [
        name
        for name in [*group_of, *(f"{rel}::{fixture}" for rel, fixture in SHARED_FIXTURES.items())]
        if (m := modules.get(name.split("::")[0])) is not None and not hasattr(m, name.split("::")[1])
    ]
    if stale:
        raise pytest.UsageError(f"tests/conftest.py names tests or fixtures that do not exist: {stale}")
    yield
    _keep_xdist_groups(items)


def _keep_xdist_groups(items: list[pytest.Item]) -> None:
    """pytest-xdist (3.8) sends a group to one worker by renaming its tests' node ids (``item._nodeid``), which
    pytest 9 no longer reads: without this, ``--dist loadgroup`` spreads every group over the workers."""
    for item in items:
        renamed = vars(item).get("_nodeid")
        if renamed and renamed != item.nodeid and hasattr(item, "_id"):
            from _pytest.nodeid import coerce_node_id

            item._id = coerce_node_id(renamed)


@pytest.fixture(autouse=True)
def _ladder_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$LADDER_CACHE`` points at one temporary folder for the whole session (never ~/.cache/ladder)."""
    root = tmp_path_factory.getbasetemp() / "ladder-cache"
    monkeypatch.setenv("LADDER_CACHE", str(root))
    return root


def make_texts(n: int, seed: int = 0, words: int = 60) -> list[str]:
    """``n`` small deterministic documents (with accents, CJK, emoji, tabs, runs of spaces, newlines)."""
    rng = random.Random(seed)
    seps = [" ", " ", " ", "  ", "\t", "\n", ", "]
    out = []
    for i in range(n):
        parts = []
        for _ in range(rng.randint(words // 2, words)):
            parts.append(rng.choice(_WORDS))
            parts.append(rng.choice(seps))
        out.append(f"doc {i}: " + "".join(parts) + "\n")
    return out


@pytest.fixture(scope="session")
def tiny_texts() -> list[str]:
    return make_texts(300)


@pytest.fixture(scope="session")
def tiny_jsonl_corpus(tmp_path_factory: pytest.TempPathFactory, tiny_texts: list[str]) -> Path:
    """A folder of 3 jsonl files (one gzipped) holding ``tiny_texts``, 100 documents each."""
    import gzip

    folder = tmp_path_factory.mktemp("jsonl_corpus")
    for k in range(3):
        part = tiny_texts[k * 100 : (k + 1) * 100]
        lines = "".join(json.dumps({"text": t, "n": i}) + "\n" for i, t in enumerate(part))
        if k == 2:
            with gzip.open(folder / f"part{k}.jsonl.gz", "wt", encoding="utf-8") as f:
                f.write(lines)
        else:
            (folder / f"part{k}.jsonl").write_text(lines, encoding="utf-8")
    return folder


@pytest.fixture()
def planned_micro(tmp_path, tiny_jsonl_corpus, capsys):
    """``make(name, **kw)``: a micro study (:func:`tests.micro.write_study` on the tiny corpus) planned by the CLI,
    as (study directory, run ids)."""
    from tests.cli_helpers import run_cli
    from tests.micro import write_study

    def make(name="micro", **kw):
        spec = write_study(tmp_path / f"{name}.yaml", tiny_jsonl_corpus, name=name, **kw)
        out = tmp_path / name
        r = run_cli(capsys, "plan", spec, "--out", out, "--no-fit-check", "--json")  # 2 sizes: no fit
        assert r.code == 0, r.stderr
        return out, [run["run_id"] for run in r.json()["runs"]]

    return make


@pytest.fixture(scope="session")
def tiny_tokenizer(tmp_path_factory: pytest.TempPathFactory, tiny_texts: list[str]) -> Path:
    """A byte-level BPE (ladder.model.data.tokenizer) with 300 ids trained on ``tiny_texts``; the folder."""
    from ladder.model.data.tokenizer import train_tokenizer

    return train_tokenizer(tiny_texts, 300, tmp_path_factory.mktemp("tok") / "tokenizer")


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The forecast loop's fitted ladder (:func:`tests.hero_fixture.make_ladder`), made once per module that uses
    it (test_forecast, test_hero); a module may define its own ``fitted``."""
    from tests.hero_fixture import make_ladder

    return make_ladder(tmp_path_factory.mktemp("ladder") / "study")


@pytest.fixture
def study(fitted: Path, tmp_path: Path) -> Path:
    """A copy of ``fitted`` for one test to change; a module may define its own ``study``."""
    import shutil

    return Path(shutil.copytree(fitted, tmp_path / "study"))
