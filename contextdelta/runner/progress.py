"""A rich progress bar for run-benchmark: done/total, success so far, tokens, cost and ETA (on stderr)."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.progress import Progress as RichProgress

from contextdelta.rundir import EpisodeRecord, RunEnd, RunStart


class ProgressDisplay:
    """The progress bar as a recorder (``contextdelta.rundir.Recorder``): shown from the start of the run until
    it ends; counts this session's episodes, starting from those earlier sessions finished."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.bar = RichProgress(
            TextColumn("[bold]episodes"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[stats]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self.task: TaskID | None = None
        self.finished = self.succeeded = self.failed = self.tokens = 0
        self.cost: float | None = 0.0

    def _stats(self) -> str:
        rate = f"{self.succeeded}/{self.finished} success" if self.finished else "no episodes yet"
        cost = "cost unknown" if self.cost is None else f"${self.cost:.4f}"
        return f"{rate} | {self.failed} failed | {self.tokens:,} tokens | {cost}"

    def start(self, run: RunStart) -> None:
        self.bar.start()
        # what is left is this session's pending episodes (missing ones, and with --retry-failed the re-runs)
        done = max(0, run.planned - run.pending)
        self.task = self.bar.add_task("run", total=run.planned, completed=done, stats=self._stats())

    def episode(self, record: EpisodeRecord) -> None:
        self.finished += 1
        self.succeeded += record.verdict.success
        self.failed += record.failed
        self.tokens += record.trace.totals.total_usage.total_tokens
        if self.cost is not None:
            self.cost = None if record.cost_usd is None else self.cost + record.cost_usd
        if self.task is not None:
            self.bar.update(self.task, advance=1, stats=self._stats())

    def finish(self, run: RunEnd) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop the bar (idempotent; the CLI also calls it when a run is refused before it starts)."""
        self.bar.stop()
