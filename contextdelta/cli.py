"""The ``contextdelta`` command line (typer). Commands stay thin: they parse, call the core, print."""

from __future__ import annotations

import json
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


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
