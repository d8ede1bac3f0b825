"""Output helpers shared by the CLI commands: one rich console for humans, plain JSON for machines."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from rich.console import Console

from ladder.layout import jsonable

# The width of a pipe or a CI log (rich would otherwise assume 80): tables fit it, wrapping their cells; a line of
# text is not broken there (soft wrap), so that a log keeps each message on one line for grep.
LOG_WIDTH = 120
out = Console(width=None if sys.stdout.isatty() else LOG_WIDTH, soft_wrap=not sys.stdout.isatty(), highlight=False)
err = Console(
    stderr=True, width=None if sys.stderr.isatty() else LOG_WIDTH, soft_wrap=not sys.stderr.isatty(), highlight=False
)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(jsonable(obj), indent=2, default=str) + "\n")
    sys.stdout.flush()


def human_seconds(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    seconds = float(seconds)
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.1f}m"
    if seconds < 86400 * 2:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def sci(x: float | None, digits: int = 3) -> str:
    """Compute and other wide-ranging numbers as the report writes them: ``2.63e13``, not ``2.63e+13``."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    if x == 0:
        return "0"
    mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def share_of_hero(pct: float) -> tuple[str, str]:
    """The ladder's cost next to the hero's compute, as plan, fit and the report all say it: a percent up to 100%
    (``("26.3%", "of the hero's compute")``, a small one in two digits, never "0.0%"), a multiple above it
    (``("38.6x", "the hero's compute")``, never "3861.5%"). ``pct`` is finite."""
    if pct > 100:
        return f"{pct / 100:.3g}x", "the hero's compute"
    if pct >= 1:
        return f"{pct:.1f}%", "of the hero's compute"
    small = f"{pct:.1e}" if 0 < pct < 1e-3 else f"{pct:.2g}"
    return f"{small}%", "of the hero's compute"
