"""Options and option parsing that several commands share."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ladder.errors import SpecError

if TYPE_CHECKING:
    from ladder.studies.spec import ExecutorSpec, StudySpec


def flag(name: str, help: str, default: bool = False) -> Any:
    """A boolean option as ``--name/--no-name`` (the help shows no type for it: a flag takes no value)."""
    return typer.Option(default, f"--{name}/--no-{name}", help=help)


JSON_OPT = flag("json", "Print machine-readable JSON only.")
EXECUTORS = ("slurm", "local", "debug")
EXECUTOR_HELP = "slurm | local | debug (default: the study's executor.kind)."
PARALLEL_HELP = (
    "Local CPU: runs at once, 1 to 1,000,000 (default: the study's executor.local.parallel, else one per core, as "
    "many as fit in memory and no more than the runs)."
)


def positive_number(value: float, option: str, what: str = "a positive number") -> float:
    """``value`` when it is a finite number above 0; else the one-line error naming the option."""
    if not (math.isfinite(value) and value > 0):
        raise SpecError(f"{option} {value:g}: must be {what}")
    return value


def fraction(value: float, option: str, high: float = 1.0) -> float:
    """``value`` when it lies strictly between 0 and ``high``; else the one-line error naming the option."""
    if not (math.isfinite(value) and 0 < value < high):
        raise SpecError(f"{option} {value:g}: must be a fraction between 0 and {high:g} (both excluded)")
    return value


def count(text: str, option: str, what: str = "a positive count such as 64M") -> int:
    """A human count (``64M``, ``1.5e9``) given to an option, as an int; else the one-line error."""
    from ladder.model.config import positive_count

    return int(positive_count(text, option, what, at_least_one=True))


def check_executor(kind: str | None) -> str | None:
    """An ``--executor`` value, checked before a command looks for work (a bad value is refused even when there
    is nothing to do)."""
    if kind is not None and kind not in EXECUTORS:
        raise SpecError(f"--executor {kind!r}: must be one of {', '.join(EXECUTORS)}")
    return kind


MAX_VOCAB = 2**24  # ids a tokenizer or model may have: far above any real vocabulary, refusing only absurd sizes
MAX_SEQ_LEN = 1_048_576  # the bound of a study's data.seq_len
SEED_MAX = 2**32 - 1  # a seed numpy and torch both take (a study's training.seed: studies.spec.Seed)


def check_seed(seed: int | None, option: str = "--seed", what: str = "") -> int | None:
    """A seed option within the bounds a study's training.seed has; else the one-line error naming it."""
    if seed is not None and not 0 <= seed <= SEED_MAX:
        raise SpecError(f"{option} {seed}: must be a whole number from 0 to 2^32-1{what}")
    return seed


def executor_spec(study: StudySpec, kind: str | None, overrides: dict) -> ExecutorSpec:
    """The study's executor section with the command line's options laid over it (an option left out, None,
    keeps the study's value), validated."""
    from pydantic import ValidationError

    from ladder.studies.spec import ExecutorSpec

    data = study.executor.model_dump()
    if check_executor(kind) is not None:
        data["kind"] = kind
    for section, values in overrides.items():
        for key, value in values.items():
            if isinstance(value, dict) and isinstance(data[section].get(key), dict):
                # --sbatch adds to the study's executor.slurm.additional (a key given again takes the new value)
                data[section][key] = {**data[section][key], **value}
            elif value is not None:
                data[section][key] = value
    try:
        spec = ExecutorSpec.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        loc = first["loc"]
        given = overrides.get(loc[0], {}).get(loc[1]) if len(loc) >= 2 and isinstance(loc[0], str) else None
        if given is not None:  # a command-line option's value: name the option, as the other checks do
            option = OPTION_OF_FIELD.get(str(loc[1]), "--" + str(loc[1]).replace("_", "-"))
            value = first.get("input")
            shown = f"{value:g}" if isinstance(value, float) else value
            raise SpecError(f"{option} {shown}: {first['msg'].replace('Input should be', 'must be')}") from None
        field = ".".join(str(p) for p in loc)
        raise SpecError(f"executor.{field} = {first.get('input')!r}: {first['msg']}") from None
    # an option of another executor than the one that runs (--partition under debug, --parallel under slurm) would
    # be ignored in silence: refused, naming the executor that would read it
    for section, values in overrides.items():
        given = [k for k, v in values.items() if v is not None]
        if section != spec.kind and given:
            option = OPTION_OF_FIELD.get(given[0], "--" + given[0].replace("_", "-"))
            raise SpecError(
                f"{option}: an option of the {section} executor, and this command uses the {spec.kind} executor "
                f"({'--executor' if kind else 'the study says so in executor.kind'}); give --executor {section}, "
                f"or leave {option} out"
            )
    return spec


OPTION_OF_FIELD = {"additional": "--sbatch"}  # executor fields whose option is not --field-name


def check_local_gpus(ex: ExecutorSpec, given: bool) -> None:
    """Local workers pinned to GPU ids (``--gpus`` when ``given``, else the study's executor.local.gpus) train on
    this machine: an id it lacks left torch no GPU, and the runs trained on its CPU in silence. GPUs named while
    executor.hardware is ``cpu`` are refused as `ladder plan` refuses them in a study (the runs were planned for a
    CPU: fp32, a CPU's memory and time)."""
    if ex.kind != "local" or not ex.local.gpus:
        return
    where = f"--gpus {','.join(map(str, ex.local.gpus))}" if given else f"executor.local.gpus = {ex.local.gpus}"
    if ex.hardware == "cpu":
        raise SpecError(
            f"{where}: the runs would train on GPUs, but the study's executor.hardware is 'cpu', which planned them "
            "in fp32 with a CPU's memory and speed; set executor.hardware to the GPUs' kind and plan again, or "
            "leave the GPUs out"
        )
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if max(ex.local.gpus) >= count:
        have = f"only {count} CUDA GPU(s) (0 to {count - 1})" if count else "no CUDA GPU"
        raise SpecError(
            f"{where}: this machine has {have}, and local workers train here: they would train on its CPU; name "
            "GPUs it has, use the slurm executor, or leave the GPUs out"
        )


def parse_gpus(gpus: str | None) -> list[int] | None:
    if gpus is None:
        return None
    try:
        ids = [int(g) for g in gpus.split(",") if g.strip()]
    except ValueError:
        raise SpecError(f"--gpus {gpus!r}: use GPU ids separated by commas, e.g. --gpus 0,1") from None
    twice = sorted({g for g in ids if ids.count(g) > 1})
    if twice:
        raise SpecError(
            f"--gpus {gpus!r}: GPU {', '.join(map(str, twice))} given twice; each id once (runs share a GPU with "
            "--runs-per-gpu)"
        )
    return ids


def check_device(device: str | None, *, here: bool = False) -> str | None:
    """A ``--device`` that training or evaluation can run on: cpu, cuda, cuda:N, or mps where this torch is built with
    it; else the one-line error (checked before any work is looked for, and before anything is recorded).
    ``here``: the work runs on this machine (train, eval outside SLURM), so a CUDA device must exist here too."""
    import re

    if device is None or device == "cpu":
        return device
    if device == "cuda" or re.fullmatch(r"cuda:\d+", device):
        if here:
            import torch

            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
            index = int(device.partition(":")[2] or 0)
            if index >= count:
                have = f"only {count} CUDA GPU(s) (0 to {count - 1})" if count else "no CUDA GPU"
                raise SpecError(f"--device {device!r}: this machine has {have}; use --device cpu")
        return device
    if device == "mps":
        import torch

        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_built():
            return device
        raise SpecError("--device 'mps': this torch is built without MPS (Apple GPUs); use cpu, cuda or cuda:N")
    raise SpecError(f"--device {device!r}: must be cpu, cuda, cuda:N (a GPU index, e.g. cuda:0) or mps")


def out_path(value: str | None, option: str = "--out") -> Path | None:
    """The folder an ``--out`` option names; an empty one is refused: Path('') is '.', so `--out ''` (an unset
    shell variable, say) once planned a study into the current directory itself."""
    if value is None:
        return None
    if not value.strip():
        raise SpecError(f"{option} {value!r}: an empty path; give a folder (`{option} .` for this one)")
    return Path(value)
