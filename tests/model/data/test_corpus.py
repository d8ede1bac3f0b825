from __future__ import annotations

import gzip
import json
import time

import pytest

from ladder.errors import DataError
from ladder.model.data.corpus import is_validation, iter_corpus_texts, resolve_corpus
from ladder.model.data.embedded import EMBEDDED_MIN_FILE_BYTES, build_embedded_corpus


def _shard_docs(folder):
    docs = []
    for shard in sorted(folder.glob("*.jsonl.gz")):
        with gzip.open(shard, "rt", encoding="utf-8") as f:
            docs += [json.loads(line) for line in f]
    return docs


def test_embedded_corpus_is_deterministic_and_cached(tmp_path):
    a, ma = build_embedded_corpus(300_000, cache_root=tmp_path / "a")
    b, mb = build_embedded_corpus(300_000, cache_root=tmp_path / "b")
    for key in ("documents", "bytes", "sha256", "shards", "skipped", "rules"):
        assert ma[key] == mb[key], key
    assert ma["bytes"] >= 300_000 and ma["documents"] > 0 and ma["skipped"]["tiny"] > 0
    da, db = _shard_docs(a), _shard_docs(b)
    assert da == db and len(da) == ma["documents"]
    assert len({d["id"] for d in da}) == len(da) and da[0]["id"].startswith(("stdlib/", "site-packages"))
    assert all(len(d["text"].encode()) >= EMBEDDED_MIN_FILE_BYTES for d in da)
    # cached: a second call finds the manifest
    t = time.perf_counter()
    again, m2 = build_embedded_corpus(300_000, cache_root=tmp_path / "a")
    assert again == a and m2 == ma and time.perf_counter() - t < 5
    # the corpus reads through datatrove by name
    source = resolve_corpus("embedded", max_bytes=300_000, cache_root=tmp_path / "a")
    assert source.identity["sha256"] == ma["sha256"] and source.kind == "jsonl"
    assert sum(1 for _ in source.iter_texts()) == ma["documents"]


def test_embedded_rules_on_a_fake_tree(tmp_path):
    root = tmp_path / "lib"
    (root / "pkg").mkdir(parents=True)
    (root / "site-packages").mkdir()
    body = "x = 1\n" * 200  # 1200 bytes
    (root / "a.py").write_text("# a\n" + body)
    (root / "b_dup.py").write_text("# a\n" + body)  # same content as a.py: dropped
    (root / "c_tiny.py").write_text("y = 2\n")  # tiny: skipped
    (root / "d_latin1.py").write_bytes(b"# \xe9\xe9\n" + body.encode())  # not UTF-8: skipped
    (root / "pkg" / "e.py").write_text("# e\n" + body)
    (root / "pkg" / "notes.txt").write_text(body)  # not .py
    (root / "site-packages" / "f.py").write_text("# f\n" + body)  # nested site-packages: not stdlib
    (root / "z.py").write_text("# z\n" + body)  # beyond the budget
    (root / "__editable___pkg_finder.py").write_text(f"MAPPING = {{'pkg': '{tmp_path}'}}\n" + body)  # names a path
    folder, m = build_embedded_corpus(2000, cache_root=tmp_path / "cache", roots=[("stdlib", root)])
    ids = sorted(d["id"] for d in _shard_docs(folder))
    assert ids == ["stdlib/a.py", "stdlib/pkg/e.py"]
    assert m["skipped"] == {"tiny": 1, "huge": 0, "non_utf8": 1, "duplicate": 1, "unreadable": 0}
    assert m["documents"] == 2 and m["bytes"] == 2 * len("# a\n" + body)
    with pytest.raises(DataError, match="embedded corpus is empty"):
        build_embedded_corpus(2000, cache_root=tmp_path / "cache2", roots=[("stdlib", root / "pkg" / "none")])


def test_split_is_by_document_disjoint_and_deterministic(tiny_jsonl_corpus, tiny_texts):
    source = resolve_corpus(str(tiny_jsonl_corpus))
    assert source.kind == "jsonl" and source.files == ("part0.jsonl", "part1.jsonl", "part2.jsonl.gz")
    train = list(source.iter_texts("train", 0.2))
    val = list(source.iter_texts("validation", 0.2))
    assert set(train).isdisjoint(val) and sorted(train + val) == sorted(tiny_texts)
    assert 0.1 < len(val) / len(tiny_texts) < 0.3
    assert val == [t for t in tiny_texts if is_validation(t, 0.2)]
    assert list(source.iter_texts()) == tiny_texts  # sorted file order, line order


def test_local_formats(tmp_path, tiny_texts):
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = tiny_texts[:30]
    pq.write_table(pa.table({"content": texts}), tmp_path / "c.parquet")
    assert list(iter_corpus_texts(str(tmp_path / "c.parquet"), text_key="content")) == texts

    (tmp_path / "one.jsonl").write_text("".join(json.dumps({"body": t}) + "\n" for t in texts))
    assert list(iter_corpus_texts(str(tmp_path / "one.jsonl"), text_key="body")) == texts
    assert list(iter_corpus_texts(str(tmp_path / "one.jsonl"), text_key="body", max_bytes=1)) == texts[:1]

    txt = tmp_path / "txt"
    (txt / "sub").mkdir(parents=True)
    for i, t in enumerate(texts[:5]):
        (txt / f"{i}.txt").write_text(t, encoding="utf-8")
    (txt / "sub" / "9.txt").write_text(texts[5], encoding="utf-8")
    (txt / "bad.txt").write_bytes(b"caf\xe9\n")  # latin-1: skipped
    (txt / "README.md").write_text("ignored")
    source = resolve_corpus(str(txt))
    assert source.kind == "text"
    assert source.files == ("0.txt", "1.txt", "2.txt", "3.txt", "4.txt", "bad.txt", "sub/9.txt")
    assert list(source.iter_texts()) == texts[:6]


def test_corpus_errors(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        resolve_corpus(str(tmp_path / "nope"))
    with pytest.raises(DataError, match="is empty"):
        resolve_corpus("  ")
    (tmp_path / "a.csv").write_text("x\n")
    with pytest.raises(DataError, match="unknown type"):
        resolve_corpus(str(tmp_path / "a.csv"))
    (tmp_path / "a.txt").write_text("x\n")
    with pytest.raises(DataError, match="folder of .txt files"):
        resolve_corpus(str(tmp_path / "a.txt"))
    (tmp_path / "b.jsonl").write_text('{"text": "x"}\n')
    with pytest.raises(DataError, match="mixes file types"):
        resolve_corpus(str(tmp_path))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match="holds no"):
        resolve_corpus(str(empty))
    hub = resolve_corpus("hf:HuggingFaceFW/fineweb-edu:sample-10BT")  # named offline: the cache may hold it prepared
    with pytest.raises(DataError, match="HF_HUB_OFFLINE"):  # read offline: no
        next(hub.iter_texts())


def test_local_identity_changes_with_the_files(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"text": "hello"}\n')
    first = resolve_corpus(str(tmp_path)).identity
    assert resolve_corpus(str(tmp_path)).identity == first
    (tmp_path / "a.jsonl").write_text('{"text": "hello world"}\n')
    assert resolve_corpus(str(tmp_path)).identity != first
    assert resolve_corpus(str(tmp_path), max_bytes=10).identity != resolve_corpus(str(tmp_path)).identity


def test_the_reports_pdf_stack_stays_out_of_the_corpus():
    """WeasyPrint and the packages it brings sort ahead of the 64 MB cut: left in, installing them changed the
    main job's training data. ``make`` installs them, so this checks a real site-packages."""
    from ladder.model.data.embedded import EMBEDDED_SKIP_PACKAGES, _embedded_candidates, embedded_roots

    names = [r[0] for r in _embedded_candidates(embedded_roots())]
    top = {n.split("/", 2)[1].removesuffix(".py") for n in names if n.startswith("site-packages") and n.count("/") >= 1}
    assert not (top & EMBEDDED_SKIP_PACKAGES)
    assert any(n.startswith("stdlib/") for n in names) and "numpy" in top
