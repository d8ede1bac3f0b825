from __future__ import annotations

import contextlib
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from ladder.errors import DataError
from ladder.model.config import DataConfig
from ladder.model.data.corpus import is_validation, resolve_corpus
from ladder.model.data.prepare import data_key, prepare_data
from ladder.model.data.prepared import PreparedData, validation_windows_needed
from ladder.model.data.tokenizer import file_sha256, load_tokenizer
from ladder.model.data.windows import TokenWindows, token_files, window_order
from tests.conftest import make_texts

SEQ = 16


def _cfg(corpus, **kw) -> DataConfig:
    kw.setdefault("seq_len", SEQ)
    kw.setdefault("validation_fraction", 0.2)
    kw.setdefault("validation_tokens", 4 * SEQ)
    return DataConfig(corpus=str(corpus), **kw)


def _docs_of(folder: Path, dtype: str, eos: int) -> list[list[int]]:
    docs = []
    for f in token_files(folder):
        tokens = np.fromfile(f, dtype=dtype)
        assert tokens[-1] == eos
        cuts = np.flatnonzero(tokens == eos)
        start = 0
        for end in cuts:
            docs.append(tokens[start:end].tolist())
            start = end + 1
    return docs


def _snapshot(root: Path) -> dict[str, bytes]:
    files = [p for sub in ("train", "validation") for p in token_files(root / sub)]
    return {f"{p.parent.name}/{p.name}": p.read_bytes() for p in files}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, tiny_jsonl_corpus) -> PreparedData:
    cache = tmp_path_factory.mktemp("cache")
    return prepare_data(_cfg(tiny_jsonl_corpus), 300, cache_root=cache, workers=1, progress=False)


def test_prepare_jsonl_tokens_are_exactly_the_documents(prepared, tiny_texts):
    p = prepared
    assert p.token_dtype == "uint16" and p.vocab_size <= 300 and (p.eos_id, p.pad_id) == (0, 1)
    assert p.tokenizer_file == p.tokenizer_dir / "tokenizer.json" and p.tokenizer_file.is_file()
    assert (p.root / "ready.json").is_file() and p.root.name == p.key
    tok = load_tokenizer(p.tokenizer_dir)
    for split, folder, total in (("train", p.train_dir, p.train_tokens), ("validation", p.val_dir, p.val_tokens)):
        texts = [t for t in tiny_texts if is_validation(t, 0.2) == (split == "validation")]
        expected = sum(len(tok.encode(t).ids) + 1 for t in texts)  # + EOS after each document
        assert total == expected > 0, split
        docs = _docs_of(folder, p.token_dtype, p.eos_id)
        assert sorted(tok.decode(d, skip_special_tokens=False) for d in docs) == sorted(texts)
    assert len(token_files(p.train_dir)) == 3  # one datatrove task per input file


def test_second_call_reuses_the_cache(prepared, tiny_jsonl_corpus):
    ready = prepared.root / "ready.json"
    before = {p: p.stat().st_mtime_ns for p in [ready, *token_files(prepared.train_dir)]}
    t = time.perf_counter()
    cache = prepared.root.parent.parent
    again = prepare_data(_cfg(tiny_jsonl_corpus), 300, cache_root=cache, workers=1, progress=False)
    assert time.perf_counter() - t < 2.0
    assert again == prepared
    assert {p: p.stat().st_mtime_ns for p in before} == before
    # seq_len and validation_tokens do not enter the key: other runs share the data
    other = prepare_data(_cfg(tiny_jsonl_corpus, seq_len=8, validation_tokens=16), 300,
                         cache_root=prepared.root.parent.parent, progress=False)  # fmt: skip
    assert other.key == prepared.key
    # a different split rule or tokenizer is different data
    source = resolve_corpus(str(tiny_jsonl_corpus))
    sha = file_sha256(prepared.tokenizer_file)
    assert data_key(source, sha, 0.2) == prepared.key
    assert len({data_key(source, sha, 0.25), data_key(source, "0" * 64, 0.2), prepared.key}) == 3


def test_prepare_text_folder_with_given_tokenizer_and_two_workers(tmp_path, tiny_texts, tiny_tokenizer):
    corpus = tmp_path / "txt"
    corpus.mkdir()
    texts = tiny_texts[:6]
    for i, t in enumerate(texts):
        (corpus / f"{i:03d}.txt").write_text(t, encoding="utf-8")
    cfg = _cfg(corpus, tokenizer=str(tiny_tokenizer / "tokenizer.json"))
    p = prepare_data(cfg, 512, cache_root=tmp_path / "cache", workers=2, progress=False)
    assert (p.tokenizer_dir / "tokenizer.json").read_bytes() == (tiny_tokenizer / "tokenizer.json").read_bytes()
    tok = load_tokenizer(p.tokenizer_dir)
    train = [t for t in texts if not is_validation(t, 0.2)]
    assert p.train_tokens == sum(len(tok.encode(t).ids) + 1 for t in train)
    assert len(token_files(p.train_dir)) == len(train)  # one task per file; no output for a val-only file
    # a bare tokenizer.json gets the transformers files (what AutoTokenizer needs: see test_tokenizer)
    config = json.loads((p.tokenizer_dir / "tokenizer_config.json").read_text())
    assert config["eos_token"] == "<|endoftext|>" and config["pad_token"] == "<|pad|>"


KILL_SCRIPT = """
import os, signal, sys
from pathlib import Path
import datatrove.pipeline.tokens.tokenizer as tk

original = tk.DocumentTokenizer.write_unshuffled

def dying(self, data, filename):
    if filename.startswith("00002"):  # the third task dies (SIGKILL) while reading its documents
        def docs(source=data):
            for i, doc in enumerate(source):
                if i == 5:
                    os.kill(os.getpid(), signal.SIGKILL)
                yield doc
        data = docs()
    return original(self, data, filename)

tk.DocumentTokenizer.write_unshuffled = dying
from ladder.model.config import DataConfig
from ladder.model.data.prepare import prepare_data
cfg = DataConfig(corpus=sys.argv[1], tokenizer=sys.argv[2], seq_len=16, validation_fraction=0.2, validation_tokens=64)
prepare_data(cfg, 300, cache_root=Path(sys.argv[3]), workers=1, progress=False)
"""


def _four_file_corpus(folder: Path) -> Path:
    folder.mkdir()
    texts = make_texts(160, seed=5)
    for k in range(4):
        part = texts[k * 40 : (k + 1) * 40]
        (folder / f"p{k}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in part))
    return folder


def test_killed_preparation_resumes(tmp_path, tiny_tokenizer):
    corpus = _four_file_corpus(tmp_path / "corpus")
    cache = tmp_path / "cache"
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    log = tmp_path / "killed.log"
    with open(log, "w") as f:
        # its own session: datatrove's manager process outlives the SIGKILL; the group is ended below
        proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(corpus), str(tiny_tokenizer), str(cache)],
                                env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        try:
            rc = proc.wait(timeout=120)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    assert rc == -9, log.read_text()[-2000:]
    (root,) = [p for p in (cache / "data").iterdir() if p.is_dir()]
    assert not (root / "ready.json").exists()
    assert sorted(os.listdir(root / "logs" / "train" / "completions")) == ["00000", "00001"]
    assert (root / "train" / "00002_unshuffled.ds").exists()  # the dead task's partial output
    done_before = {p: p.stat().st_mtime_ns for p in token_files(root / "train")}

    cfg = _cfg(corpus, tokenizer=str(tiny_tokenizer))
    resumed = prepare_data(cfg, 300, cache_root=cache, workers=1, progress=False)
    fresh = prepare_data(cfg, 300, cache_root=tmp_path / "fresh", workers=1, progress=False)
    assert resumed.root == root and resumed.key == fresh.key
    assert (resumed.train_tokens, resumed.val_tokens) == (fresh.train_tokens, fresh.val_tokens)
    assert _snapshot(resumed.root) == _snapshot(fresh.root)
    assert not list((root / "train").glob("*unshuffled*"))
    assert all(p.stat().st_mtime_ns == t for p, t in done_before.items())  # finished tasks were not redone


def test_lost_shard_is_redone_alone(tmp_path, tiny_tokenizer):
    corpus = _four_file_corpus(tmp_path / "corpus")
    cfg = _cfg(corpus, tokenizer=str(tiny_tokenizer))
    p = prepare_data(cfg, 300, cache_root=tmp_path / "cache", workers=1, progress=False)
    snap = _snapshot(p.root)
    (p.root / "ready.json").unlink()
    (p.root / "logs" / "train" / "completions" / "00001").unlink()
    for f in (p.root / "train").glob("00001_*"):
        f.unlink()
    others = {f: f.stat().st_mtime_ns for f in token_files(p.train_dir)}
    again = prepare_data(cfg, 300, cache_root=tmp_path / "cache", workers=1, progress=False)
    assert again == p and _snapshot(p.root) == snap
    assert {f: f.stat().st_mtime_ns for f in others} == others


def test_concurrent_preparations_share_one_result(tmp_path, tiny_jsonl_corpus):
    results: list = []
    errors: list = []

    def go():
        try:
            results.append(prepare_data(_cfg(tiny_jsonl_corpus), 300, cache_root=tmp_path, workers=1, progress=False))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=go) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and len(results) == 2 and results[0] == results[1]
    assert len([d for d in (tmp_path / "data").iterdir() if d.is_dir()]) == 1
    assert len([d for d in (tmp_path / "tokenizers").iterdir() if d.is_dir()]) == 1


def test_data_errors(tmp_path, tiny_jsonl_corpus, tiny_tokenizer, prepared):
    vocab = load_tokenizer(tiny_tokenizer).get_vocab_size()
    with pytest.raises(DataError, match=f"has {vocab:,} ids but the model's vocab_size is {vocab - 1}"):
        prepare_data(_cfg(tiny_jsonl_corpus, tokenizer=str(tiny_tokenizer)), vocab - 1, cache_root=tmp_path)
    with pytest.raises(DataError, match="does not exist"):
        prepare_data(_cfg(tmp_path / "missing"), 300, cache_root=tmp_path)
    wrong_key = tmp_path / "wrong"
    wrong_key.mkdir()
    (wrong_key / "a.jsonl").write_text('{"content": "hello there"}\n' * 5)
    with pytest.raises(DataError, match="text_key"):
        prepare_data(_cfg(wrong_key), 300, cache_root=tmp_path, progress=False)
    with pytest.raises(DataError, match="text_key"):
        prepare_data(_cfg(wrong_key, tokenizer=str(tiny_tokenizer)), 300, cache_root=tmp_path, progress=False)
    with pytest.raises(DataError, match="validation split has .* fewer than the validation_tokens"):
        prepare_data(_cfg(tiny_jsonl_corpus, validation_tokens=10**7), 300,
                     cache_root=prepared.root.parent.parent, progress=False)  # fmt: skip
    with pytest.raises(DataError, match="neither a local tokenizer"):
        prepare_data(_cfg(tiny_jsonl_corpus, tokenizer="no-such-org/no-such-tokenizer"), 300, cache_root=tmp_path)


def test_token_windows(prepared):
    w = prepared.train_windows(SEQ)
    files = token_files(prepared.train_dir)
    sizes = [np.fromfile(f, dtype=prepared.token_dtype).size for f in files]
    assert len(w) == sum(s // (SEQ + 1) for s in sizes) > 0
    x = w[0]
    assert x.dtype == np.int64 and x.shape == (SEQ + 1,)
    first = np.fromfile(files[0], dtype=prepared.token_dtype)
    np.testing.assert_array_equal(w[1], first[SEQ + 1 : 2 * (SEQ + 1)])
    # window k of file 1 starts right after file 0's windows: no straddling
    n0 = sizes[0] // (SEQ + 1)
    second = np.fromfile(files[1], dtype=prepared.token_dtype)
    np.testing.assert_array_equal(w[n0], second[: SEQ + 1])
    np.testing.assert_array_equal(w[-1], w[len(w) - 1])
    b = w.batch([3, 0, n0])
    assert b.shape == (3, SEQ + 1) and b.dtype == np.int64
    np.testing.assert_array_equal(b[1], w[0])
    assert isinstance(w._map(0), np.memmap)
    with pytest.raises(IndexError):
        w[len(w)]
    clone = pickle.loads(pickle.dumps(w))
    np.testing.assert_array_equal(clone[5], w[5])
    assert int(w.batch(range(len(w))).max()) < prepared.vocab_size


def test_validation_windows_are_fixed_and_spread_over_the_split(prepared):
    v = prepared.val_windows(SEQ, 3 * SEQ + 1)
    assert len(v) == validation_windows_needed(SEQ, 3 * SEQ + 1) == 4
    full = TokenWindows(prepared.val_dir, SEQ, dtype=prepared.token_dtype)
    assert len(full) > 4
    picked = [i * len(full) // 4 for i in range(4)]  # evenly spaced, the first window included
    np.testing.assert_array_equal(v.batch(range(4)), full.batch(picked))
    np.testing.assert_array_equal(prepared.val_windows(SEQ, 3 * SEQ + 1).batch(range(4)), v.batch(range(4)))
    with pytest.raises(IndexError):
        v[4]


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 100, 1000, 4097])
def test_window_order_is_a_permutation(n):
    order = window_order(n, seed=3)
    first = [order(i) for i in range(n)]
    assert sorted(first) == list(range(n))
    second = [order(n + i) for i in range(n)]
    assert sorted(second) == list(range(n))
    assert [window_order(n, seed=3)(i) for i in range(n)] == first  # deterministic
    if n >= 64:
        assert first != list(range(n)) and second != first
        assert [window_order(n, seed=4)(i) for i in range(n)] != first


def test_window_order_rejects_bad_input():
    with pytest.raises(ValueError):
        window_order(0, seed=0)
    with pytest.raises(ValueError):
        window_order(5, seed=0)(-1)


@pytest.mark.slow
def test_embedded_corpus_prepares_end_to_end(tmp_path):
    cfg = DataConfig(max_bytes=1_500_000, seq_len=128, validation_tokens=2048)
    p = prepare_data(cfg, 512, cache_root=tmp_path, workers=2, progress=True)
    assert p.train_tokens > 300_000 and p.val_tokens >= 2048 and p.vocab_size == 512
    assert len(p.train_windows(128)) > 1000
    shutil.rmtree(tmp_path / "data")
    assert prepare_data(cfg, 512, cache_root=tmp_path, workers=1, progress=False).key == p.key


@pytest.mark.parametrize(
    "name,content,words",
    [
        ("num.jsonl", '{"text": "hello there"}\n{"text": 5}\n', "num.jsonl, line 2: its 'text' is 5, not text (int)"),
        ("list.jsonl", '{"text": "hello there"}\n[1, 2]\n', "list.jsonl, line 2: [1, 2] is a JSON list, not an object"),
        ("texts.jsonl", '{"text": ["a", "b"]}\n', "texts.jsonl, line 1: its 'text' is ['a', 'b'], not text (list)"),
        ("int.parquet", None, "int.parquet, row 1: its 'text' is 1, not text (int)"),
    ],
)
def test_a_corpus_record_that_is_not_text_is_one_error(tmp_path, tiny_tokenizer, capfd, name, content, words):
    """Issue 28: `ladder data prepare` on a jsonl whose text is a number, or whose line is a JSON list, ended in a
    datatrove TypeError/AttributeError traceback; a parquet text column of numbers too. Now a DataError names
    the file, the record and the field, whether the tokenizer is trained (read in this process) or given (read
    by a datatrove task, which logs no traceback on the console)."""
    import pandas as pd

    folder = tmp_path / "corpus"
    folder.mkdir()
    if content is None:
        pd.DataFrame({"text": [1, 2, 3]}).to_parquet(folder / name)
    else:
        (folder / name).write_text(content)
    for tokenizer in ("train", str(tiny_tokenizer)):
        with pytest.raises(DataError) as err:
            prepare_data(_cfg(folder / name, tokenizer=tokenizer), 300, cache_root=tmp_path / "cache", workers=1)
        assert words in str(err.value) and str(folder / name) in str(err.value)
        assert "Traceback" not in capfd.readouterr().err


def test_a_corpus_with_no_validation_document_says_so(tmp_path):
    """Issue 28: a corpus of one short document prepared 6 train and 0 validation tokens, then said "no token
    shards (*.ds) in .../validation", which names no cause and no way out."""
    (tmp_path / "one.jsonl").write_text('{"text": "hello there, a lone document"}\n')
    with pytest.raises(DataError, match="no document of the corpus fell in the validation split .* too small"):
        prepare_data(_cfg(tmp_path / "one.jsonl"), 300, cache_root=tmp_path / "cache", workers=1, progress=False)


def test_an_hf_corpus_prepared_where_the_hub_was_reachable_serves_runs_offline(
    prepared, tiny_jsonl_corpus, tmp_path, monkeypatch
):
    """A cluster's compute nodes often run with HF_HUB_OFFLINE=1. Every run of an ``hf:`` study failed there with
    "needs the Hugging Face hub", although its login node had prepared the data into the shared cache: the corpus
    was refused before the cache was looked at. Only reading the corpus needs the hub, and plan says so first."""
    from ladder.model.data.prepare import is_prepared, trained_tokenizer_dir
    from ladder.plan.plausibility import hub_warning
    from ladder.studies import load_study
    from tests.micro import write_study

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache = tmp_path / "cache"
    monkeypatch.setenv("LADDER_CACHE", str(cache))
    cfg = _cfg("hf:someone/corpus")
    study = load_study(write_study(tmp_path / "s.yaml", "hf:someone/corpus", sizes=("100K", "200K", "400K", "800K")))
    study = study.model_copy(update={"data": cfg, "model": study.model.model_copy(update={"vocab_size": 300})})
    with pytest.raises(DataError, match=r"streamed from the Hugging Face hub.*ladder data prepare STUDY"):
        prepare_data(cfg, 300, cache_root=cache, workers=1, progress=False)
    assert not is_prepared(cfg, 300, cache_root=cache)
    assert "the runs would fail at data preparation" in " ".join(hub_warning(study))
    # what a preparation where the hub is reachable leaves behind: the tokenizer trained on the corpus and the
    # shards tokenized with it (here those of the same texts from a local copy)
    source = resolve_corpus(cfg.corpus, cfg.text_key)
    tok_dir = trained_tokenizer_dir(cfg, 300, source, cache)
    local_tok = next(d for d in (prepared.root.parent.parent / "tokenizers").glob("bpe-300-*") if d.is_dir())
    shutil.copytree(local_tok, tok_dir)
    key = data_key(source, file_sha256(tok_dir / "tokenizer.json"), cfg.validation_fraction)
    shutil.copytree(prepared.root, cache / "data" / key)
    assert is_prepared(cfg, 300, cache_root=cache) and hub_warning(study) == []
    offline = prepare_data(cfg, 300, cache_root=cache, workers=1, progress=False)
    assert offline.train_tokens == prepared.train_tokens and offline.root == cache / "data" / key
