"""Study specs and the built-in studies shipped with the package."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from ladder.errors import SpecError, shell_word
from ladder.studies.spec import StudySpec, not_a_study_file, parse_study, read_study_file

__all__ = [
    "StudySpec",
    "builtin_names",
    "builtin_path",
    "load_study",
    "naming_the_file",
    "parse_study",
    "read_study_file",
    "study_file",
]


def _builtin_dir() -> Path:
    return Path(str(resources.files("ladder.studies") / "builtin"))


def builtin_names() -> list[str]:
    return sorted(p.stem for p in _builtin_dir().glob("*.yaml"))


def builtin_path(name: str) -> Path:
    path = _builtin_dir() / f"{name}.yaml"
    if not path.is_file():
        raise SpecError(f"no built-in study named {name!r} (built-ins: {', '.join(builtin_names())})")
    return path


def study_file(name_or_path: str | Path) -> Path:
    """The YAML file a study argument names: a file, the spec a planned study directory holds, or a built-in."""
    if not str(name_or_path).strip():
        raise SpecError(
            f"study {str(name_or_path)!r}: an empty name; give a study file, a planned study directory or a built-in "
            f"study ({', '.join(builtin_names())})"
        )
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists() or path.is_symlink() or "/" in str(name_or_path):
        if not path.exists():
            from ladder.layout import broken_link

            link = broken_link(path)
            raise SpecError(f"{link}; give a study file or mend the link" if link else f"{path}: no such study file")
        if path.is_dir():
            # a study directory written by `ladder plan` holds the spec it was planned from
            from ladder.layout import StudyDir

            spec = StudyDir(path).study
            if not spec.exists():
                if StudyDir(path).plan.exists():  # planned, then its study.yaml was lost
                    raise SpecError(f"{path}: a planned study without its {spec.name}; {_rewrite_copy(path)}")
                from ladder.layout import enclosing_study

                outer = enclosing_study(path)
                if outer is not None:  # S/runs, a run's folder: the study is the folder above
                    raise SpecError(f"{path} is inside the study directory {outer}; give that directory")
                raise SpecError(f"{path}: a directory but no planned study (it has no {spec.name}); give a study file")
            return spec
        if not path.is_file():
            raise SpecError(not_a_study_file(path))
        return path
    if str(name_or_path) in builtin_names():
        return builtin_path(str(name_or_path))
    raise SpecError(
        f"{name_or_path!r} is neither a study file nor a built-in study (built-ins: {', '.join(builtin_names())})"
    )


def load_study(name_or_path: str | Path) -> StudySpec:
    """A study from a YAML file path, a planned study directory, or a built-in study by name."""
    path = study_file(name_or_path)
    if not Path(name_or_path).is_dir():
        return read_study_file(path)
    try:
        return read_study_file(path)
    except SpecError as exc:  # a planned study's own copy is damaged: say how to put it back, in place
        raise SpecError(f"{exc}; {_rewrite_copy(Path(name_or_path))}") from None


def _rewrite_copy(study_dir: Path) -> str:
    """How a planned study directory gets its study.yaml back: the study file it was planned from, planned again
    with --out into the same directory (a bare `ladder plan FILE` would plan a second study under ./ladder-runs)."""
    return f"`ladder plan STUDY_FILE --out {shell_word(study_dir)}` (the file it was planned from) rewrites it"


@contextmanager
def naming_the_file(name_or_path: str | Path) -> Iterator[None]:
    """A SpecError from the checks run on a loaded study (sizes, machine, fit requirements) starts with the
    study's file, as the schema's own errors do."""
    try:
        yield
    except SpecError as exc:
        source = str(study_file(name_or_path))
        if str(exc).startswith(f"{source}:"):
            raise
        raise SpecError(f"{source}: {exc}") from None
