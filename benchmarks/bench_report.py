"""Benchmark: render the report (HTML + PDF) of a 50-run study.

The study is the synthetic one of the report tests (``tests/reports/fixture_study.py``): an IsoFLOP ladder of
5 budgets x 5 sizes x tied/untied embeddings, planned with ``ladder plan``, fake-trained (metrics, results, task
evaluations, a diverged and two failed runs), collected and fitted with the real code; only the rendering is
timed. Target: under 30 s on 2 cores.

    .venv/bin/python benchmarks/bench_report.py              # prints timing + a markdown row, updates README
    .venv/bin/python benchmarks/bench_report.py --keep DIR   # keep the study and its report in DIR
    .venv/bin/python benchmarks/bench_report.py --no-readme

Writes the numbers into ``benchmarks/README.md`` under ``## Report rendering`` (only that section is touched;
the last 10 rows are kept).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from readme_table import update_section  # noqa: E402 (the script's folder is on sys.path)

README = Path(__file__).with_name("README.md")
HEADING = "## Report rendering"
HEADER = (
    "| date | machine | runs | figures | PDF pages | load + sections (s) | HTML (s) | PDF (s) | total (s) | CPU (s) | "
    "load | HTML (KB) | PDF (KB) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def timed(fn):
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def update_readme(row: str, command: str, path: Path = README) -> None:
    intro = (
        "`ladder report` of a 50-run study (IsoFLOP ladder: 5 budgets x 5 sizes x tied/untied, with loss curves,\n"
        "task evaluations, a diverged and two failed runs; fitted by `fit_study`): one self-contained HTML file\n"
        "(inline SVG figures) and an A4 PDF (the same HTML printed by WeasyPrint). Target < 30 s on 2 cores.\n"
        f"Measured with `{command}`; only rendering is timed (the study is built and fitted first). CPU is\n"
        "process time; load is the 1-minute load average when the run started (the machine is shared)."
    )
    update_section(HEADING, intro, HEADER, row, path)


def main() -> None:
    from ladder.reports.render import report as R
    from ladder.reports.render.blocks import Fig
    from ladder.reports.render.pdf import write_pdf
    from tests.reports.fixture_study import make_study

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budgets", type=int, default=5, help="compute budgets (x 5 sizes x tied/untied runs)")
    ap.add_argument("--keep", type=Path, default=None, help="build the study (and its report) in this folder")
    ap.add_argument("--no-readme", action="store_true")
    args = ap.parse_args()

    budgets = tuple(3e11 * 10 ** (0.5 * i) for i in range(args.budgets))
    tmp = None
    if args.keep:
        study = args.keep
    else:
        tmp = tempfile.TemporaryDirectory(prefix="bench-report-")
        study = Path(tmp.name) / "study"
    t0 = time.perf_counter()
    make_study(study, budgets=budgets, points=5, lr_multipliers=None, n_boot=100, name="report benchmark")
    print(f"study built and fitted in {time.perf_counter() - t0:.1f} s: {study}")

    out = R.layout.StudyDir(study).report
    out.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    (data, sections), t_build, c_build = timed(lambda: R.build_sections(study))
    html, t_html, c_html = timed(lambda: R._html(data, sections))
    (out / R.HTML_NAME).write_text(html, encoding="utf-8")
    pages, t_pdf, c_pdf = timed(lambda: write_pdf(out / R.PDF_NAME, data, sections))
    total, cpu = t_build + t_html + t_pdf, c_build + c_html + c_pdf
    n_runs = len(data.runs)
    n_figs = sum(isinstance(b, Fig) for s in sections for b in s.blocks)
    kb_html, kb_pdf = (out / R.HTML_NAME).stat().st_size / 1024, (out / R.PDF_NAME).stat().st_size / 1024
    print(
        f"{n_runs} runs, {n_figs} figures, {pages} PDF pages: load + sections {t_build:.2f} s, HTML {t_html:.2f} s, "
        f"PDF {t_pdf:.2f} s, total {total:.2f} s wall ({cpu:.2f} s CPU), load {load:.1f}; "
        f"HTML {kb_html:.0f} KB, PDF {kb_pdf:.0f} KB"
    )
    print("PASS" if total < 30 else "FAIL", "(target < 30 s)")
    if args.keep:
        print(f"report: {out / R.HTML_NAME}, {out / R.PDF_NAME}")
    if not args.no_readme:
        machine = f"{platform.machine()} x{os.cpu_count()}"
        row = (
            f"| {dt.date.today().isoformat()} | {machine} | {n_runs} | {n_figs} | {pages} | {t_build:.2f} | "
            f"{t_html:.2f} | {t_pdf:.2f} | {total:.2f} | {cpu:.2f} | {load:.1f} | {kb_html:.0f} | {kb_pdf:.0f} |"
        )
        update_readme(row, "python benchmarks/bench_report.py")
        print(f"updated {README}")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
