"""Input handling shared by the scaling-law fits: a validated table of runs (params, tokens, loss, flops).

Every loss-law fit (Approach 3, IsoFLOP, the L(C) frontier) takes ``runs`` as a pandas DataFrame, a
mapping of column name to array, or a :class:`Runs`, or the columns as keyword arrays (``params=...,
tokens=..., loss=...``). ``flops`` is optional and defaults to ``6 * params * tokens``. Problems the user can fix
(missing columns, NaN or non-positive values, too few runs) raise :class:`ladder.errors.FitError`
with a message that names the problem.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ladder.errors import FitError

REQUIRED = ("params", "tokens", "loss")
TIED_WORDS = ("true", "1", "yes", "tied")
UNTIED_WORDS = ("false", "0", "no", "untied")
SIZE_TOL = 0.05  # model sizes within 5% are one size
# The plausible range of a language model's loss in nats/token, outside which a number is taken for a mistake (a
# typo, a wrong column, another unit) and refused where a user gives one (`ladder fit`'s runs, `forecast score`):
# - at most 100: a uniform guess over a vocabulary of V tokens costs ln V (10.8 for 50K tokens, 22.2 for 2^32);
# - at least 0.001, a perplexity of 1.001: a model that puts 99.9% of its probability on every next token of
#   held-out text. The best language models score about 0.5 nats/token on code and 1.5 or more on web text.
MAX_LOSS = 100.0
MIN_LOSS = 1e-3


@dataclass
class Runs:
    """The fits' one table of runs: 1-D float arrays of equal length (validated by :func:`as_runs`).

    ``params`` is in the study's parameter convention and ``compute = 6 N D`` in it (the laws' compute);
    ``flops`` is the counted compute a budget is judged by (``6 N D`` when not given). ``labels`` name the rows
    (run ids, or the input's row labels) in messages, residuals and the runs a fit leaves out; ``seed_sigma`` is
    the pooled seed-to-seed scatter of log loss (0 without replicates), the noise floor of a loss law."""

    params: np.ndarray
    tokens: np.ndarray
    loss: np.ndarray
    labels: tuple = ()
    flops: np.ndarray | None = None
    seed_sigma: float = 0.0

    def __post_init__(self):
        self.params = np.asarray(self.params, dtype=float)
        self.tokens = np.asarray(self.tokens, dtype=float)
        self.loss = np.asarray(self.loss, dtype=float)
        self.flops = self.compute if self.flops is None else np.asarray(self.flops, dtype=float)
        self.labels = tuple(self.labels)

    def __len__(self) -> int:
        return len(self.loss)

    @property
    def n(self) -> int:
        return len(self.loss)

    @property
    def compute(self) -> np.ndarray:
        return 6.0 * self.params * self.tokens

    @property
    def ratio(self) -> np.ndarray:
        return self.tokens / self.params

    @property
    def sizes(self) -> np.ndarray:
        """A label per run for its model size (sizes within :data:`SIZE_TOL` are one)."""
        return group_labels(self.params, SIZE_TOL)

    def n_sizes(self) -> int:
        return len(np.unique(self.params))

    def subset(self, mask: np.ndarray) -> Runs:
        """The rows of a boolean mask or an index array."""
        idx = np.flatnonzero(np.asarray(mask)) if np.asarray(mask).dtype == bool else np.asarray(mask, dtype=int)
        labels = tuple(self.labels[i] for i in idx) if self.labels else ()
        return Runs(self.params[idx], self.tokens[idx], self.loss[idx], labels, self.flops[idx], self.seed_sigma)


def as_runs(
    runs=None,
    *,
    params=None,
    tokens=None,
    loss=None,
    flops=None,
    what: str = "fit",
) -> Runs:
    """Normalize and validate the inputs of a fit. ``what`` names the fit in error messages."""
    if isinstance(runs, Runs):
        return runs
    labels: tuple = ()
    if runs is not None:
        if any(v is not None for v in (params, tokens, loss, flops)):
            raise FitError(f"{what}: pass either a table of runs or params=/tokens=/loss= arrays, not both")
        columns = _columns_of(runs, what)
        missing = [c for c in REQUIRED if c not in columns]
        if missing:
            have = ", ".join(map(str, columns)) or "none"
            raise FitError(
                f"{what}: results table lacks column(s) {', '.join(missing)}; "
                f"needs params, tokens, loss (optional flops); has {have}"
            )
        params, tokens, loss = runs["params"], runs["tokens"], runs["loss"]
        flops = runs["flops"] if "flops" in columns else None
        index = getattr(runs, "index", None)
        if index is not None:
            labels = tuple(index.tolist())
    else:
        missing = [c for c, v in zip(REQUIRED, (params, tokens, loss)) if v is None]
        if missing:
            raise FitError(f"{what}: missing {', '.join(missing)}; needs params, tokens and loss")

    arrays = {"params": params, "tokens": tokens, "loss": loss}
    if flops is not None:
        arrays["flops"] = flops
    out: dict[str, np.ndarray] = {}
    for name, value in arrays.items():
        try:
            arr = np.asarray(value, dtype=float)
        except (TypeError, ValueError) as exc:
            raise FitError(f"{what}: column {name} is not numeric ({exc})") from None
        arr = np.atleast_1d(arr)
        if arr.ndim != 1:
            raise FitError(f"{what}: column {name} must be 1-D, got shape {arr.shape}")
        out[name] = arr
    lengths = {name: len(arr) for name, arr in out.items()}
    if len(set(lengths.values())) != 1:
        raise FitError(f"{what}: columns have different lengths: {lengths}")
    n = lengths["loss"]
    if n == 0:
        raise FitError(f"{what}: no runs to fit")
    if not labels:
        labels = tuple(range(n))
    for name, arr in out.items():
        bad = ~np.isfinite(arr)
        if bad.any():
            rows = _rows(labels, bad)
            raise FitError(f"{what}: column {name} has NaN or infinite values in {bad.sum()} run(s) (rows {rows})")
        bad = arr <= 0
        if bad.any():
            rows = _rows(labels, bad)
            raise FitError(f"{what}: column {name} must be positive; {bad.sum()} run(s) are not (rows {rows})")
        bad = arr < 1 if name in ("params", "tokens", "flops") else np.zeros(len(arr), dtype=bool)
        if bad.any():  # a count below one: a value in other units (billions?) or a broken row
            rows = _rows(labels, bad)
            raise FitError(
                f"{what}: column {name} counts below 1 in {bad.sum()} run(s) (rows {rows}): give plain counts"
            )
    if "flops" not in out:
        out["flops"] = 6.0 * out["params"] * out["tokens"]
    return Runs(out["params"], out["tokens"], out["loss"], labels, out["flops"])


def implausible_losses(loss: np.ndarray) -> np.ndarray:
    """Which losses lie outside [:data:`MIN_LOSS`, :data:`MAX_LOSS`] nats/token (a boolean mask)."""
    loss = np.asarray(loss, dtype=float)
    return (loss < MIN_LOSS) | (loss > MAX_LOSS)


def _columns_of(runs, what: str) -> list:
    if hasattr(runs, "columns"):
        return list(runs.columns)
    if isinstance(runs, Mapping):
        return list(runs.keys())
    raise FitError(f"{what}: runs must be a DataFrame or a mapping of columns, got {type(runs).__name__}")


def _rows(labels: tuple, bad: np.ndarray) -> str:
    idx = np.flatnonzero(bad)
    shown = ", ".join(str(labels[i]) for i in idx[:5])
    return shown + (", ..." if len(idx) > 5 else "")


def group_labels(values: np.ndarray, rtol: float) -> np.ndarray:
    """Integer labels for positive values that agree within ``rtol`` of the smallest of their group (sorted,
    chained from the smallest): 0 for the smallest group, ascending. The one grouping of the fits: compute
    levels and budgets, model sizes, tokens/param ratios."""
    logv = np.log(np.asarray(values, dtype=float))
    order = np.argsort(logv, kind="stable")
    labels = np.empty(len(logv), dtype=int)
    label, start = -1, -np.inf
    for i in order:
        if logv[i] - start > np.log1p(rtol):
            label += 1
            start = logv[i]
        labels[i] = label
    return labels


def group_budgets(flops: np.ndarray, rtol: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Cluster runs into compute budgets: runs whose FLOPs agree within ``rtol`` of the smallest run
    in the group share a budget (rounding of tokens to whole batches moves FLOPs by a little).

    Returns ``(labels, budgets)``: an int label per run (0 = smallest budget, :func:`group_labels`) and each
    budget's geometric-mean FLOPs, ascending."""
    labels = group_labels(flops, rtol)
    logc = np.log(np.asarray(flops, dtype=float))
    budgets = np.array([np.exp(logc[labels == g].mean()) for g in range(labels.max(initial=-1) + 1)])
    return labels, budgets


def resample_weights(rng: np.random.Generator, n: int, n_boot: int) -> np.ndarray:
    """Case-bootstrap multiplicities: row b counts how often each run was drawn (sums to n)."""
    return np.stack([np.bincount(rng.integers(0, n, n), minlength=n) for _ in range(n_boot)]).astype(float)


def tie_kind(v: Any) -> str:
    """How a ``tie_embeddings`` value reads: ``tied``, ``untied``, ``?`` when missing, else the (lowercased)
    text itself. Booleans, 0/1, yes/no and tied/untied all count."""
    if isinstance(v, str):
        t = v.strip().lower()
        if t in TIED_WORDS:
            return "tied"
        if t in UNTIED_WORDS:
            return "untied"
        return t
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "?"
    return "tied" if bool(v) else "untied"


def tie_flags(values: pd.Series) -> pd.Series:
    """``tie_embeddings`` as booleans (:func:`tie_kind`); ``FitError`` on a value that is neither."""

    def flag(v: Any) -> bool:
        kind = tie_kind(v)
        if kind in ("tied", "untied"):
            return kind == "tied"
        if isinstance(v, str):
            raise FitError(f"tie_embeddings: cannot read {v!r} as a boolean")
        raise FitError("tie_embeddings: missing value")

    return values.map(flag)
