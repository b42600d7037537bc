"""The ``contextdelta`` command line (typer). Commands stay thin: they parse, call the core, print."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from contextdelta import __version__
from contextdelta.worlds import WORLDS, ProtectionMode, ToolKind

app = typer.Typer(
    name="contextdelta",
    help="ContextDelta: does a tool-using LLM agent act on stale state when it works from a reduced context?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()


def _version(value: bool) -> None:
    if value:
        typer.echo(f"contextdelta {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Benchmark whether agents act on stale state under reduced context."""


@app.command("tools")
def tools_command(
    world: Annotated[str | None, typer.Option(help="Only this world (order, calendar, config).")] = None,
    mode: Annotated[ProtectionMode, typer.Option(help="Protection mode the schemas are derived for.")] = (
        ProtectionMode.UNPROTECTED
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print the OpenAI tool schemas as JSON.")] = False,
) -> None:
    """List each world's tools (read or write, the resource they address), or print their OpenAI schemas."""
    if world is not None and world not in WORLDS:
        console.print(f"[red]unknown world {world!r}[/red]; choose one of: {', '.join(sorted(WORLDS))}")
        raise typer.Exit(2)
    names = [world] if world else sorted(WORLDS)
    if as_json:
        typer.echo(json.dumps({n: WORLDS[n].tool_schemas(mode) for n in names}, indent=2, sort_keys=True))
        return
    table = Table(title=f"Tools ({mode.value})")
    for column in ("world", "tool", "kind", "description"):
        table.add_column(column)
    for name in names:
        for spec in WORLDS[name].tools:
            style = "yellow" if spec.kind is ToolKind.WRITE else None
            table.add_row(name, spec.name, spec.kind.value, spec.description.splitlines()[0], style=style)
    console.print(table)


@app.command("validate-tasks")
def validate_tasks_command(
    tasks: Annotated[Path, typer.Option("--tasks", help="Folder of task files: <world>/<id>.yaml.")] = Path("tasks"),
    lock: Annotated[
        bool, typer.Option("--write-lock", help="Regenerate SUITE.lock in the folder when every check passes.")
    ] = False,
) -> None:
    """Schema-check, lock-check and replay every task (reference and unsafe trajectory); exit 1 on any problem."""
    from contextdelta.tasks.report import print_report
    from contextdelta.tasks.validation import validate_suite, write_lock

    if not tasks.is_dir():
        console.print(f"[red]error[/red] {tasks}: not a folder of task files", soft_wrap=True)
        raise typer.Exit(1)
    report = validate_suite(tasks, writing_lock=lock)
    wide = console if console.is_terminal else Console(width=160)
    print_report(report, wide)
    if not report.ok:
        raise typer.Exit(1)
    if lock:
        wide.print(f"wrote {write_lock(report)}")


def _csv(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value is not None else None


@app.command("run-benchmark")
def run_benchmark_command(
    tasks: Annotated[Path, typer.Option("--tasks", help="Task directory (tasks/<world>/<id>.yaml).")] = Path("tasks"),
    strategies: Annotated[
        str | None, typer.Option(help="Comma-separated: full_history,last_n,semantic_summary,typed_state_digest.")
    ] = None,
    protection_modes: Annotated[
        str | None, typer.Option(help="Comma-separated: unprotected,freshness_contract.")
    ] = None,
    repeats: Annotated[int | None, typer.Option(help="Repeats per (task, strategy, mode). Default 3.")] = None,
    task_ids: Annotated[str | None, typer.Option(help="Comma-separated task ids (default: every task).")] = None,
    limit: Annotated[
        int | None, typer.Option(help="Smoke tests only: run at most this many tasks (results are not comparable).")
    ] = None,
    max_steps: Annotated[int | None, typer.Option(help="Override every task's step limit.")] = None,
    concurrency: Annotated[int, typer.Option(help="Episodes run at once.")] = 4,
    seed: Annotated[int | None, typer.Option(help="Run seed (default CONTEXTDELTA_SEED).")] = None,
    model: Annotated[str | None, typer.Option(help="Model name (default CONTEXTDELTA_MODEL).")] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint (default CONTEXTDELTA_BASE_URL).")] = None,
    summary_model: Annotated[str | None, typer.Option(help="Model for semantic_summary (default: --model).")] = None,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature (default 0).")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Completion token cap per model call.")] = None,
    timeout_s: Annotated[float, typer.Option(help="Per-call timeout in seconds.")] = 120.0,
    provider: Annotated[str, typer.Option(help="Provider kind (openai-compatible HTTP).")] = "openai",
    results_dir: Annotated[Path | None, typer.Option(help="Where run directories go (default results/).")] = None,
    max_cost_usd: Annotated[float | None, typer.Option(help="Stop starting episodes once this much is spent.")] = None,
    max_episode_cost_usd: Annotated[float | None, typer.Option(help="Stop an episode at this cost.")] = None,
    price_table: Annotated[Path | None, typer.Option(help="JSON price table overriding the built-in one.")] = None,
    last_n: Annotated[int | None, typer.Option(help="last_n: tool groups kept (default 3).")] = None,
    summary_trigger: Annotated[int | None, typer.Option(help="Summary/digest after this many groups (6).")] = None,
    summary_keep: Annotated[int | None, typer.Option(help="Groups kept verbatim after a summary/digest (3).")] = None,
    resume: Annotated[str | None, typer.Option(help="Continue run RUN_ID: run only its missing episodes.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar (for CI).")] = False,
) -> None:
    """Run tasks x strategies x protection modes x repeats; the last line printed is the run directory."""
    from contextdelta.report import write_reports
    from contextdelta.runner.benchmark import BenchmarkError, BenchmarkRequest, Progress, run_benchmark
    from contextdelta.runner.progress import ProgressDisplay

    request = BenchmarkRequest(
        tasks_dir=tasks, task_ids=_csv(task_ids), strategies=_csv(strategies), protection_modes=_csv(protection_modes),
        repeats=repeats, limit=limit, max_steps=max_steps, concurrency=concurrency, seed=seed, provider=provider,
        model=model, base_url=base_url, summary_model=summary_model, temperature=temperature, max_tokens=max_tokens,
        timeout_s=timeout_s, results_dir=results_dir, max_cost_usd=max_cost_usd,
        max_episode_cost_usd=max_episode_cost_usd, price_table=price_table, last_n=last_n,
        summary_trigger=summary_trigger, summary_keep=summary_keep, resume=resume,
    )
    err = Console(stderr=True)
    display = None if quiet else ProgressDisplay(err)
    callbacks = display.callbacks() if display else Progress(message=lambda text: err.print(text))
    try:
        outcome = run_benchmark(request, progress=callbacks, finalize=write_reports)
    except BenchmarkError as exc:
        err.print(f"[red]error:[/red] {exc.message}", highlight=False)
        raise typer.Exit(exc.exit_code) from None
    finally:
        if display:
            display.stop()
    counts = outcome.manifest.counts
    err.print(
        f"{counts.finished}/{counts.planned} episodes, {counts.succeeded} succeeded, {counts.failed} failed trials; "
        f"status {outcome.manifest.status.value}",
        highlight=False,
    )
    typer.echo(str(outcome.path))
    if outcome.interrupted:
        raise typer.Exit(130)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
