"""Which targets of an evaluation window repeat the window's own earlier text: the tokens a model can predict by
copying from its context.

A target (the token at position ``j + 1`` of a window, predicted from positions ``<= j``) is an **in-context
repeat** when the n-gram that ends at it (its ``n - 1`` preceding tokens and itself) already ended at an earlier
position of the same window. An induction head ([A][B] ... [A] -> [B], Olsson et al. 2022) predicts such a
token by copying; every other target is **novel**. The split needs no model: it is a property of the validation
windows, the same for every run evaluated on them.

Why the trainer reports the two losses apart: small language models learn to copy abruptly, at a step that
depends on the seed, and the copy then lowers the loss on the repeats by a large factor while the novel tokens
move smoothly with scale. On the default study's corpus (Python source) 29% of the evaluation targets are
repeats; two seeds of one 400K model ended 11% apart in total loss, 1.91 and 1.16 nats on the repeats and 2.54
and 2.50 on the novel tokens (docs/in-context.md). A law fitted across that transition forecasts badly, and the
split shows where a ladder stands.
"""

from __future__ import annotations

import numpy as np

REPEAT_NGRAM = 3
"""Tokens in the n-gram that must recur: a trigram (two tokens of context and the target) rarely recurs by chance
with a vocabulary of hundreds of tokens, and it is what one induction head needs to copy."""


def repeat_mask(windows: np.ndarray, n: int = REPEAT_NGRAM) -> np.ndarray:
    """``[B, T]`` booleans for windows of ``T + 1`` tokens (``[B, T + 1]``): whether target ``j`` (token ``j + 1``)
    is an in-context repeat. The first ``n - 2`` targets never are (their n-gram would start before the window).
    Exact (no hashing): the n-grams are sorted by (window, tokens, position), and an n-gram repeats when the one
    before it in that order is the same n-gram of the same window."""
    w = np.asarray(windows)
    if w.ndim != 2:
        raise ValueError(f"windows must be [B, T + 1], got shape {w.shape}")
    if n < 2:
        raise ValueError("an in-context repeat needs n >= 2 (a context token and the target)")
    b, width = w.shape
    out = np.zeros((b, max(0, width - 1)), dtype=bool)
    ends = width - n + 1  # n-grams per window, ending at positions n - 1 .. width - 1
    if ends <= 1:
        return out
    grams = [w[:, i : i + ends].ravel() for i in range(n)]  # the n tokens of every n-gram, first to last
    row = np.repeat(np.arange(b), ends)
    pos = np.tile(np.arange(ends), b)
    order = np.lexsort((pos, *reversed(grams), row))  # by row, then the n-gram's tokens, then position
    same = row[order][1:] == row[order][:-1]
    for g in grams:
        same &= g[order][1:] == g[order][:-1]
    repeated = np.zeros(b * ends, dtype=bool)
    repeated[order[1:][same]] = True  # every occurrence after the first of its n-gram in its window
    # the n-gram ending at position p (= its index + n - 1) has target p - 1
    out[:, n - 2 :] = repeated.reshape(b, ends)
    return out
