"""Every string in a report section's blocks, joined: what a test of the render's words searches."""

from __future__ import annotations

import dataclasses


def texts(obj) -> str:
    """Every string in ``obj`` (a section, a block, a list of them), joined by spaces."""
    if isinstance(obj, str):
        return obj
    if dataclasses.is_dataclass(obj):
        return " ".join(texts(getattr(obj, f.name)) for f in dataclasses.fields(obj))
    if isinstance(obj, (list, tuple)):
        return " ".join(texts(x) for x in obj)
    return ""
