"""The machine that renders the report: package versions (from package metadata, so torch is never imported),
the source commit and the hardware. The report's reproducibility section and both outputs' dates read it."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = (
    "ladder",
    "torch",
    "transformers",
    "tokenizers",
    "datatrove",
    "lm_eval",
    "submitit",
    "numpy",
    "scipy",
    "pandas",
    "pyarrow",
    "matplotlib",
    "jinja2",
    "pydantic",
)


def version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _git(cwd: Path) -> str | None:
    try:
        env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"}
        head = subprocess.run(
            ["git", "-C", str(cwd), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, env=env
        )
        if head.returncode != 0:
            return None
        commit = head.stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(cwd), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            env=env,
        )
        return commit + (" (with uncommitted changes)" if dirty.returncode == 0 and dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _memory() -> str | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024**2:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return None


def _gpus() -> str | None:
    import shutil

    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=name,memory.total", "--format=csv,noheader"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [ln.strip() for ln in out.stdout.splitlines() if ln.strip()]
    if out.returncode != 0 or not lines:
        return None
    counts: dict[str, int] = {}
    for ln in lines:
        counts[ln] = counts.get(ln, 0) + 1
    return ", ".join(f"{n} × {name}" for name, n in counts.items())


def environment() -> dict[str, Any]:
    """Versions, source commit and hardware of the machine rendering the report (torch is never imported)."""
    import ladder

    versions = {"python": platform.python_version()}
    versions.update({p: version(p) for p in PACKAGES})
    source = []
    pkg_dir = Path(ladder.__file__).resolve().parent
    pkg_commit = _git(pkg_dir)
    source.append(("ladder source", f"{pkg_dir} @ {pkg_commit}" if pkg_commit else f"{pkg_dir} (not a git checkout)"))
    cwd_commit = _git(Path.cwd())
    if cwd_commit and cwd_commit != pkg_commit:
        source.append(("working directory", f"{Path.cwd()} @ {cwd_commit}"))
    hardware = [
        ("platform", f"{platform.system()} {platform.release()} ({platform.machine()})"),
        ("CPU", f"{_cpu_model()}, {os.cpu_count()} logical cores"),
    ]
    mem = _memory()
    if mem:
        hardware.append(("memory", mem))
    hardware.append(("GPUs", _gpus() or "none found (no nvidia-smi)"))
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "versions": versions,
        "source": source,
        "hardware": hardware,
    }
