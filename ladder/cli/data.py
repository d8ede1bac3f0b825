"""`ladder data`: tokenized corpora (`prepare`) and byte-level BPE tokenizers (`tokenizer train|eval`)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from ladder.cli.options import JSON_OPT, MAX_VOCAB, count, fraction, out_path
from ladder.console import err, out, print_json

app = typer.Typer(help="Tokenizers and tokenized corpora (cached, shared by every study).", no_args_is_help=True)
tokenizer_app = typer.Typer(help="Train and evaluate byte-level BPE tokenizers.", no_args_is_help=True)
app.add_typer(tokenizer_app, name="tokenizer")

CORPUS_HELP = "A jsonl/parquet file or folder, a folder of .txt files, `embedded`, or hf:<dataset>[:<config>]."
TEXT_KEY_HELP = "Column/key holding the text of each document (jsonl and parquet corpora)."
FRACTION_HELP = (
    "Share of documents held out (never trained on), between 0 and 1 (both excluded), chosen by a hash of the "
    "text as in a study."
)


@tokenizer_app.command("train")
def tokenizer_train(
    corpus: str = typer.Argument(..., help=CORPUS_HELP),
    vocab_size: int = typer.Option(
        ...,
        "--vocab-size",
        help="Ids in the vocabulary, special tokens included: 259 (256 bytes, 2 special tokens and 1 merge) to "
        "16,777,216.",
    ),
    out_text: str = typer.Option(
        ..., "--out", metavar="PATH", help="Folder to save the tokenizer in (loadable by transformers)."
    ),
    text_key: str = typer.Option("text", "--text-key", help=TEXT_KEY_HELP),
    max_bytes: str | None = typer.Option(
        None,
        "--max-bytes",
        help="Read documents until this much text is read, e.g. 64M (the last one whole, so a little more; "
        "default: all of it, and 64M of `embedded`).",
    ),
    validation_fraction: float = typer.Option(0.02, "--validation-fraction", help=FRACTION_HELP),
    as_json: bool = JSON_OPT,
) -> None:
    """Train a byte-level BPE (EOS and pad special tokens) on a corpus's training documents."""
    import time

    from ladder.errors import SpecError
    from ladder.model.data.corpus import iter_corpus_texts
    from ladder.model.data.tokenizer import MIN_VOCAB_SIZE, SPECIAL_TOKENS, describe_tokenizer, train_tokenizer

    cap = count(max_bytes, "--max-bytes", "a positive size such as 64M") if max_bytes else None
    fraction(validation_fraction, "--validation-fraction")
    out_dir = out_path(out_text)  # `--out ''` refused: it once wrote the tokenizer among the current folder's files
    if out_dir.exists() and not out_dir.is_dir():
        raise SpecError(f"--out {out_dir}: exists and is not a folder")
    if not text_key.strip():
        raise SpecError(f"--text-key {text_key!r}: an empty name; name the field of each record that holds its text")
    if vocab_size < MIN_VOCAB_SIZE:  # the sum spelled out: "256 bytes + specials" read as 258
        raise SpecError(
            f"--vocab-size {vocab_size}: a byte-level BPE needs at least {MIN_VOCAB_SIZE} ids "
            f"(256 bytes + {len(SPECIAL_TOKENS)} special tokens + 1 merge)"
        )
    if vocab_size > MAX_VOCAB:
        raise SpecError(
            f"--vocab-size {vocab_size}: must be at most {MAX_VOCAB:,} ids (real vocabularies: 32K to 256K)"
        )
    _check_text_key(corpus, text_key)
    start = time.perf_counter()
    texts = iter_corpus_texts(corpus, text_key, split="train", validation_fraction=validation_fraction, max_bytes=cap)
    path = train_tokenizer(texts, vocab_size, out_dir)
    info = {"tokenizer": str(path), "seconds": time.perf_counter() - start, **describe_tokenizer(path)}
    got = info.get("vocab_size", vocab_size)
    if got < vocab_size:  # BPE stops merging when no pair repeats: the corpus is too small for the vocabulary
        err.print(
            f"[yellow]warning[/]: the corpus gave only {got:,} of the {vocab_size:,} ids asked for (no pair of "
            "tokens repeats any more): too little text for this vocabulary; give more text or a smaller --vocab-size",
            soft_wrap=True,
        )
    if as_json:
        print_json(info)
        return
    out.print(
        f"trained a {info.get('vocab_size', vocab_size)}-id byte-level BPE in {info['seconds']:.1f}s: "
        f"{out_dir.resolve()}"
    )


def _check_text_key(corpus: str, text_key: str) -> None:
    """A --text-key that the first records of a local jsonl or parquet corpus lack, named with the fields they have
    (training said only "no training text was read (... the text under another key ...)")."""
    from ladder.errors import SpecError
    from ladder.model.data.corpus import resolve_corpus, text_key_problem

    if corpus.strip() == "embedded" or corpus.strip().startswith("hf:"):
        return
    problem = text_key_problem(resolve_corpus(corpus, text_key), "--text-key")
    if problem:
        raise SpecError(problem.replace(" = ", " ", 1))


@tokenizer_app.command("eval")
def tokenizer_eval(
    tokenizer_dir: Path = typer.Argument(..., help="A tokenizer folder (or tokenizer.json)."),
    corpus: str = typer.Argument(..., help=CORPUS_HELP),
    text_key: str = typer.Option("text", "--text-key", help=TEXT_KEY_HELP),
    max_bytes: str = typer.Option(  # the cap is on the text read, before the split: not on the held-out text
        "8M",
        "--max-bytes",
        help="Read documents until this much text is read (the last one whole, so a little more), held out or "
        "not: the evaluation gets the held-out share of it (--validation-fraction; about 160K of the default 8M).",
    ),
    validation_fraction: float = typer.Option(0.02, "--validation-fraction", help=FRACTION_HELP),
    as_json: bool = JSON_OPT,
) -> None:
    """Bytes per token, tokens per word, vocabulary usage and exact round trip on held-out text."""
    from ladder.errors import DataError, SpecError
    from ladder.model.config import format_count
    from ladder.model.data.corpus import iter_corpus_texts
    from ladder.model.data.tokenizer import evaluate_tokenizer

    cap = count(max_bytes, "--max-bytes", "a positive size such as 8M")
    fraction(validation_fraction, "--validation-fraction")
    if not tokenizer_dir.exists():
        raise SpecError(f"{tokenizer_dir}: no such tokenizer folder or tokenizer.json")
    _check_text_key(corpus, text_key)
    texts = list(
        iter_corpus_texts(corpus, text_key, split="validation", validation_fraction=validation_fraction, max_bytes=cap)
    )
    if not texts:
        if (
            next(
                iter(
                    iter_corpus_texts(
                        corpus, text_key, split="train", validation_fraction=validation_fraction, max_bytes=cap
                    )
                ),
                None,
            )
            is None
        ):
            raise DataError(
                f"{corpus}: no document has text under --text-key {text_key!r} (is the text under another key?)"
            )
        # --max-bytes caps the text read before the split: a small cap holds no held-out document at any fraction
        raise DataError(
            f"{corpus}: no held-out documents to evaluate on in the first {format_count(cap)} "
            f"byte{'' if cap == 1 else 's'} of text (try a larger "
            "--max-bytes or --validation-fraction)"
        )
    m = evaluate_tokenizer(tokenizer_dir, texts)
    if as_json:
        print_json(m)
        return
    table = Table("metric", "value", title=f"tokenizer {tokenizer_dir} on {m['texts']:,} held-out documents")
    table.add_row("bytes per token", f"{m['bytes_per_token']:.3f}")
    table.add_row("tokens per word", f"{m['tokens_per_word']:.3f}")
    table.add_row("vocabulary used", f"{m['vocab_used']:,}/{m['vocab_size']:,} ({100 * m['vocab_usage']:.1f}%)")
    table.add_row("exact round trip", "yes" if m["roundtrip_ok"] else f"NO ({m['roundtrip_failures']} texts)")
    out.print(table)
    if not m["roundtrip_ok"]:
        raise typer.Exit(1)


@app.command("prepare")
def data_prepare(
    study: str = typer.Argument(..., help="A study YAML file, built-in name or planned study directory."),
    workers: int | None = typer.Option(
        None, "--workers", min=1, max=65_536, help="Tokenization tasks at once (default: CPUs)."
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """Tokenize a study's corpus into cached datatrove shards (resumable).

    The result is shared by every study that uses the same corpus and tokenizer."""
    from ladder.model.data.prepare import prepare_data
    from ladder.model.data.prepared import describe
    from ladder.studies import load_study

    spec = load_study(study)
    prepared = prepare_data(spec.data, spec.model.vocab_size, workers=workers, progress=not as_json)
    info = describe(prepared)
    if as_json:
        print_json(info)
        return
    out.print(
        f"data ready: {prepared.train_tokens:,} train and {prepared.val_tokens:,} validation tokens, "
        f"vocabulary {prepared.vocab_size:,} ({prepared.root})"
    )
