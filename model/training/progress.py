"""The progress bar of a training run (rich): tokens done, the latest loss, tokens per second, time left."""

from __future__ import annotations

from ladder.model.config import format_count


class Progress:
    """A rich bar on rank 0 when ``enabled``; every method is a no-op otherwise."""

    def __init__(self, enabled: bool, total_tokens: int, done_tokens: int, run_id: str):
        self.bar = None
        if not enabled:
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
        self.total = total_tokens
        self.task = self.bar.add_task(run_id or "train", total=total_tokens, completed=done_tokens,
                                      tok=self._tok(done_tokens), loss="-", tps="-")  # fmt: skip
        self.bar.start()

    def _tok(self, done: int) -> str:
        return f"{format_count(done)}/{format_count(self.total)} tok"

    def update(self, tokens: int, loss: float, tps: float | None) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=tokens, tok=self._tok(tokens), loss=f"{loss:.4f}",
                            tps=f"{tps:,.0f}" if tps else "-")  # fmt: skip

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
