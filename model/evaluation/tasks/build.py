"""Build the data of the shipped offline tasks from Python source files of the standard library.

    python -m ladder.model.evaluation.tasks.build [--stdlib DIR] [--out DIR] [--check]

Deterministic: a fixed list of standard-library files (``SOURCES``), every choice made by ranking candidates by
a BLAKE2b hash of a fixed key (no RNG), trailing whitespace stripped from every line. The output is committed
(``data/*.jsonl`` and ``data/sources.json``) so every machine evaluates the same examples; rebuilding on
another Python version gives other files' contents and so other examples (``--check`` tells whether the
committed data match what this interpreter would build).

Why these files: they are the standard-library files of CPython 3.11.7 that the embedded corpus
(``ladder.model.data.embedded``) puts in its VALIDATION split at the default ``validation_fraction=0.02`` (the split
is by a hash of the whole file), so a model trained on the embedded corpus never saw them in training
(generated codec tables under ``encodings/`` and stubs under 1 KB left out). On another Python version the
files differ and may fall on the training side; ``sources.json`` records, per file, its SHA-256 and whether
it was held out when the data were built.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import sysconfig
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
NEXT_LINE_FILE = "py_next_line.jsonl"
PPL_FILE = "py_ppl.jsonl"
SOURCES_FILE = "sources.json"

SOURCES = (
    "contextlib.py",
    "pipes.py",
    "uuid.py",
    "asyncio/windows_events.py",
    "email/iterators.py",
    "idlelib/mainmenu.py",
    "lib2to3/btm_utils.py",
    "test/test_grp.py",
    "test/test_hashlib.py",
    "test/test_posix.py",
    "test/test_socketserver.py",
    "test/test_unparse.py",
    "test/test_xml_etree.py",
    "test/support/__init__.py",
    "test/support/socket_helper.py",
    "test/test_importlib/import_/test_relative_imports.py",
    "test/test_json/test_indent.py",
    "turtledemo/forest.py",
)

N_NEXT_LINE = 250
N_CHOICES = 4
CONTEXT_LINES = 10  # at most this many lines before the answer
MIN_CONTEXT_LINES = 3
CONTEXT_CHARS = 480  # ... and at most this many characters (earliest lines dropped first)
MIN_LINE_CHARS = 10  # answers and distractors: at least this many non-blank characters
MAX_LINE_CHARS = 100

N_PPL = 80
PPL_CHARS = 1000  # snippets of whole lines, about this long
MIN_PPL_CHARS = 600

VALIDATION_FRACTION = 0.02  # the embedded corpus' default; for the record in sources.json


def rank(*key: object) -> int:
    """A deterministic pseudo-random rank of ``key`` (same on every machine and Python version)."""
    return int.from_bytes(hashlib.blake2b(repr(key).encode(), digest_size=8).digest(), "big")


def read_source(stdlib: Path, rel: str) -> list[str]:
    text = (stdlib / rel).read_text(encoding="utf-8")
    return [line.rstrip() for line in text.split("\n")]


def quotas(sizes: dict[str, int], total: int, minimum: int) -> dict[str, int]:
    """Split ``total`` over files in proportion to the square root of their sizes, at least ``minimum`` each."""
    weights = {k: v**0.5 for k, v in sizes.items()}
    wsum = sum(weights.values())
    q = {k: max(minimum, int(total * w / wsum)) for k, w in weights.items()}
    order = sorted(sizes, key=lambda k: (-weights[k], k))
    i = 0
    while sum(q.values()) < total:
        q[order[i % len(order)]] += 1
        i += 1
    while sum(q.values()) > total:
        k = order[i % len(order)]
        if q[k] > minimum:
            q[k] -= 1
        i += 1
    return q


def _is_candidate_line(line: str) -> bool:
    s = line.strip()
    return MIN_LINE_CHARS <= len(s) and len(line) <= MAX_LINE_CHARS


def next_line_examples(rel: str, lines: list[str], n: int) -> list[dict]:
    """``n`` next-line questions from one file: context, four choices, label. The context ends with the last
    non-blank line before the answer (no trailing newline); each choice is the newlines in between (one, plus
    one per blank line) followed by a line, so the scored continuation is exactly the text that follows."""
    pool = [ln for ln in lines if _is_candidate_line(ln)]
    positions = [
        i
        for i in range(MIN_CONTEXT_LINES, len(lines))
        if _is_candidate_line(lines[i]) and any(lines[j].strip() for j in range(i - MIN_CONTEXT_LINES, i))
    ]
    positions.sort(key=lambda i: rank("next_line", rel, i))
    out, used = [], set()
    for i in positions:
        if len(out) == n:
            break
        if any(abs(i - j) < 3 for j in used):  # questions from distinct places
            continue
        answer = lines[i]
        ctx_lines = lines[max(0, i - CONTEXT_LINES) : i]
        while len(ctx_lines) > MIN_CONTEXT_LINES and len("\n".join(ctx_lines)) > CONTEXT_CHARS:
            ctx_lines = ctx_lines[1:]
        gap = 0  # blank lines between the context and the answer go into every choice
        while ctx_lines and not ctx_lines[-1].strip():
            ctx_lines = ctx_lines[:-1]
            gap += 1
        context = "\n".join(ctx_lines)
        if len(context) > CONTEXT_CHARS or not context.strip():
            continue
        seen = {answer.strip()} | {c.strip() for c in ctx_lines}
        distractors = []
        for cand in sorted(set(pool), key=lambda c: rank("distractor", rel, i, c)):
            if cand.strip() in seen:
                continue
            seen.add(cand.strip())
            distractors.append(cand)
            if len(distractors) == N_CHOICES - 1:
                break
        if len(distractors) < N_CHOICES - 1:
            continue
        label = rank("label", rel, i) % N_CHOICES
        choices = distractors[:label] + [answer] + distractors[label:]
        used.add(i)
        out.append(
            {
                "id": f"{rel}:{i + 1}",
                "source": rel,
                "line": i + 1,
                "context": context,
                "choices": ["\n" * (gap + 1) + c for c in choices],
                "label": label,
            }
        )
    return out


def ppl_snippets(rel: str, lines: list[str], n: int) -> list[dict]:
    """``n`` non-overlapping snippets of whole lines (about ``PPL_CHARS`` long) from one file."""
    starts = sorted(range(len(lines)), key=lambda i: rank("ppl", rel, i))
    taken: list[tuple[int, int]] = []
    out = []
    for s in starts:
        if len(out) == n:
            break
        if not lines[s].strip():
            continue
        e, size = s, 0
        while e < len(lines) and size + len(lines[e]) + 1 <= PPL_CHARS:
            size += len(lines[e]) + 1
            e += 1
        if size < MIN_PPL_CHARS or any(s < b and a < e for a, b in taken):
            continue
        text = "\n".join(lines[s:e]).strip("\n")
        if len(text) < MIN_PPL_CHARS:
            continue
        taken.append((s, e))
        out.append({"id": f"{rel}:{s + 1}-{e}", "source": rel, "line": s + 1, "text": text})
    return out


def build(stdlib: Path) -> dict[str, str]:
    """The file contents (name -> text) of the task data built from ``stdlib``."""
    from ladder.model.data.corpus import is_validation

    sources = {rel: read_source(stdlib, rel) for rel in SOURCES}
    sizes = {rel: sum(len(x) + 1 for x in lines) for rel, lines in sources.items()}
    q_next = quotas(sizes, N_NEXT_LINE, minimum=4)
    q_ppl = quotas(sizes, N_PPL, minimum=1)
    next_line, ppl, records = [], [], []
    for rel, lines in sources.items():
        ex = next_line_examples(rel, lines, q_next[rel])
        sn = ppl_snippets(rel, lines, q_ppl[rel])
        next_line += ex
        ppl += sn
        raw = (stdlib / rel).read_bytes()
        records.append(
            {
                "path": rel,
                "sha256": hashlib.sha256(raw).hexdigest(),
                "bytes": len(raw),
                "held_out": is_validation(raw.decode("utf-8"), VALIDATION_FRACTION),
                "next_line_examples": len(ex),
                "ppl_snippets": len(sn),
            }
        )
    meta = {
        "built_by": "python -m ladder.model.evaluation.tasks.build",
        "python": sys.version.split()[0],
        "held_out_rule": f"embedded corpus validation split at validation_fraction={VALIDATION_FRACTION}",
        "tasks": {"ladder_py_next_line": NEXT_LINE_FILE, "ladder_py_ppl": PPL_FILE},
        "counts": {NEXT_LINE_FILE: len(next_line), PPL_FILE: len(ppl)},
        "sources": records,
    }

    def jsonl(rows: list[dict]) -> str:
        return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)

    return {
        NEXT_LINE_FILE: jsonl(next_line),
        PPL_FILE: jsonl(ppl),
        SOURCES_FILE: json.dumps(meta, indent=2) + "\n",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stdlib", type=Path, default=Path(sysconfig.get_paths()["stdlib"]))
    ap.add_argument("--out", type=Path, default=DATA_DIR)
    ap.add_argument("--check", action="store_true", help="compare with the files in --out instead of writing")
    args = ap.parse_args(argv)
    files = build(args.stdlib)
    if args.check:
        differ = [
            n
            for n, t in files.items()
            if n != SOURCES_FILE and (not (args.out / n).is_file() or (args.out / n).read_text(encoding="utf-8") != t)
        ]
        print("identical" if not differ else f"differ: {', '.join(differ)}")
        return 1 if differ else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (args.out / name).write_text(text, encoding="utf-8")
        print(f"{args.out / name}: {len(text.encode()):,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
