"""Reading prepared token shards: memory-mapped windows and the order a run reads them in.

``TokenWindows(folder, seq_len)`` memory-maps every ``.ds`` file of a folder and cuts each file into
non-overlapping windows of ``seq_len + 1`` tokens (stepping by ``seq_len + 1``: inputs are ``w[:-1]``, labels
``w[1:]``; windows never straddle two files; a file's tail shorter than a window is dropped).
``window_order(n, seed)`` gives an O(1)-memory pseudo-random permutation of the windows.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ladder.errors import DataError


def token_files(folder: Path) -> list[Path]:
    """The finished ``.ds`` shards of a folder, sorted by name (datatrove's leftovers of a killed task,
    ``*_unshuffled.ds``, excluded)."""
    return sorted(p for p in Path(folder).glob("*.ds") if "unshuffled" not in p.name and p.is_file())


class TokenWindows:
    """Non-overlapping windows of ``seq_len + 1`` tokens over the ``.ds`` shards of a folder, memory-mapped.

    Window ``i`` is ``tokens[k * (seq_len + 1) : (k + 1) * (seq_len + 1)]`` of one shard (shards in name order,
    windows within a shard in order; no window straddles two shards; a shard's tail shorter than a window is
    dropped). The model reads ``w[:-1]`` and predicts ``w[1:]``. ``limit`` keeps only the first windows, or with
    ``spread=True`` that many windows evenly spaced over the whole folder (a sample of every shard, hence of many
    more documents than a prefix).
    Picklable (the maps are reopened lazily), so it can go to DataLoader workers.
    """

    def __init__(
        self, folder: Path, seq_len: int, dtype: str = "uint16", limit: int | None = None, spread: bool = False
    ):
        if seq_len < 1:
            raise ValueError("seq_len must be >= 1")
        self.folder = Path(folder)
        self.seq_len = seq_len
        self.window = seq_len + 1
        self.dtype = np.dtype(dtype)
        self.files = token_files(self.folder)
        if not self.files:
            raise DataError(f"no token shards (*.ds) in {self.folder}")
        counts = [p.stat().st_size // self.dtype.itemsize // self.window for p in self.files]
        self._starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        total = int(self._starts[-1])
        self._len = total if limit is None else min(total, int(limit))
        self._total = total
        self._spread = spread and self._len < total
        self._maps: list[np.memmap | None] = [None] * len(self.files)

    def __len__(self) -> int:
        return self._len

    @property
    def tokens(self) -> int:
        """Tokens covered by the windows (each window counted with its seq_len + 1 tokens)."""
        return self._len * self.window

    def _map(self, f: int) -> np.ndarray:
        m = self._maps[f]
        if m is None:
            m = np.memmap(self.files[f], dtype=self.dtype, mode="r")
            self._maps[f] = m
        return m

    def __getitem__(self, i: int) -> np.ndarray:
        i = int(i)
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError(f"window {i} out of range (0..{self._len - 1})")
        if self._spread:
            i = i * self._total // self._len
        f = bisect.bisect_right(self._starts, i) - 1
        k = i - int(self._starts[f])
        return np.asarray(self._map(f)[k * self.window : (k + 1) * self.window], dtype=np.int64)

    def batch(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """Windows ``indices`` stacked: int64 array of shape (len(indices), seq_len + 1)."""
        out = np.empty((len(indices), self.window), dtype=np.int64)
        for row, i in enumerate(indices):
            out[row] = self[int(i)]
        return out

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_maps"] = [None] * len(self.files)
        return state

    def __repr__(self) -> str:
        return f"TokenWindows({str(self.folder)!r}, seq_len={self.seq_len}, windows={self._len})"


# ----------------------------------------------------------------------------------------- window order

_MASK64 = (1 << 64) - 1


def _mix64(x: int) -> int:
    """splitmix64's finalizer: a good 64-bit integer hash."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def window_order(n_windows: int, seed: int = 0, rounds: int = 6) -> Callable[[int], int]:
    """A deterministic pseudo-random permutation of ``range(n_windows)`` in O(1) memory.

    Returns ``order`` with ``order(i)`` the window to read for global sequence number ``i``: for
    ``0 <= i < n_windows`` a permutation (a balanced Feistel network over the next even power of two, with
    cycle walking back into range); for ``i >= n_windows``, epoch ``e = i // n_windows`` is read in its own
    permutation (the same network keyed by ``(seed, e)``), so ``order(i)`` for every ``i`` in one epoch
    visits each window exactly once. A trainer then resumes exactly from its step number alone. Callers that
    want the same order every epoch pass ``i % n_windows``.
    """
    if n_windows < 1:
        raise ValueError("window_order needs at least one window")
    n = int(n_windows)
    half_bits = max(1, math.ceil(math.log2(n) / 2)) if n > 1 else 1
    half_mask = (1 << half_bits) - 1
    base = _mix64(int(seed) & _MASK64)

    def permute(x: int, epoch: int) -> int:
        keys = [_mix64(base ^ _mix64((epoch << 8) + r)) for r in range(rounds)]
        while True:  # cycle walking: at most a few steps, since the domain is < 4 n
            left, right = x >> half_bits, x & half_mask
            for k in keys:
                left, right = right, left ^ (_mix64(right ^ k) & half_mask)
            x = (left << half_bits) | right
            if x < n:
                return x

    if n == 1:
        return lambda i: 0

    def order(i: int) -> int:
        i = int(i)
        if i < 0:
            raise ValueError("sequence numbers start at 0")
        epoch, j = divmod(i, n)
        return permute(j, epoch)

    return order
