"""Printing a ``validate-tasks`` report: the rich table, every problem on its own line, and the suite hash."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from contextdelta._words import plural
from contextdelta.validation.suite import SuiteReport, TaskReport

HASH_PREFIX = 12


def _mark(value: bool | None) -> str:
    if value is None:
        return "[dim]-[/dim]"
    return "[green]pass[/green]" if value else "[red]FAIL[/red]"


def _row(row: TaskReport) -> list[str]:
    return [
        escape(row.id),
        row.world or "?",
        row.hazard.value if row.hazard else "?",
        _mark(row.reference_ok),
        _mark(row.unsafe_ok),
        _mark(row.null_ok),
        _mark(row.control_ok),
        row.target.value if row.target else "-",
        "-" if row.gap is None else str(row.gap),
        (row.content_hash or "")[:HASH_PREFIX] or "-",
    ]


def task_table(report: SuiteReport, name: str | None = None) -> Table:
    """One row per task: id, world, hazard, the reference, unsafe, null-agent and no-mutation-control checks,
    targeted grader, gap, hash prefix. ``name``: how the suite was named (``package:NAME``), else its folder."""
    table = Table(title=f"Tasks in {name or report.directory}")
    table.add_column("task", no_wrap=True)
    table.add_column("world")
    table.add_column("hazard", no_wrap=True)
    table.add_column("reference")
    table.add_column("unsafe")
    table.add_column("null")
    table.add_column("control")
    table.add_column("caught by", no_wrap=True)
    table.add_column("gap", justify="right")
    table.add_column("hash", no_wrap=True)
    for row in report.rows:
        table.add_row(*_row(row))
    return table


def print_report(report: SuiteReport, console: Console, name: str | None = None) -> None:
    """Print the table, the problems, the lock status and the suite hash (``name``: see :func:`task_table`)."""
    console.print(task_table(report, name))
    for problem in report.problems:
        console.print(f"[red]error[/red] {escape(problem.render())}", soft_wrap=True)
    if not report.lock_found:
        console.print(f"[yellow]note[/yellow] no {report.lock_path.name} in {report.directory}: version check skipped")
    passed = sum(1 for r in report.rows if r.ok)
    console.print(f"suite hash: {report.suite_hash}", soft_wrap=True)
    verdict = "[green]all tasks pass[/green]" if report.ok else f"[red]{plural(len(report.problems), 'problem')}[/red]"
    console.print(f"{passed}/{len(report.rows)} tasks pass; {verdict}")
