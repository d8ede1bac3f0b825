"""One-line messages for pydantic validation errors of a spec: the user's field path, the bad value and what is
allowed, with pydantic's union-arm tags dropped and one line per field."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ValidationError


def _field_path(loc: tuple) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += ("." if path else "") + str(part)
    return path or "(top level)"


def _model_at(model: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The pydantic model class that owns the field at ``loc`` (to list the allowed keys)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int) or not (isinstance(current, type) and issubclass(current, BaseModel)):
            continue
        field = current.model_fields.get(str(part))
        if field is None:
            return None
        current = _submodel(field.annotation)
        if current is None:
            return None
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _submodel(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _submodel(arg)
        if found is not None:
            return found
    return None


_TYPE_TAGS = {"float", "int", "bool", "str", "list", "dict", "none"}


def _clean_loc(root: type[BaseModel], loc: tuple) -> tuple:
    """Drop pydantic's union-arm tags (``constrained-float``, ``literal['auto']``, ``function-after[...]``)
    from an error location, keeping the user's field path."""
    cleaned: list = []
    current: Any = root
    for part in loc:
        if isinstance(part, int):
            cleaned.append(part)
            continue
        if isinstance(current, type) and issubclass(current, BaseModel) and part in current.model_fields:
            cleaned.append(part)
            current = _submodel(current.model_fields[part].annotation)
            continue
        if "[" in part or "-" in part or part in _TYPE_TAGS:
            continue
        cleaned.append(part)
        current = None
    return tuple(cleaned)


def _describe_error(err: dict, root: type[BaseModel]) -> str:
    loc = _clean_loc(root, tuple(err["loc"]))
    path = _field_path(loc)
    value = err.get("input")
    if err["type"] == "extra_forbidden":
        owner = _model_at(root, loc[:-1])
        allowed = ", ".join(owner.model_fields) if owner else "see `ladder studies show default`"
        return f"{path}: unknown field (allowed here: {allowed})"
    if err["type"] == "missing":
        return f"{path}: required field is missing"
    msg = err["msg"]
    msg = re.sub(r"^Value error, ", "", msg)
    msg = re.sub(r"^Input should be ", "must be ", msg)
    msg = re.sub(r"^List should have ", "must have ", msg)
    msg = re.sub(r"^String should have ", "must have ", msg)
    # pydantic's words for an integer field given 1e30: about parsing a string, which the user never wrote
    msg = re.sub(r"^Unable to parse input string as an integer, exceeded maximum size$", "far too large a number", msg)
    if err["type"] == "value_error" and isinstance(value, dict):
        # a check across sections names its fields itself: "(top level): ladder.replicates.seeds [1] ..." said less
        return f"{path}: {msg}" if loc else msg
    return f"{path} = {_short_repr(value)}: {msg}"


def _short_repr(value: object) -> str:
    """``repr(value)`` cut to a readable length: a 10 MB string or an alias-expanded YAML list (a 'billion laughs'
    file) once put a line of hundreds of megabytes on stderr."""
    import reprlib

    r = reprlib.Repr()
    r.maxstring, r.maxother, r.maxlist, r.maxtuple, r.maxdict, r.maxlevel = 80, 80, 6, 6, 6, 2
    return r.repr(value)


def pydantic_message(exc: ValidationError, root: type[BaseModel], source: str) -> str:
    # a union field (e.g. lr: number | 'auto') fails once per arm: merge them into one line per path
    by_head: dict[str, list[str]] = {}
    for err in exc.errors(include_url=False):
        text = _describe_error(err, root)
        head, _, tail = text.partition(": ")
        tails = by_head.setdefault(head, [])
        if tail not in tails:
            tails.append(tail)
    seen = [f"{head}: {', or '.join(tails)}" for head, tails in by_head.items()]
    head = "; ".join(seen[:3])
    more = f" (and {len(seen) - 3} more problems)" if len(seen) > 3 else ""
    return f"{source}: {head}{more}"
