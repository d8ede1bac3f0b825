"""In-context repeats: the targets whose n-gram already ended earlier in their window."""

from __future__ import annotations

import numpy as np
import pytest

from ladder.model.data.repeats import repeat_mask


def _loop(windows: np.ndarray, n: int) -> np.ndarray:
    """The definition, one window and one position at a time."""
    out = np.zeros((windows.shape[0], windows.shape[1] - 1), dtype=bool)
    for r, w in enumerate(windows.tolist()):
        seen = set()
        for p in range(n - 1, len(w)):
            gram = tuple(w[p - n + 1 : p + 1])
            out[r, p - 1] = gram in seen
            seen.add(gram)
    return out


def test_a_hand_made_window():
    # tokens:    7  1  2  3  9  1  2  3  1  2  4
    # targets:      0  1  2  3  4  5  6  7  8  9   (target j is token j + 1)
    w = np.array([[7, 1, 2, 3, 9, 1, 2, 3, 1, 2, 4]])
    # the trigram (1, 2, 3) ends again at token 7 (target 6); (2, 3, 1) and (1, 2, 4) are new
    assert repeat_mask(w).nonzero()[1].tolist() == [6]
    # bigrams: (1, 2) again at tokens 6 and 9, (2, 3) again at token 7
    assert repeat_mask(w, n=2).nonzero()[1].tolist() == [5, 6, 8]


@pytest.mark.parametrize("n", [2, 3, 4])
def test_agrees_with_the_definition_on_random_windows(n):
    rng = np.random.default_rng(n)
    w = rng.integers(0, 5, size=(40, 33))  # a small vocabulary: many repeats
    got = repeat_mask(w, n=n)
    assert got.shape == (40, 32) and got.any() and not got.all()
    np.testing.assert_array_equal(got, _loop(w, n))


def test_windows_are_independent_and_large_token_ids_are_exact():
    big = 2**40  # no hashing or packing of the ids
    a = np.array([[big, big + 1, big + 2, big, big + 1, big + 2]])
    b = np.array([[big, big + 1, big + 2, 6, 7, 8]])  # a's trigram once: not a repeat in this window
    both = repeat_mask(np.concatenate([a, b]))
    np.testing.assert_array_equal(both[0], repeat_mask(a)[0])
    assert both[0].tolist() == [False, False, False, False, True] and not both[1].any()


def test_short_windows_and_bad_input():
    assert repeat_mask(np.array([[1, 2]])).tolist() == [[False]]  # no trigram fits
    assert repeat_mask(np.zeros((0, 9), dtype=int)).shape == (0, 8)
    with pytest.raises(ValueError, match="n >= 2"):
        repeat_mask(np.zeros((1, 5), dtype=int), n=1)
    with pytest.raises(ValueError, match=r"\[B, T \+ 1\]"):
        repeat_mask(np.zeros(5, dtype=int))
