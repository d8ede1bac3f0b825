"""The overfit sanity check passes on a correct pipeline and names the right stage when something is broken."""

import numpy as np
import pytest

from ladder.model.evaluation.sanity import run_sanity, sanity_check
from ladder.model.shape import ModelShape

pytestmark = pytest.mark.usefixtures("one_thread")

PARAGRAPH = (
    "Scaling laws predict the loss of a large language model from small runs. A ladder trains several small "
    "models with the same recipe, fits a power law to their final losses, and forecasts the big run before anyone "
    "spends the compute on it."
)


def tiny(vocab=300):
    return ModelShape(d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, ffn_dim=128, vocab_size=vocab,
                      tied=True, max_seq_len=128)  # fmt: skip


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from ladder.model.data.tokenizer import load_tokenizer, train_tokenizer

    return load_tokenizer(train_tokenizer([PARAGRAPH] * 3, 300, tmp_path_factory.mktemp("tok")))


def test_memorizing_a_paragraph_passes(tokenizer):
    report = sanity_check(tiny(), [PARAGRAPH], tokenizer)
    assert report.passed, report.summary()
    assert report.stage is None and report.diagnosis is None
    assert all(report.checks.values())
    assert report.final_loss < 0.05 and report.matched == report.compared == 1
    assert abs(report.initial_loss - report.ln_vocab) < 0.25 * report.ln_vocab
    assert report.samples[0]["generated_text"] == report.samples[0]["expected_text"]
    assert PARAGRAPH.startswith(report.samples[0]["prompt_text"] + report.samples[0]["expected_text"][:20])
    assert report.seconds < 60


def test_a_label_shift_bug_is_diagnosed_as_low_loss_but_wrong_generation(tokenizer):
    report = sanity_check(tiny(), [PARAGRAPH], tokenizer, label_shift_bug=True)
    assert not report.passed
    assert report.checks["loss_below_threshold"]  # copying the input is easy ...
    assert not report.checks["generation_reproduces_documents"]  # ... but the model never learned to predict
    assert report.stage == "generation"
    assert "label shift" in report.diagnosis and "masking" in report.diagnosis
    assert "FAILED" in report.summary()


def test_a_flat_loss_is_diagnosed_as_optimization():
    rng = np.random.default_rng(0)
    docs = [list(rng.integers(2, 300, size=12)) for _ in range(10)]
    report = sanity_check(tiny(), docs, eos_id=0, lr=1e-9, steps=15)
    assert not report.passed and report.stage == "optimization"
    assert "flat" in report.diagnosis and "learning rate" in report.diagnosis


def test_a_hundred_short_documents_are_memorized():
    rng = np.random.default_rng(1)
    docs = [list(rng.integers(2, 300, size=int(rng.integers(8, 17)))) for _ in range(100)]
    report = sanity_check(tiny(), docs, eos_id=0)
    assert report.passed, report.summary()
    assert report.documents == 100 and report.matched >= 0.9 * report.compared


def test_a_lossy_tokenizer_is_named():
    class Lossy:  # lower-cases: decode(encode(text)) != text
        eos_token_id = 0

        def encode(self, text):
            return [2 + ord(c) % 200 for c in text.lower()]

        def decode(self, ids):
            return "".join(chr(i - 2) for i in ids)

    report = sanity_check(tiny(), ["Hello World, Hello Ladder."], Lossy(), steps=5)
    assert report.stage == "tokenizer" and not report.passed


@pytest.mark.slow
def test_run_sanity_on_prepared_data():
    from tests.model.training.tiny_runs import prepared_tiny_corpus

    prepared = prepared_tiny_corpus()["prepared"]
    report = run_sanity(prepared, tiny(vocab=300), n_docs=30, max_doc_tokens=16)
    assert report.documents == 30 and report.samples[0]["generated_text"]
    assert report.passed, report.summary()
