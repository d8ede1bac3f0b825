from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ladder.errors import DataError
from ladder.model.data.tokenizer import (
    EOS_TOKEN,
    PAD_TOKEN,
    describe_tokenizer,
    evaluate_tokenizer,
    load_tokenizer,
    special_ids,
    tokenizer_file,
    train_tokenizer,
)
from tests.conftest import make_texts

HELD_OUT = [
    "Ça a été très naïve — façade, Ångström, smörgåsbord.",
    "東京の天気は晴れです。数据科学与机器学习。한국어 텍스트.",
    "emoji 🎉🚀👩‍👩‍👧 and flags 🇫🇷 never seen in training",
    "tabs\tand\t\ttabs, many     spaces,   and trailing newlines\n\n\n",
    "   leading spaces and a lone \r carriage return\r\n",
    "def f(x):\n    return {'a': [1, 2, 3]}  # comment ✓\n",
    "",
    " ",
    "\u200b zero width, \u00a0 nbsp, combining e\u0301 vs é",
]


def test_round_trip_is_exact_on_held_out_non_ascii(tiny_tokenizer):
    tok = load_tokenizer(tiny_tokenizer)
    for text in HELD_OUT:
        ids = tok.encode(text, add_special_tokens=False).ids
        assert tok.decode(ids, skip_special_tokens=False) == text
    report = evaluate_tokenizer(tiny_tokenizer, HELD_OUT)
    assert report["roundtrip_ok"] and report["roundtrip_failures"] == 0 and report["first_failure"] is None


def test_special_tokens_and_vocab(tiny_tokenizer):
    tok = load_tokenizer(tiny_tokenizer)
    assert tok.get_vocab_size() <= 300
    assert special_ids(tok) == (tok.token_to_id(EOS_TOKEN), tok.token_to_id(PAD_TOKEN)) == (0, 1)
    # special tokens in the text are not split into bytes, and nothing is added around a text
    assert tok.encode("ab", add_special_tokens=True).ids == tok.encode("ab", add_special_tokens=False).ids
    info = describe_tokenizer(tiny_tokenizer)
    assert info["eos_id"] == 0 and info["pad_id"] == 1 and info["trained"]["requested_vocab_size"] == 300
    assert tokenizer_file(tiny_tokenizer) == tiny_tokenizer / "tokenizer.json"


def test_training_is_deterministic(tmp_path, tiny_texts):
    a = train_tokenizer(tiny_texts[:150], 280, tmp_path / "a")
    b = train_tokenizer(iter(tiny_texts[:150]), 280, tmp_path / "b")
    assert (a / "tokenizer.json").read_bytes() == (b / "tokenizer.json").read_bytes()


def test_train_from_files_and_byte_cap(tmp_path, tiny_texts):
    files = []
    for i, t in enumerate(tiny_texts[:20]):
        p = tmp_path / f"{i}.txt"
        p.write_text(t, encoding="utf-8")
        files.append(p)
    out = train_tokenizer(files, 270, tmp_path / "tok", max_bytes=2000)
    info = json.loads((out / "ladder_tokenizer.json").read_text())
    assert 0 < info["trained_on_bytes"] <= 2000 and info["trained_on_texts"] < 20


def test_auto_tokenizer_loads_offline(tiny_tokenizer):
    """In a fresh interpreter with HF_HUB_OFFLINE=1, from the folder alone."""
    code = f"""
import json
from transformers import AutoTokenizer
t = AutoTokenizer.from_pretrained({str(tiny_tokenizer)!r})
texts = {HELD_OUT!r}
ok = all(t.decode(t(x)["input_ids"]) == x for x in texts)
print(json.dumps([t.eos_token, t.eos_token_id, t.pad_token, t.pad_token_id, len(t), ok, t.is_fast]))
"""
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    eos, eos_id, pad, pad_id, n, ok, fast = json.loads(out.stdout.strip().splitlines()[-1])
    assert (eos, eos_id, pad, pad_id) == (EOS_TOKEN, 0, PAD_TOKEN, 1)
    assert n == load_tokenizer(tiny_tokenizer).get_vocab_size() and ok and fast


def test_evaluate_reports_compression_and_usage(tiny_tokenizer):
    report = evaluate_tokenizer(tiny_tokenizer, make_texts(40, seed=99))
    assert report["texts"] == 40 and report["tokens"] > 0
    assert 1.0 < report["bytes_per_token"] < 20
    assert report["tokens_per_word"] > 0
    assert 0 < report["vocab_usage"] <= 1 and report["vocab_used"] <= report["vocab_size"]
    assert report["roundtrip_ok"]
    assert evaluate_tokenizer(tiny_tokenizer, make_texts(40, seed=99), max_texts=5)["texts"] == 5


def test_errors(tmp_path, tiny_texts, tiny_tokenizer):
    with pytest.raises(DataError, match="too small"):
        train_tokenizer(tiny_texts, 100, tmp_path / "small")
    with pytest.raises(DataError, match="empty"):
        train_tokenizer(["", ""], 300, tmp_path / "empty")
    with pytest.raises(DataError, match="no tokenizer.json"):
        load_tokenizer(tmp_path)
    with pytest.raises(DataError, match="no texts"):
        evaluate_tokenizer(tiny_tokenizer, [])
