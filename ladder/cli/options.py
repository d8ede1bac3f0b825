"""Options and option parsing that several commands share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import typer

from ladder.errors import SpecError

if TYPE_CHECKING:
    from ladder.studies.spec import ExecutorSpec, StudySpec

JSON_OPT = typer.Option(False, "--json", help="Print machine-readable JSON only.")
EXECUTOR_HELP = "slurm | local | debug (default: the study's executor.kind)."


def executor_spec(study: StudySpec, kind: Optional[str], overrides: dict) -> ExecutorSpec:
    """The study's executor section with the command line's options laid over it (an option left out, None,
    keeps the study's value), validated."""
    from pydantic import ValidationError

    from ladder.studies.spec import ExecutorSpec

    data = study.executor.model_dump()
    if kind is not None:
        data["kind"] = kind
    for section, values in overrides.items():
        data[section].update({k: v for k, v in values.items() if v is not None})
    try:
        return ExecutorSpec.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = ".".join(str(p) for p in first["loc"])
        raise SpecError(f"executor.{field} = {first.get('input')!r}: {first['msg']}") from None


def parse_gpus(gpus: Optional[str]) -> Optional[list[int]]:
    if gpus is None:
        return None
    try:
        return [int(g) for g in gpus.split(",") if g.strip()]
    except ValueError:
        raise SpecError(f"--gpus {gpus!r}: use GPU ids separated by commas, e.g. --gpus 0,1") from None
