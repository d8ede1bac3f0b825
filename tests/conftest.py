"""Shared test fixtures. Tests never touch the Hugging Face hub, nor the user's ~/.cache/ladder."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before anything imports huggingface_hub
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

_WORDS = (
    "the a ladder model trains small runs and fits laws of scale over tokens with care def return import "
    "class self value data loss step café naïve über 東京 数据 🎉 résumé"
).split()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist with ``--dist loadgroup`` (what scripts/test.sh runs): the orchestration tests at the top
    of tests/ run one after another on one worker, since each starts local workers of its own that fill the
    cores, and several share the one SLURM node; the tests of the package's rooms (tests/model, tests/reports,
    tests/studies) spread over the workers."""
    for item in items:
        if item.path.parent == Path(__file__).parent:
            item.add_marker(pytest.mark.xdist_group("orchestration"))


@pytest.fixture(autouse=True)
def _ladder_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$LADDER_CACHE`` points at one temporary folder for the whole session (never ~/.cache/ladder)."""
    root = tmp_path_factory.getbasetemp() / "ladder-cache"
    monkeypatch.setenv("LADDER_CACHE", str(root))
    return root


def make_texts(n: int, seed: int = 0, words: int = 60) -> list[str]:
    """``n`` small deterministic documents (with accents, CJK, emoji, tabs, runs of spaces, newlines)."""
    rng = random.Random(seed)
    seps = [" ", " ", " ", "  ", "\t", "\n", ", "]
    out = []
    for i in range(n):
        parts = []
        for _ in range(rng.randint(words // 2, words)):
            parts.append(rng.choice(_WORDS))
            parts.append(rng.choice(seps))
        out.append(f"doc {i}: " + "".join(parts) + "\n")
    return out


@pytest.fixture(scope="session")
def tiny_texts() -> list[str]:
    return make_texts(300)


@pytest.fixture(scope="session")
def tiny_jsonl_corpus(tmp_path_factory: pytest.TempPathFactory, tiny_texts: list[str]) -> Path:
    """A folder of 3 jsonl files (one gzipped) holding ``tiny_texts``, 100 documents each."""
    import gzip

    folder = tmp_path_factory.mktemp("jsonl_corpus")
    for k in range(3):
        part = tiny_texts[k * 100 : (k + 1) * 100]
        lines = "".join(json.dumps({"text": t, "n": i}) + "\n" for i, t in enumerate(part))
        if k == 2:
            with gzip.open(folder / f"part{k}.jsonl.gz", "wt", encoding="utf-8") as f:
                f.write(lines)
        else:
            (folder / f"part{k}.jsonl").write_text(lines, encoding="utf-8")
    return folder


@pytest.fixture(scope="session")
def tiny_tokenizer(tmp_path_factory: pytest.TempPathFactory, tiny_texts: list[str]) -> Path:
    """A byte-level BPE (ladder.model.data.tokenizer) with 300 ids trained on ``tiny_texts``; the folder."""
    from ladder.model.data.tokenizer import train_tokenizer

    return train_tokenizer(tiny_texts, 300, tmp_path_factory.mktemp("tok") / "tokenizer")
