"""The progress of a training run on rank 0: a rich bar on a terminal (tokens done, the latest loss, tokens per
second, time left); without one (a log, CI, a pipe) the same facts as a line about once a minute
(``LINE_EVERY_S``), and at the start and the end."""

from __future__ import annotations

import sys
import time

from ladder.model.config import format_count

LINE_EVERY_S = 60.0


class Progress:
    """A rich bar, or progress lines without a terminal, when ``enabled``; every method is a no-op otherwise."""

    def __init__(self, enabled: bool, total_tokens: int, done_tokens: int, run_id: str):
        self.bar = None
        self.lines = False
        self.total = total_tokens
        self.run_id = run_id or "train"
        if not enabled:
            return
        if not sys.stdout.isatty():
            self.lines, self.started, self.last_line = True, time.monotonic(), time.monotonic()
            self.start_tokens, self.tokens, self.loss, self.tps = done_tokens, done_tokens, None, None
            self._line("resumed at" if done_tokens else "started")
            return
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        self.bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[tok]}"),
            TextColumn("loss {task.fields[loss]}"),
            TextColumn("{task.fields[tps]} tok/s"),
            TimeRemainingColumn(),
            transient=False,
        )
        self.task = self.bar.add_task(self.run_id, total=total_tokens, completed=done_tokens,
                                      tok=self._tok(done_tokens), loss="-", tps="-")  # fmt: skip
        self.bar.start()

    def _tok(self, done: int) -> str:
        return f"{format_count(done)}/{format_count(self.total)} tok"

    def _line(self, what: str) -> None:
        elapsed = time.monotonic() - self.started
        rate = (self.tokens - self.start_tokens) / elapsed if elapsed > 0 else 0.0
        left = (self.total - self.tokens) / rate if rate > 0 else None
        parts = [
            f"{time.strftime('%H:%M:%S')} {self.run_id} {what}: {self._tok(self.tokens)} "
            f"({100 * self.tokens / max(1, self.total):.0f}%)"
        ]
        if self.loss is not None:  # at the end: the last step's, beside the result's mean of the last steps
            parts.append(f"{'loss' if what == 'at' else 'last step loss'} {self.loss:.4f}")
        if self.tps:
            parts.append(f"{self.tps:,.0f} tok/s")
        if left is not None and self.tokens < self.total:
            parts.append(f"ETA {left / 60:.1f}m" if left >= 60 else f"ETA {left:.0f}s")
        print(", ".join(parts), flush=True)
        self.last_line = time.monotonic()

    def update(self, tokens: int, loss: float, tps: float | None) -> None:
        if self.lines:
            self.tokens, self.loss, self.tps = tokens, loss, tps
            if time.monotonic() - self.last_line >= LINE_EVERY_S:
                self._line("at")
        elif self.bar is not None:
            self.bar.update(self.task, completed=tokens, tok=self._tok(tokens), loss=f"{loss:.4f}",
                            tps=f"{tps:,.0f}" if tps else "-")  # fmt: skip

    def close(self) -> None:
        if self.lines:
            self.lines = False
            self._line("stopped at" if self.tokens < self.total else "finished")
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
