"""The design card's layout, checked by reading the code: the rooms, one import namespace, imports that point one
way along the data flow (studies -> plan -> submit -> model on the node -> collect -> reports) with no circles,
no torch where a command or a fit does not need it, and no module a newcomer has to scroll through."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
# repository folder -> the import name it installs as (pyproject's [tool.setuptools] package-dir)
ROOMS = {"ladder": "ladder", "model": "ladder.model", "studies": "ladder.studies", "reports": "ladder.reports"}
MAX_LINES = 600  # cohesive modules, not short ones: one idea in one file (issue 27)
# the pure accounting of the model room: what plan, studies and reports may use from it (no torch)
MODEL_ACCOUNTING = {
    "ladder.model",
    "ladder.model.shape",
    "ladder.model.sizing",
    "ladder.model.recipe",
    "ladder.model.config",
    "ladder.model.schedule",
    "ladder.model.hardware",
}
LEAVES = {"ladder", "ladder.errors", "ladder.layout"}  # what any room may import from ladder/


def _modules() -> dict[str, Path]:
    mods = {}
    for folder, name in ROOMS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            mods[".".join([name, *parts])] = path
    return mods


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The project module an import names (``from ladder import layout`` names ``ladder.layout``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(imported name, at module level?) for every import in a file, lazy ones inside functions included; an
    import under ``if TYPE_CHECKING`` is not an import at run time and is skipped."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, top: bool) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            for child in node.orelse:
                visit(child, top)
            return
        if isinstance(node, ast.Import):
            found.extend((a.name, top) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, top))
            found.extend((f"{node.module}.{a.name}", top) for a in node.names)
        inner = top and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, True)
    return found


GRAPH: dict[str, set[str]] = {}
EXTERNAL: dict[str, set[tuple[str, bool]]] = {}
for _mod, _path in MODULES.items():
    GRAPH[_mod], EXTERNAL[_mod] = set(), set()
    for _name, _top in _imports(_path):
        target = _resolve(_name) if _name.split(".")[0] == "ladder" else None
        if target is not None and target != _mod:
            GRAPH[_mod].add(target)
        elif target is None:
            EXTERNAL[_mod].add((_name.split(".")[0], _top))


def _in(mod: str, package: str) -> bool:
    return mod == package or mod.startswith(package + ".")


def test_every_room_is_a_package_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == {name: folder for folder, name in ROOMS.items()}
    packages = {m for m, p in MODULES.items() if p.name == "__init__.py"}
    data = {name for name in config["packages"] if name in config.get("package-data", {}) and name not in packages}
    assert set(config["packages"]) == packages | data, "every folder with an __init__.py is listed, and data folders"
    assert data == DATA_FOLDERS, "a data folder is listed with its files in package-data, and nothing else"


# folders of data files (no Python): listed as packages with their package-data, so that pip installs them quietly
DATA_FOLDERS = {"ladder.studies.builtin", "ladder.reports.render.templates", "ladder.model.evaluation.tasks.data"}


def test_the_install_is_quiet():
    """The project's own output is the first thing a user sees: no setuptools warning about data folders."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    for name in DATA_FOLDERS:
        *_, rest = name.partition(".")
        room, _, sub = rest.partition(".")
        folder = ROOT / {v: k for k, v in ROOMS.items()}[f"ladder.{room}"] / sub.replace(".", "/")
        assert folder.is_dir() and not (folder / "__init__.py").exists(), folder
        assert any(folder.glob(pattern) for pattern in config["package-data"][name]), name


def test_no_bare_room_names():
    """``model``, ``reports`` and ``studies`` are never imported by their folder names: only ``ladder.*`` is
    installed, and a top-level ``model`` would collide with users' own modules."""
    bare = {(m, name) for m, ext in EXTERNAL.items() for name, _ in ext if name in ("model", "reports", "studies")}
    assert not bare


def test_no_import_circles():
    """Tarjan's strongly connected components over every import, lazy ones too: a circle is a component of
    more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)  # the walk recurses along import chains
    try:
        for v in GRAPH:
            if v not in index:
                strong(v)
    finally:  # left at 10,000, the worker's later deep-nesting tests recursed 5,000 levels into PyYAML (10 s)
        sys.setrecursionlimit(limit)
    # a package's __init__ re-exporting its own modules is not a circle between rooms
    circles = [c for c in circles if not all(_in(m, c[0]) for m in c)]
    assert not circles


def _violations(source: str, allowed) -> list[str]:
    return sorted(f"{m} -> {t}" for m in GRAPH if _in(m, source) for t in GRAPH[m] if not allowed(m, t))


def test_model_imports_nothing_from_orchestration_or_reports():
    assert not _violations("ladder.model", lambda m, t: _in(t, "ladder.model") or t in LEAVES)


def test_studies_use_only_the_model_accounting():
    assert not _violations(
        "ladder.studies", lambda m, t: _in(t, "ladder.studies") or t in LEAVES or t in MODEL_ACCOUNTING
    )


def test_reports_never_reach_back_into_orchestration_or_the_node():
    def allowed(m: str, t: str) -> bool:
        return _in(t, "ladder.reports") or _in(t, "ladder.studies") or t in LEAVES or t in MODEL_ACCOUNTING

    assert not _violations("ladder.reports", allowed)


def test_fits_never_render():
    def allowed(m: str, t: str) -> bool:
        return not (_in(t, "ladder.reports.render") or t == "ladder.reports.summary")

    assert not _violations("ladder.reports.fits", allowed)
    drawing = {(m, n) for m, ext in EXTERNAL.items() if _in(m, "ladder.reports.fits") for n, _ in ext}
    assert not {x for x in drawing if x[1] in ("matplotlib", "jinja2", "rich")}


# ladder/'s stages, and the other stages each may import: the plan comes first, the books read what the plan and
# the jobs wrote, the jobs submit what the books say is unfinished, the forecast reads the books' results.
STAGES = {
    "ladder.plan": set(),
    "ladder.books": {"ladder.plan"},
    "ladder.jobs": {"ladder.plan", "ladder.books"},
    "ladder.forecast": {"ladder.plan", "ladder.books"},
}


def test_stages_import_one_way():
    """Within ladder/, a stage imports only the stages before it (pipeline and the CLI, at the top, import any)."""

    def allowed(m: str, t: str) -> bool:
        return not any(
            _in(t, stage) and not _in(m, stage) and stage not in STAGES[own]
            for own in STAGES
            if _in(m, own)
            for stage in STAGES
        )

    for stage in STAGES:
        assert not _violations(stage, allowed)
    for room in ("ladder.model", "ladder.studies", "ladder.reports"):
        assert not _violations(room, lambda m, t: not any(_in(t, stage) for stage in STAGES))


def test_no_torch_where_it_is_not_needed():
    """torch (and transformers) only in the node-side model room and where a job runs: the CLI, the plan,
    status, collect, the studies, the model's accounting and every report import it lazily or not at all, so
    that `ladder --help`, `ladder plan` and `ladder fit` start quickly and reports run on a machine without it."""
    heavy = {"torch", "transformers", "lm_eval", "datatrove"}
    pure = [
        m
        for m in MODULES
        if _in(m, "ladder.reports")
        or _in(m, "ladder.studies")
        or m in MODEL_ACCOUNTING
        or (_in(m, "ladder") and not _in(m, "ladder.model"))
    ]
    at_top = sorted(f"{m} -> {n}" for m in pure for n, top in EXTERNAL[m] if n in heavy and top)
    assert not at_top
    in_reports = sorted(f"{m} -> {n}" for m in pure if _in(m, "ladder.reports") for n, _ in EXTERNAL[m] if n in heavy)
    assert not in_reports, "reports never import torch, even lazily"


def test_importing_the_light_modules_loads_no_torch():
    """The same rule, observed: import them in a fresh interpreter and look at sys.modules."""
    light = sorted(
        m
        for m in MODULES
        if m in MODEL_ACCOUNTING
        or _in(m, "ladder.studies")
        or _in(m, "ladder.reports")
        or _in(m, "ladder.cli")
        or m in ("ladder.plan.planner", "ladder.books.run_status", "ladder.books.collect", "ladder.layout")
    )
    code = (
        f"import importlib, sys\nfor m in {light!r}:\n    importlib.import_module(m)\n"
        "print(sorted(n for n in ('torch', 'transformers', 'lm_eval') if n in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_a_newcomer_has_to_scroll(module):
    lines = len(MODULES[module].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{MODULES[module].relative_to(ROOT)} has {lines} lines"


def test_each_package_says_what_it_holds():
    """Every package's __init__ has a docstring (what the room holds and what it may import)."""
    missing = [
        m for m, p in MODULES.items() if p.name == "__init__.py" and not ast.get_docstring(ast.parse(p.read_text()))
    ]
    assert not missing


@pytest.mark.slow
def test_a_wheel_installs_and_runs(tmp_path):
    """A wheel holds the four rooms under ``ladder/`` (and the data files), installs into a fresh venv and
    runs ``ladder --help`` away from the source tree. The venv borrows the test environment's third-party
    packages through a .pth file, so nothing is downloaded."""
    import sysconfig

    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(ROOT), "-w", str(wheels)],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob("ladder-*.whl")
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"ladder", wheel.name.split("-py")[0] + ".dist-info"}
    for needed in ("ladder/model/__init__.py", "ladder/reports/__init__.py", "ladder/studies/builtin/default.yaml"):
        assert needed in names
    assert any(n.endswith(".j2") for n in names) and any(n.endswith("py_next_line.jsonl") for n in names)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    # third-party packages from the test environment, but not its editable ladder
    (site / "_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    py = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
    )
    probe = subprocess.run(
        [str(py), "-c", "import ladder, ladder.model, ladder.reports, ladder.studies; print(ladder.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert str(site) in probe.stdout
    top = {p.name for p in site.iterdir()} & {"model", "reports", "studies"}
    assert not top, "nothing but ladder is installed"
    run = subprocess.run([str(venv / "bin" / "ladder"), "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0 and "plan" in run.stdout and "report" in run.stdout
