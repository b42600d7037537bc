"""The ``contextdelta`` command line (typer). Commands stay thin: they parse, call the core, print."""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import sys
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, get_args

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from contextdelta import __version__
from contextdelta._flags import PATH_METAVAR, path_flag
from contextdelta._words import plural
from contextdelta.settings import SEED_MAX, SEED_MIN, Settings, SettingsError, load_settings
from contextdelta.worlds import WORLDS, ProtectionMode, ToolKind, ToolSpec

if TYPE_CHECKING:
    from contextdelta.rundir import Recorder
    from contextdelta.runner import RunOutcome
    from contextdelta.tasks import SuiteSource
    from contextdelta.tasks.families import GeneratedSuite
    from contextdelta.validation import SuiteReport, TaskReport

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
    _settings()  # an invalid setting is a one-line error (exit 2) for every command, before it starts


def _settings() -> Settings:
    """The settings (environment and ``.env``); an invalid value exits 2 with a one-line error naming it."""
    try:
        return load_settings()
    except SettingsError as exc:
        raise _fail(str(exc), 2) from None


@app.command("tools")
def tools_command(
    world: Annotated[str | None, typer.Option(help="Only this world (order, calendar, config).")] = None,
    mode: Annotated[ProtectionMode, typer.Option(help="Protection mode the schemas are derived for.")] = (
        ProtectionMode.UNPROTECTED
    ),
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the OpenAI tool schemas as JSON, each with a `contextdelta` entry: read or write, the resource "
            "it addresses, a write's effect key and how the tool reads it (effect_form).",
        ),
    ] = False,
) -> None:
    """List each world's tools (read or write, the resource they address, a write's effect key), or print their
    OpenAI schemas. A write's effect key is what makes two calls the same action for no_duplicate_action."""
    if world is not None and world not in WORLDS:
        raise _fail(f"unknown world {world!r}; choose one of: {', '.join(sorted(WORLDS))}", 2)
    names = [world] if world else sorted(WORLDS)
    if as_json:
        listing = {n: [_tool_entry(spec, mode) for spec in WORLDS[n].tools] for n in names}
        typer.echo(json.dumps(listing, indent=2, sort_keys=True))
        return
    table = Table(title=f"Tools ({mode.value})")
    for column in ("world", "tool", "kind", "resource", "effect key", "description"):
        table.add_column(column)
    for name in names:
        for spec in WORLDS[name].tools:
            style = "yellow" if spec.kind is ToolKind.WRITE else None
            effect = ", ".join(spec.effect) if spec.effect else "-"
            row = (spec.resource_pattern or "-", effect, spec.description.splitlines()[0])
            table.add_row(name, spec.name, spec.kind.value, *row, style=style)
    wide = console if console.is_terminal else Console(width=200)  # piped: whole resource and effect key cells
    wide.print(table)
    wide.print(
        "effect key: the arguments that decide what a write does; two writes with the same tool and effect key are "
        "the same action (no_duplicate_action), whatever their free text (a reason, a title) or expected_version.",
        markup=False,
    )


def _tool_entry(spec: ToolSpec[Any], mode: ProtectionMode) -> dict[str, Any]:
    """One tool in ``tools --json``: its OpenAI schema, plus what the listing shows beside it under ``contextdelta``
    (not part of the OpenAI format: drop the key to send the schema to a model)."""
    return {
        **spec.openai_schema(mode),
        "contextdelta": {
            "kind": spec.kind.value,
            "resource": spec.resource_pattern,
            "effect_key": list(spec.effect) if spec.effect else None,
            "effect_form": spec.effect_form_description,
        },
    }


TASKS_HELP = (
    "Task suite: a folder of <world>/<id>.yaml files, or package:NAME for a suite shipped in the package "
    "(`contextdelta suites`). Default: ./tasks when it is a folder, else package:core."
)
# Options shared by every command that reads a task suite.
TasksOption = Annotated[str | None, typer.Option("--tasks", help=TASKS_HELP, show_default=False)]
AllowUnlockedOption = Annotated[
    bool,
    typer.Option(
        "--allow-unlocked",
        help="Task authors: run a suite whose SUITE.lock is missing or stale (every other validate-tasks check still "
        "applies); recorded in the manifest and at the top of the report.",
    ),
]


def _suite(tasks: str | None) -> SuiteSource:
    """The suite ``--tasks`` names (or the default); an unknown packaged suite is a one-line error, exit 2."""
    from contextdelta.tasks import SuiteError, resolve_suite

    try:
        return resolve_suite(tasks)
    except SuiteError as exc:
        raise _fail(str(exc), 2) from None


def _suite_request(tasks: str | None) -> dict[str, Any]:
    """A run request's suite fields: nothing when ``--tasks`` is not given (the plan decides: on ``--resume`` the
    suite the run recorded, otherwise the default)."""
    if tasks is None:
        return {}
    suite = _suite(tasks)
    return {"tasks_dir": suite.path, "suite_source": suite.source}


@app.command("validate-tasks")
def validate_tasks_command(
    tasks: TasksOption = None,
    lock: Annotated[
        bool, typer.Option("--write-lock", help="Regenerate SUITE.lock in the folder when every check passes.")
    ] = False,
) -> None:
    """Schema-check, lock-check and replay every task (reference and unsafe trajectory); exit 1 on any problem."""
    from contextdelta.validation import print_report, validate_suite, write_lock

    suite = _suite(tasks)
    if not suite.path.is_dir():
        raise _fail(f"{suite.source}: not a folder of task files", 1)
    if lock and suite.packaged:
        raise _fail(
            f"--write-lock: {suite.source} is a suite shipped in the package; give its folder with --tasks DIR", 2
        )
    report = validate_suite(suite.path, writing_lock=lock)
    wide = console if console.is_terminal else Console(width=160)
    print_report(report, wide, suite.source)
    if not report.ok:
        raise typer.Exit(1)
    if lock:
        from contextdelta.tasks import read_lock

        had_generator = report.lock_found and read_lock(report.lock_path).generator is not None
        written = write_lock(report)
        wide.print(f"wrote {written}")
        if had_generator and read_lock(written).generator is None:
            wide.print(
                "dropped its generator line: the tasks are no longer exactly what its generate-tasks arguments "
                "generate (regenerate the suite to keep it)"
            )


@app.command("suites")
def suites_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print the suites as JSON.")] = False,
) -> None:
    """List the task suites shipped in the package (use one with --tasks package:NAME), with their suite hashes."""
    from contextdelta.tasks import packaged_suites, summarize_suite

    summaries = [summarize_suite(name, path) for name, path in packaged_suites().items()]
    if not summaries:
        raise _fail("this installation ships no task suites (a broken install?); give a folder with --tasks DIR", 1)
    if as_json:
        rows = [
            {
                "name": s.name,
                "tasks_option": s.source,
                "tasks": s.tasks,
                "suite_sha256": s.suite_hash,
                "lock_matches": s.lock_matches,
                "generator": s.generator,
            }
            for s in summaries
        ]
        typer.echo(json.dumps(rows, indent=2, sort_keys=True))
    else:
        table = Table(title="Packaged task suites")
        for column in ("--tasks", "tasks", "suite hash", "lock", "made by"):
            table.add_column(column, no_wrap=column == "suite hash")
        for s in summaries:
            made_by = f"generate-tasks (generator {s.generator.get('version')})" if s.generator else "hand-written"
            lock = "matches" if s.lock_matches else "[red]differs[/red]"
            table.add_row(s.source, str(s.tasks), s.suite_hash, lock, made_by)
        Console(width=max(console.width, 150)).print(table)
    if any(not s.lock_matches or s.problems for s in summaries):
        raise _fail("a packaged suite does not match its SUITE.lock; run validate-tasks --tasks package:NAME", 1)


def _schema_bounds(model: type[BaseModel], field: str) -> tuple[float | None, bool, float | None, bool]:
    """(low, low exclusive, high, high exclusive) of a pydantic field's numeric constraints, from its JSON schema
    (which also sees the constraints of an optional ``Annotated`` type)."""
    schema = model.model_json_schema(mode="validation")["properties"][field]
    for part in [schema, *schema.get("anyOf", [])]:
        if any(k in part for k in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")):
            low = part.get("minimum", part.get("exclusiveMinimum"))
            high = part.get("maximum", part.get("exclusiveMaximum"))
            return low, "exclusiveMinimum" in part, high, "exclusiveMaximum" in part
    raise ValueError(f"{model.__name__}.{field} declares no numeric range")


def _number(value: float) -> str:
    """A bound or a value as written: integers in full (a 64-bit seed's bound is not 9.22337e+18), floats short."""
    return str(value) if isinstance(value, int) else f"{value:g}"


def _describe_range(low: float | None, low_open: bool, high: float | None, high_open: bool) -> str:
    if low is not None and high is not None and (low_open or high_open):
        above = f"greater than {_number(low)}" if low_open else f"at least {_number(low)}"
        below = f"less than {_number(high)}" if high_open else f"at most {_number(high)}"
        return f"{above} and {below}"
    if low is not None and high is not None:
        return f"from {_number(low)} to {_number(high)}"
    if low is not None:
        return f"greater than {_number(low)}" if low_open else f"at least {_number(low)}"
    assert high is not None
    return f"less than {_number(high)}" if high_open else f"at most {_number(high)}"


def _refuse_outside(value: Any, low: float | None, low_open: bool, high: float | None, high_open: bool) -> Any:
    if isinstance(value, float) and not math.isfinite(value):  # nan passes every comparison, inf an open end
        raise typer.BadParameter(
            f"{value} is not a finite number; allowed: {_describe_range(low, low_open, high, high_open)}"
        )
    below = low is not None and (value <= low if low_open else value < low)
    above = high is not None and (value >= high if high_open else value > high)
    if value is not None and (below or above):
        raise typer.BadParameter(
            f"{_number(value)} is out of range; allowed: {_describe_range(low, low_open, high, high_open)}"
        )
    return value


def _within(model: Callable[[], type[BaseModel]], field: str) -> Callable[[Any], Any]:
    """A typer callback refusing a value outside the range ``model().field`` declares (the one definition of the
    range); the model is imported only when the flag is given, so parsing stays cheap."""

    def check(value: Any) -> Any:
        return value if value is None else _refuse_outside(value, *_schema_bounds(model(), field))

    return check


def _seconds(maximum: float) -> Callable[[Any], Any]:
    """A typer callback for a duration in seconds: greater than 0 (typer's ``min`` is inclusive only) and at most
    ``maximum`` (a huge one lets a stalled endpoint or agent block a run without end)."""
    return lambda value: _refuse_outside(value, 0, True, maximum, False)


AGENT_MAX_TIMEOUT_S = 86_400.0
"""run-external's longest per-episode limit for the agent command (a day)."""
AGENT_MAX_GRACE_S = 3_600.0
"""run-external's longest --exit-grace-s and --stop-grace-s (an hour)."""
PROXY_MAX_TIMEOUT_S = 3_600.0
"""serve's longest upstream timeout (an hour, as run-benchmark's per-call --timeout-s)."""


def _request_model() -> type[BaseModel]:
    from contextdelta.runner import BenchmarkRequest

    return BenchmarkRequest


def _strategy_params_model() -> type[BaseModel]:
    from contextdelta.rundir import StrategyParams

    return StrategyParams


def _limits_model() -> type[BaseModel]:
    from contextdelta.providers import EndpointLimits

    return EndpointLimits


def _request_range(field: str) -> Callable[[Any], Any]:
    return _within(_request_model, field)


def _suite_arguments_model() -> type[BaseModel]:
    from contextdelta.tasks.families import SuiteArguments

    return SuiteArguments


def _suite_range(field: str) -> Callable[[Any], Any]:
    return _within(_suite_arguments_model, field)


GENERATE_MAX_TASKS = 5_000
"""generate-tasks' default --max-tasks: 18 times the shipped horizon suite, a few minutes of work on a laptop."""


def _progress_console() -> Console:
    """Where a long command's progress goes: stderr, so stdout keeps only its result."""
    return Console(stderr=True)


@app.command("generate-tasks")
def generate_tasks_command(
    family: Annotated[
        str | None, typer.Option("--family", help="Family name, a comma-separated list, or 'all' (see --list).")
    ] = None,
    horizons: Annotated[
        str, typer.Option(help="Comma-separated horizons (agent calls), e.g. 1,2,4,8,16.")
    ] = "1,2,4,8,16",
    per_cell: Annotated[
        int,
        typer.Option("--per-cell", help="Tasks per (family, horizon) cell.", callback=_suite_range("per_cell")),
    ] = 8,
    seed: Annotated[
        int, typer.Option(help="Suite seed (content: names, amounts, ids).", callback=_suite_range("seed"))
    ] = 0,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Output folder: <world>/<id>.yaml and SUITE.lock.", parser=path_flag, metavar=PATH_METAVAR
        ),
    ] = None,
    list_families: Annotated[bool, typer.Option("--list", help="List the families and their parameters.")] = False,
    max_tasks: Annotated[
        int,
        typer.Option(
            "--max-tasks",
            min=1,
            help="Refuse a grid (families x horizons x per cell) of more tasks than this: a typo should not write for "
            "hours. Raise it to generate a bigger suite on purpose (each task is replayed before it is written).",
        ),
    ] = GENERATE_MAX_TASKS,
) -> None:
    """Write a deterministic, locked, validated suite of task files from task families."""
    from pydantic import ValidationError
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from contextdelta.tasks.families import (
        FAMILIES,
        MAX_DISTRACTORS,
        MAX_HORIZON,
        SuiteArguments,
        generate_suite,
    )
    from contextdelta.validation import task_report

    if list_families:
        table = Table(title="Task families (horizon h: agent calls from the counted observation to the write)")
        for column in ("family", "world", "hazard", "mutation", "timing", "h counts from"):
            table.add_column(column)
        for item in FAMILIES.values():
            table.add_row(
                item.name,
                item.world,
                item.hazard.value,
                ", ".join(item.mutations),
                ", ".join(t.value for t in item.timings),
                item.counts_from,
            )
        wide = console if console.is_terminal else Console(width=200)
        wide.print(table)
        wide.print(
            f"parameters: horizon 1-{MAX_HORIZON} (--horizons; a cell whose tasks would not validate, as the order "
            "families' from about h=23 and the calendar ones' from about h=37, is refused before anything is "
            f"written), distractors 1-{MAX_DISTRACTORS} (cycled 1,2,3 within a cell), "
            "mutation and timing (cycled within a cell), seed (--seed; per task seed*1000+index)",
            soft_wrap=True,
        )
        return
    if family is None or out is None:
        raise _fail("give --family and --out (or --list to see the families)", 2)
    names = sorted(FAMILIES) if family.strip() == "all" else _csv(family, "--family") or []
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        raise _fail(f"--family: unknown family {unknown[0]!r}; known: {', '.join(sorted(FAMILIES))}", 2)
    words = _csv(horizons, "--horizons") or []
    # isdigit() alone passes "²", which int() refuses
    bad = next((w for w in words if not (w.isascii() and w.isdigit())), None)
    if bad is not None or not words:
        raise _fail(f"--horizons: {bad!r} is not a whole number; give e.g. 1,2,4,8,16", 2)
    numbers = [int(w) for w in words]
    try:
        arguments = SuiteArguments(families=tuple(names), horizons=tuple(numbers), per_cell=per_cell, seed=seed)
    except ValidationError as exc:  # the horizons' range and repeats, families given twice
        error = exc.errors(include_url=False)[0]
        flag = {"families": "--family", "horizons": "--horizons"}.get(str(error["loc"][0]) if error["loc"] else "")
        raise _fail(f"{flag or '--horizons'}: {error['msg']}", 2) from None
    planned = len(arguments.families) * len(arguments.horizons) * arguments.per_cell
    if planned > max_tasks:
        raise _fail(
            f"--max-tasks: {plural(len(names), 'family', 'families')} x {plural(len(numbers), 'horizon')} x "
            f"{per_cell} per cell is {planned:,} tasks, more than the limit of {max_tasks:,}; nothing was written. "
            f"Lower --per-cell, --horizons or --family, or give --max-tasks {planned} if you mean it",
            2,
        )
    progress_console = _progress_console()
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=progress_console,
        transient=True,
        disable=not progress_console.is_terminal,  # piped or in a log: no progress lines, only the result
    )
    with progress:
        suite = generate_suite(arguments, [FAMILIES[n] for n in arguments.families])
        # every task is checked before anything is written: a family whose work cannot stretch to a horizon (its
        # intermediate writes start repeating, or hit a domain limit) is a refusal, never an invalid suite on disk
        failing: dict[tuple[str, int], tuple[int, str]] = {}
        checked = {}
        replaying = progress.add_task("replaying each task", total=len(suite.tasks))
        for made in suite.tasks:
            info = made.task.evaluator.family
            assert info is not None
            row = task_report(f"{made.task.world}/{made.task.id}.yaml", made.task)
            checked[made.task.content_hash] = row
            if row.problems:
                count, first = failing.get((info.name, info.horizon), (0, row.problems[0].render()))
                failing[(info.name, info.horizon)] = (count + 1, first)
            progress.advance(replaying)
        if not failing:
            progress.add_task(f"writing and validating {plural(len(suite.tasks), 'task file')}", total=None)
            written = _write_generated(suite, out, checked)
    if failing:
        (name, _), (_, first) = next(iter(failing.items()))
        by_family: dict[str, list[str]] = {}
        for (f, h), (n, _) in failing.items():
            by_family.setdefault(f, []).append(f"h={h}" if n == per_cell else f"h={h} ({n} of {per_cell})")
        cells = "; ".join(
            f"{f} at {', '.join(hs[:8])}{f' and {len(hs) - 8} more horizons' if len(hs) > 8 else ''}"
            for f, hs in by_family.items()
        )
        raise _fail(
            f"--horizons: these family cells make tasks that do not validate, so nothing was written: {cells}. "
            f"Family {name}'s work does not stretch that far (first problem: {first}); use smaller horizons for it",
            2,
        )
    if isinstance(written, str):
        raise _fail(written, 2)
    report = written
    if not report.ok:
        for problem in report.problems[:20]:
            Console(stderr=True).print(f"[red]error[/red] {problem.render()}", highlight=False, soft_wrap=True)
        raise _fail(f"the generated suite in {out} does not validate ({plural(len(report.problems), 'problem')})", 1)
    console.print(
        f"wrote {len(suite.tasks)} task{'' if len(suite.tasks) == 1 else 's'} to {out} ({len(names)} "
        f"{'family' if len(names) == 1 else 'families'} x {len(numbers)} horizon{'' if len(numbers) == 1 else 's'} x "
        f"{per_cell}); "
        f"all pass validate-tasks; suite hash {report.suite_hash}",
        soft_wrap=True,
        highlight=False,
    )


def _write_generated(suite: GeneratedSuite, out: Path, checked: dict[str, TaskReport]) -> SuiteReport | str:
    """Write a generated suite and validate what was written (each task was replayed before: ``checked``); the
    refusal's text when the folder cannot take it."""
    from contextdelta.tasks.families import SuiteFolderError, write_suite
    from contextdelta.validation import validate_suite

    try:
        write_suite(suite, out)
    except SuiteFolderError as exc:
        return f"--out: {exc}"
    except OSError as exc:  # under a file, in a folder that cannot be written
        return f"--out {out}: {exc.strerror or exc}; give a folder you can write to"
    return validate_suite(out, checked=checked)  # the files and the lock


def _given(**values: Any) -> dict[str, Any]:
    """The options the user gave (not None): the rest keep the request model's defaults (one definition)."""
    return {name: value for name, value in values.items() if value is not None}


def _refuse_blank(values: dict[str, str | None]) -> None:
    """Refuse a text flag given as ``""`` (or blanks): it names nothing, and read as "not given" it would fall back
    to the default (``--base-url ""`` sent the run to the default OpenAI endpoint)."""
    for flag, value in values.items():
        if value is not None and not value.strip():
            raise _fail(f"{flag} {value!r} names nothing: give a value, or leave {flag} out (the default)", 2)


def _csv(value: str | None, flag: str) -> list[str] | None:
    """The names of a comma-separated option (None when it was not given); a value that names nothing (``""``,
    ``","``) is refused, never read as "the default"."""
    if value is None:
        return None
    names = [v.strip() for v in value.split(",")]
    if not any(names):
        raise _fail(f"{flag} {value!r} names nothing: give a comma-separated list, or leave {flag} out", 2)
    if "" in names:  # "a,,b" or "a," is a typo, never a list of the names that are there
        raise _fail(
            f"{flag} {value!r} has an empty item: remove the extra comma, e.g. {','.join(filter(None, names))}", 2
        )
    return names


# Options shared by the commands that write a run directory (run-benchmark, run-external, serve-world).
TaskIdsOption = Annotated[str | None, typer.Option(help="Comma-separated task ids (default: every task).")]
ProtectionModesOption = Annotated[str | None, typer.Option(help="Comma-separated: unprotected,freshness_contract.")]
MaxStepsOption = Annotated[
    int | None, typer.Option(help="Override every task's step limit.", callback=_request_range("max_steps"))
]


def _run_seed(value: int | None) -> int | None:
    """A run seed is a signed 64-bit integer: the trace store and every tool that reads the manifest hold it."""
    if value is not None and not SEED_MIN <= value <= SEED_MAX:
        raise typer.BadParameter(f"{value} is not a 64-bit integer; allowed: {SEED_MIN} to {SEED_MAX}")
    return value


SeedOption = Annotated[
    int | None, typer.Option(help="Run seed, a 64-bit integer (default CONTEXTDELTA_SEED).", callback=_run_seed)
]
RunResultsDirOption = Annotated[
    Path | None,
    typer.Option(help="Where run directories go (default results/).", parser=path_flag, metavar=PATH_METAVAR),
]
ResumeOption = Annotated[
    str | None,
    typer.Option(
        help="Continue run RUN_ID (its name or path): run its missing episodes (run-benchmark: with --retry-failed "
        "also its failed trials)."
    ),
]
QuietOption = Annotated[bool, typer.Option("--quiet", help="No progress bar (for CI).")]
StoreUrlOption = Annotated[
    str | None, typer.Option(help="Trace store URL (default CONTEXTDELTA_DATABASE_URL).", show_default=False)
]
NoStoreOption = Annotated[
    bool, typer.Option("--no-store", help="Do not write episodes to the trace store (the run directory only).")
]


@app.command("run-benchmark")
def run_benchmark_command(
    tasks: TasksOption = None,
    strategies: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated: full_history,last_n,semantic_summary,typed_state_digest,tool_result_clearing,"
            "token_budget_trim (default: these six), installed plug-ins by name, or package.module:factory."
        ),
    ] = None,
    protection_modes: ProtectionModesOption = None,
    repeats: Annotated[
        int | None,
        typer.Option(help="Repeats per (task, strategy, mode). Default 3.", callback=_request_range("repeats")),
    ] = None,
    task_ids: TaskIdsOption = None,
    limit: Annotated[
        int | None,
        typer.Option(
            help="Smoke tests only: run at most this many tasks (results are not comparable).",
            callback=_request_range("limit"),
        ),
    ] = None,
    max_steps: MaxStepsOption = None,
    concurrency: Annotated[int, typer.Option(help="Episodes run at once.", callback=_request_range("concurrency"))] = 4,
    seed: SeedOption = None,
    model: Annotated[str | None, typer.Option(help="Model name (default CONTEXTDELTA_MODEL).")] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint (CONTEXTDELTA_BASE_URL).")] = None,
    summary_model: Annotated[str | None, typer.Option(help="Model for semantic_summary (default: --model).")] = None,
    temperature: Annotated[
        float | None,
        typer.Option(help="Sampling temperature, 0 to 2 (default 0).", callback=_request_range("temperature")),
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option(help="Completion token cap per model call.", callback=_request_range("max_tokens"))
    ] = None,
    timeout_s: Annotated[
        float,
        typer.Option(
            help="Per-call timeout in seconds, at most 3600 (the endpoint check's too).",
            callback=_request_range("timeout_s"),
        ),
    ] = 120.0,
    max_retries: Annotated[
        int | None,
        typer.Option(
            help="Retries of a failed model call (429, 5xx, timeouts, dropped connections; default 5).",
            callback=_request_range("max_retries"),
        ),
    ] = None,
    max_consecutive_failures: Annotated[
        int | None,
        typer.Option(
            help="Circuit breaker: stop starting episodes after this many failed trials in a row (default 10).",
            callback=_request_range("max_consecutive_failures"),
        ),
    ] = None,
    max_failed_share: Annotated[
        float | None,
        typer.Option(
            help="Circuit breaker: stop once failed trials pass this share of a session's finished episodes, "
            "counted from its 20th finished episode (default 0.5; 1: never).",
            callback=_request_range("max_failed_share"),
        ),
    ] = None,
    provider: Annotated[str, typer.Option(help="Provider kind (openai-compatible HTTP).")] = "openai",
    results_dir: RunResultsDirOption = None,
    max_cost_usd: Annotated[
        float | None,
        typer.Option(
            help="Run budget in USD: no episode starts, and no running episode makes another model call "
            "(it ends budget_exceeded), once this much is spent; with --workers/Ray, episodes in other workers "
            "can overshoot by their calls before the driver records them.",
            callback=_request_range("max_cost_usd"),
        ),
    ] = None,
    max_episode_cost_usd: Annotated[
        float | None,
        typer.Option(help="Stop an episode at this cost.", callback=_request_range("max_episode_cost_usd")),
    ] = None,
    price_table: Annotated[
        Path | None,
        typer.Option(help="JSON price table overriding the built-in one.", parser=path_flag, metavar=PATH_METAVAR),
    ] = None,
    last_n: Annotated[
        int | None,
        typer.Option(
            help="last_n: tool groups kept (default 3; 0 keeps none).",
            callback=_within(_strategy_params_model, "last_n"),
        ),
    ] = None,
    summary_trigger: Annotated[
        int | None,
        typer.Option(
            help="Summary/digest/tool-result clearing once more groups than this (default 6).",
            callback=_within(_strategy_params_model, "summary_trigger"),
        ),
    ] = None,
    summary_keep: Annotated[
        int | None,
        typer.Option(
            help="Groups kept verbatim after a summary/digest; tool results kept by clearing (default 3).",
            callback=_within(_strategy_params_model, "summary_keep"),
        ),
    ] = None,
    token_budget: Annotated[
        int | None,
        typer.Option(
            help="token_budget_trim: prompt tokens the kept history may take (default 1200).",
            callback=_within(_strategy_params_model, "token_budget"),
        ),
    ] = None,
    strategy_param: Annotated[
        list[str] | None,
        typer.Option(
            "--strategy-param",
            help="NAME.KEY=VALUE: one strategy parameter (VALUE read as JSON when it parses); repeatable.",
        ),
    ] = None,
    resume: ResumeOption = None,
    retry_failed: Annotated[
        bool,
        typer.Option(
            "--retry-failed",
            help="With --resume: also re-run the run's failed trials (provider, context-window, budget or harness "
            "errors) with their episode seeds; each re-run is a new attempt, the earlier ones stay in "
            "raw_runs.jsonl as superseded attempts.",
        ),
    ] = False,
    shard: Annotated[
        str | None,
        typer.Option(help="Run only part I of N of the plan (I/N, e.g. 2/3); join the parts with `merge`."),
    ] = None,
    controls: Annotated[
        str | None,
        typer.Option(
            help="Control conditions run beside the matrix, comma-separated: no_mutation (every episode again with "
            "the tasks' hidden mutations off; reported next to the main conditions)."
        ),
    ] = None,
    executor: Annotated[
        str, typer.Option(help="local (this machine) or ray (a Ray cluster; the `ray` extra).")
    ] = "local",
    workers: Annotated[
        int | None,
        typer.Option(
            help="Worker processes (local) or actors (ray) running episodes; default CONTEXTDELTA_WORKERS, else "
            "the number of cores (ray: the cluster's CPUs); at most --concurrency; 1 runs them in this process.",
            show_default=False,
            callback=_request_range("workers"),
        ),
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(help="With --executor ray: an existing cluster (host:port or ray://...); default a local one."),
    ] = None,
    max_concurrent_requests: Annotated[
        int | None,
        typer.Option(
            help="Endpoint limit: HTTP requests in flight at once, across all workers.",
            callback=_within(_limits_model, "max_concurrent_requests"),
        ),
    ] = None,
    requests_per_minute: Annotated[
        float | None,
        typer.Option(
            help="Endpoint limit: requests per minute (evenly spaced), across all workers.",
            callback=_within(_limits_model, "requests_per_minute"),
        ),
    ] = None,
    tokens_per_minute: Annotated[
        float | None,
        typer.Option(
            help="Endpoint limit: prompt + completion tokens per minute, across all workers.",
            callback=_within(_limits_model, "tokens_per_minute"),
        ),
    ] = None,
    adaptive_concurrency: Annotated[
        bool,
        typer.Option(
            "--adaptive-concurrency",
            help="Halve the endpoint's concurrent requests on 429/5xx and add one back per window of successes.",
        ),
    ] = False,
    allow_unlocked: AllowUnlockedOption = False,
    quiet: QuietOption = False,
    database_url: StoreUrlOption = None,
    no_store: NoStoreOption = False,
) -> None:
    """Run tasks x strategies x protection modes x repeats; the last line printed is the run directory. Every
    validate-tasks check of the suite runs first (a problem is exit 2 and nothing is written)."""
    from contextdelta.context import StrategyError, parse_strategy_params
    from contextdelta.runner import BenchmarkRequest, run_benchmark

    _refuse_blank(
        {
            "--base-url": base_url,
            "--model": model,
            "--summary-model": summary_model,
            "--provider": provider,
            "--executor": executor,
            "--ray-address": ray_address,
        }
    )
    try:
        overrides = parse_strategy_params(strategy_param) if strategy_param else None
    except StrategyError as exc:
        raise _fail(str(exc), 2) from None
    request = BenchmarkRequest(
        **_suite_request(tasks),
        task_ids=_csv(task_ids, "--task-ids"),
        strategies=_csv(strategies, "--strategies"),
        protection_modes=_csv(protection_modes, "--protection-modes"),
        repeats=repeats,
        limit=limit,
        max_steps=max_steps,
        concurrency=concurrency,
        seed=seed,
        provider=provider,
        model=model,
        base_url=base_url,
        summary_model=summary_model,
        temperature=temperature,
        max_tokens=max_tokens,
        timeout_s=timeout_s,
        max_retries=max_retries,
        results_dir=results_dir,
        max_cost_usd=max_cost_usd,
        max_episode_cost_usd=max_episode_cost_usd,
        price_table=price_table,
        last_n=last_n,
        summary_trigger=summary_trigger,
        summary_keep=summary_keep,
        token_budget=token_budget,
        strategy_params=overrides,
        resume=resume,
        retry_failed=retry_failed,
        shard=shard,
        controls=_csv(controls, "--controls"),
        executor=executor,
        workers=workers,
        ray_address=ray_address,
        max_concurrent_requests=max_concurrent_requests,
        requests_per_minute=requests_per_minute,
        tokens_per_minute=tokens_per_minute,
        adaptive_concurrency=adaptive_concurrency,
        allow_unlocked=allow_unlocked,
        **_given(max_consecutive_failures=max_consecutive_failures, max_failed_share=max_failed_share),
    )
    _run_with_recorders(
        lambda recorders: run_benchmark(request, recorders=recorders),
        database_url=database_url,
        no_store=no_store,
        quiet=quiet,
        retry_hint=True,
        stdout_is_the_result=True,
    )


def _resume_lines(outcome: RunOutcome, resume_hint: str, retry_hint: bool) -> list[str]:
    """How to go on with a run that stopped early, or that finished with failed trials: the ``--resume`` line, with
    ``--retry-failed`` where that is what is left to do (a session that was re-running failed trials), or a word
    that it would also re-run them."""
    manifest, path = outcome.manifest, outcome.path
    failed = manifest.counts.failed
    trials = f"{failed} failed trial{'s' if failed != 1 else ''}"
    if manifest.stop_reason:
        if retry_hint and outcome.retried:
            return [f"Resume it with: contextdelta {resume_hint} {path} --retry-failed"]
        lines = [f"Resume it with: contextdelta {resume_hint} {path}"]
        if retry_hint and failed:
            lines.append(f"(add --retry-failed to re-run its {trials} as well)")
        return lines
    if retry_hint and failed:
        return [f"Re-run its {trials} with: contextdelta {resume_hint} {path} --retry-failed"]
    return []


def _check_database_url(url: str | None, flag: str | None) -> None:
    """Refuse (exit 2, before anything runs) a trace store URL that is not one: a store that cannot be reached is a
    warning during the run, but a malformed setting is an error like every other invalid setting. A check of the
    form only (``dialect[+driver]://...``), so that a run refused for another reason never loads SQLAlchemy."""
    if not url:
        return
    import re

    if re.match(r"^[A-Za-z][A-Za-z0-9]*(\+[A-Za-z0-9_]+)?://", url) is None:
        raise _fail(
            f"{flag or 'CONTEXTDELTA_DATABASE_URL'} is not a database URL; give e.g. sqlite:///results/contextdelta.db "
            "or postgresql+psycopg://user@host/db (pip install 'contextdelta[postgres]'), or pass --no-store",
            2,
        )


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Send stdout to stderr for the length of the block: Python's ``sys.stdout`` and, where stdout is a real
    file descriptor, the descriptor itself (what a worker process started meanwhile inherits, and what C code
    writes to)."""
    sys.stdout.flush()
    try:
        fd = sys.stdout.fileno()
        target = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a captured stream (tests): Python's level is all there is
        with contextlib.redirect_stdout(sys.stderr):
            yield
        return
    saved = os.dup(fd)
    try:
        os.dup2(target, fd)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, fd)
        os.close(saved)


def _run_with_recorders(
    run: Callable[[list[Recorder]], RunOutcome],
    *,
    database_url: str | None,
    no_store: bool,
    quiet: bool,
    resume_hint: str = "run-benchmark --resume",
    retry_hint: bool = False,
    out: Callable[[str], None] = typer.echo,
    stdout_is_the_result: bool = False,
) -> None:
    """Run a benchmark-shaped command with the trace store and the progress bar as recorders, print the summary
    to stderr and the run directory (the last line) through ``out``; exit 2 for refusals, 3 for a run that stopped
    early, 4 for one whose every episode is a failed trial, 130 if interrupted. ``stdout_is_the_result``: while
    the run runs, whatever writes to stdout (a strategy plug-in that prints, on import or in its transform, here or
    in a worker process) goes to stderr, so the run directory stays the only line on stdout."""
    from rich.markup import escape

    from contextdelta.rundir import OpenedLater, RunStart
    from contextdelta.runner import EXIT_ALL_FAILED, EXIT_INCOMPLETE, BenchmarkError, ProgressDisplay

    err = Console(stderr=True)
    settings = _settings()
    recorders: list[Recorder] = []
    opened: list[Any] = []  # the store, once the run opened it

    def open_store(run: RunStart) -> Recorder | None:
        from contextdelta.store import StoreRecorder  # sqlalchemy: only once a run really starts

        url = database_url or settings.database_url_for(run.path.parent)  # the results folder really in use
        store = StoreRecorder.open(url, lambda text: err.print(f"[yellow]warning:[/yellow] {text}"))
        opened.extend([store] if store is not None else [])
        return store

    if not no_store:  # the run directory stays the source of truth; the store gets a copy of each episode
        _check_database_url(database_url or settings.database_url, "--database-url" if database_url else None)
        # opened when the run opens: a run refused by its checks opens (and creates) no database
        recorders.append(OpenedLater(open_store))
    display = None if quiet else ProgressDisplay(err)
    if display is not None:
        recorders.append(display)
    try:
        with _stdout_to_stderr() if stdout_is_the_result else contextlib.nullcontext():
            outcome = run(recorders)
    except BenchmarkError as exc:
        err.print(f"[red]error:[/red] {escape(exc.message)}", highlight=False, soft_wrap=True)
        raise typer.Exit(exc.exit_code) from None
    finally:  # a run refused before it started never reached the recorders' finish
        for store in opened:
            store.close()
        if display is not None:
            display.stop()
    for repair in outcome.repairs:  # what a killed session left and this one put right before it went on
        err.print(
            f"[yellow]repaired:[/yellow] run {outcome.manifest.run_group_id}: {escape(repair)}",
            highlight=False,
            soft_wrap=True,
        )
    counts, shard = outcome.manifest.counts, outcome.manifest.shard
    err.print(
        f"{counts.finished}/{counts.planned} episodes, {counts.succeeded} succeeded, "
        f"{plural(counts.failed, 'failed trial')}; "
        f"status {outcome.manifest.status.value}"
        + (f"; shard {shard.index}/{shard.count}, not the whole plan" if shard is not None and shard.count > 1 else ""),
        highlight=False,
    )
    if outcome.superseded:
        retried = {r.run_id for r in outcome.superseded}
        again = sum(r.failed for r in outcome.records if r.run_id in retried)
        err.print(
            f"{plural(len(retried), 'episode')} {'was' if len(retried) == 1 else 'were'} retried "
            f"({plural(len(outcome.superseded), 'superseded attempt')} kept in "
            f"raw_runs.jsonl); {len(retried) - again} now {'has' if len(retried) - again == 1 else 'have'} a verdict, "
            f"{again} failed again",
            highlight=False,
        )
    for note in (outcome.note, outcome.other_models()):
        if note:
            err.print(f"[yellow]note:[/yellow] {escape(note)}", highlight=False, soft_wrap=True)
    if outcome.manifest.stop_reason:
        err.print(
            f"run {outcome.manifest.run_group_id} is incomplete: {escape(outcome.manifest.stop_reason)}.",
            highlight=False,
            soft_wrap=True,
        )
    everything_failed = outcome.all_failed()
    if everything_failed is not None:
        err.print(f"[red]error:[/red] {escape(everything_failed)}.", highlight=False, soft_wrap=True)
    for line in _resume_lines(outcome, resume_hint, retry_hint):
        err.print(escape(line), highlight=False, soft_wrap=True)
    out(str(outcome.path))
    if outcome.interrupted:
        raise typer.Exit(130)
    if outcome.manifest.stop_reason:
        raise typer.Exit(EXIT_INCOMPLETE)
    if everything_failed is not None:
        raise typer.Exit(EXIT_ALL_FAILED)


# ---- external agents over MCP ----------------------------------------------------------------------------------


def _mcp_or_fail() -> None:
    from contextdelta.mcp import McpUnavailable, require_mcp

    try:
        require_mcp()
    except McpUnavailable as exc:
        raise _fail(str(exc), 2) from None


def _agent_or_fail(agent: str) -> None:
    from contextdelta.agent import external_strategy

    try:
        external_strategy(agent)
    except ValueError as exc:
        raise _fail(str(exc), 2) from None


@app.command("serve-world")
def serve_world_command(
    task: Annotated[str, typer.Option("--task", help="The task id (a file tasks/<world>/<id>.yaml).")],
    mode: Annotated[str, typer.Option("--mode", help="Protection mode: unprotected or freshness_contract.")],
    tasks: TasksOption = None,
    agent: Annotated[str, typer.Option(help="Your agent's name; the episode's strategy is external:<agent>.")] = (
        "agent"
    ),
    transport: Annotated[str, typer.Option(help="streamable-http (loopback) or stdio.")] = "streamable-http",
    port: Annotated[int, typer.Option(help="Loopback port for streamable-http (0: a free one).", min=0, max=65535)] = 0,
    max_steps: MaxStepsOption = None,
    seed: SeedOption = None,
    results_dir: RunResultsDirOption = None,
    resume: Annotated[
        str | None,
        typer.Option(
            help="Finish serve-world run RUN_ID (its name or path) that was killed: its episode, when recorded, is "
            "kept and the run finalised; one cut off before it ended is served again."
        ),
    ] = None,
    allow_unlocked: AllowUnlockedOption = False,
    database_url: StoreUrlOption = None,
    no_store: NoStoreOption = False,
) -> None:
    """Serve one episode's world as an MCP server (its tools, the task as instructions and the `task` prompt, a
    `finish` tool), then grade it and write it as a one-episode run group. HTTP prints `ready <URL>`; the episode
    ends on `finish`, the step limit, Ctrl-C (HTTP) or the session closing (stdio), and is written as soon as it
    ends. The last line printed (stderr for stdio) is the run directory."""
    from contextdelta.mcp import HTTP, STDIO, agent_info, serve_world
    from contextdelta.runner import BenchmarkRequest, SeveralProblems, UnknownTaskIdsError

    _mcp_or_fail()
    _agent_or_fail(agent)
    if transport not in (HTTP, STDIO):
        raise _fail(f"--transport {transport!r}: use {HTTP} or {STDIO}", 2)
    modes = [m.value for m in ProtectionMode]
    if mode not in modes:
        raise _fail(f"--mode {mode!r}: use {' or '.join(modes)}", 2)
    # stdio: stdout is the MCP session, so the run directory (the last line) goes to stderr, as it is (never
    # wrapped at the console's width, never read as markup)
    out: Callable[[str], None] = typer.echo if transport == HTTP else (lambda text: typer.echo(text, err=True))

    def ready(url: str) -> None:
        if transport == HTTP:
            print(f"ready {url}", flush=True)
        else:
            typer.echo(f"serving task {task} ({mode}) on stdio", err=True)

    request = BenchmarkRequest(
        **_suite_request(tasks),
        task_ids=[task],
        protection_modes=[mode],
        repeats=1,
        max_steps=max_steps,
        concurrency=1,
        seed=seed,
        results_dir=results_dir,
        resume=resume,
        allow_unlocked=allow_unlocked,
        external_agent=agent_info(agent, transport=transport),
    )

    def serve(recorders: list[Recorder]) -> RunOutcome:
        try:
            return serve_world(request, port=port, ready=ready, recorders=recorders)
        except (UnknownTaskIdsError, SeveralProblems) as exc:  # this command's flag is --task
            raise exc.for_flag("--task") from None

    _run_with_recorders(
        serve,
        database_url=database_url,
        no_store=no_store,
        quiet=True,
        out=out,
        resume_hint=f"serve-world --task {task} --mode {mode} --transport {transport} --agent {agent} --resume",
    )


@app.command("run-external")
def run_external_command(
    agent_cmd: Annotated[
        str,
        typer.Option(
            "--agent-cmd",
            help="Shell command of your agent, run once per episode with CONTEXTDELTA_MCP_URL (and "
            "CONTEXTDELTA_TASK_ID, CONTEXTDELTA_PROTECTION_MODE, CONTEXTDELTA_RUN_ID, CONTEXTDELTA_EPISODE_SEED) set.",
        ),
    ],
    agent: Annotated[str, typer.Option(help="Your agent's name; the strategy is external:<agent>.")] = "agent",
    tasks: TasksOption = None,
    task_ids: TaskIdsOption = None,
    protection_modes: ProtectionModesOption = None,
    repeats: Annotated[
        int | None,
        typer.Option(help="Repeats per (task, mode). Default 3.", callback=_request_range("repeats")),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(help="Smoke tests only: run at most this many tasks.", callback=_request_range("limit")),
    ] = None,
    max_steps: MaxStepsOption = None,
    concurrency: Annotated[
        int, typer.Option(help="Episodes (agent commands) run at once.", callback=_request_range("concurrency"))
    ] = 1,
    timeout_s: Annotated[
        float,
        typer.Option(
            help="Per-episode limit for the agent command, in seconds (at most a day: 86400). Once the episode "
            "is over (finish, the step limit) the command has --exit-grace-s to exit, then it is stopped (SIGTERM, "
            "SIGKILL --stop-grace-s later; no failed trial for that).",
            callback=_seconds(AGENT_MAX_TIMEOUT_S),
        ),
    ] = 600.0,
    exit_grace_s: Annotated[
        float,
        typer.Option(
            help="Seconds the agent command still has to exit on its own once its episode is over (finish, the step "
            "limit) before it is stopped; 0 to 3600, recorded in the manifest.",
            callback=lambda value: _refuse_outside(value, 0, False, AGENT_MAX_GRACE_S, False),
        ),
    ] = 5.0,
    stop_grace_s: Annotated[
        float,
        typer.Option(
            help="Seconds between SIGTERM and SIGKILL when the agent command (or what it left running) is stopped; "
            "0 to 3600, recorded in the manifest.",
            callback=lambda value: _refuse_outside(value, 0, False, AGENT_MAX_GRACE_S, False),
        ),
    ] = 2.0,
    seed: SeedOption = None,
    results_dir: RunResultsDirOption = None,
    resume: ResumeOption = None,
    allow_unlocked: AllowUnlockedOption = False,
    quiet: QuietOption = False,
    database_url: StoreUrlOption = None,
    no_store: NoStoreOption = False,
) -> None:
    """Run tasks x protection modes x repeats with your agent: each episode's world served over MCP (streamable
    HTTP, a free loopback port) and your command run against it; a crashed or timed-out agent is a failed trial.
    The last line printed is the run directory."""
    from contextdelta.mcp import HTTP, agent_info, run_external
    from contextdelta.runner import BenchmarkRequest

    _mcp_or_fail()
    _agent_or_fail(agent)
    if not agent_cmd.strip():
        raise _fail("--agent-cmd is empty: give the command that runs your agent against $CONTEXTDELTA_MCP_URL", 2)
    request = BenchmarkRequest(
        **_suite_request(tasks),
        task_ids=_csv(task_ids, "--task-ids"),
        protection_modes=_csv(protection_modes, "--protection-modes"),
        repeats=repeats,
        limit=limit,
        max_steps=max_steps,
        concurrency=concurrency,
        seed=seed,
        results_dir=results_dir,
        resume=resume,
        allow_unlocked=allow_unlocked,
        external_agent=agent_info(
            agent,
            transport=HTTP,
            command=agent_cmd,
            timeout_s=timeout_s,
            exit_grace_s=exit_grace_s,
            stop_grace_s=stop_grace_s,
            secrets=_settings().secrets(),
        ),
    )
    _run_with_recorders(
        lambda recorders: run_external(
            request, agent_cmd, timeout_s=timeout_s, settings=_settings(), recorders=recorders
        ),
        database_url=database_url,
        no_store=no_store,
        quiet=quiet,
        resume_hint=f"run-external --agent {agent} --agent-cmd ... --resume",
    )


# ---- trace store, proxy, replay, attribution ------------------------------------------------------------------

db_app = typer.Typer(help="The trace store: migrations and imports.", no_args_is_help=True)
app.add_typer(db_app, name="db")

DatabaseUrlOption = Annotated[
    str | None, typer.Option("--database-url", help="SQLAlchemy URL (default CONTEXTDELTA_DATABASE_URL).")
]
ResultsDirOption = Annotated[
    Path | None,
    typer.Option(
        "--results-dir",
        help="Folder of run directories (default CONTEXTDELTA_RESULTS_DIR).",
        parser=path_flag,
        metavar=PATH_METAVAR,
    ),
]


def _fail(message: str, code: int) -> typer.Exit:
    from rich.markup import escape

    # messages quote user input and names like contextdelta[mcp]: never read them as markup
    Console(stderr=True).print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def _open_store(database_url: str | None, results_dir: Path | None = None) -> object:
    """The trace store at ``database_url``, else CONTEXTDELTA_DATABASE_URL, else in the results folder in use."""
    from contextdelta.store import StoreError, StoreUrlError, open_store

    try:
        return open_store(database_url or _settings().database_url_for(results_dir))
    except StoreError as exc:  # a URL naming something that is not a store is bad input (2), like a malformed one
        raise _fail(str(exc), 2 if isinstance(exc, StoreUrlError) else 1) from None


def _run_directory(run_id: str, results_dir: Path | None) -> Path:
    from contextdelta.rundir import RunIdError, run_dir

    try:
        return run_dir(results_dir or Path(_settings().results_dir), run_id)
    except RunIdError as exc:
        raise _fail(str(exc), 2) from None


def _episodes(run_id: str, results_dir: Path | None, run: str | None, what: str) -> list[object]:
    """The episodes of RUN_ID (or the one ``run`` names), exit 2 if malformed; a warning on stderr when the run was
    changed after its run (``what`` is shown from the changed files)."""
    from contextdelta.replay import EpisodeNotFound, select_episodes
    from contextdelta.rundir import RunDirectory, RunDirectoryError

    directory = RunDirectory(_run_directory(run_id, results_dir))
    try:
        records = directory.read_episodes()
    except RunDirectoryError as exc:
        raise _fail(str(exc), 2) from None
    try:
        selected = list(select_episodes(records, run))
    except EpisodeNotFound as exc:
        raise _fail(str(exc), 2) from None
    try:
        manifest = directory.read_manifest()
    except RunDirectoryError as exc:  # the episodes alone are enough to show, but nothing vouches for them
        from rich.markup import escape

        Console(stderr=True).print(
            f"[yellow]warning:[/yellow] {escape(str(exc))}; without a readable manifest the seal cannot be checked, so "
            f"{what} from raw_runs.jsonl unchecked. `contextdelta verify {run_id}` says what is wrong",
            highlight=False,
            soft_wrap=True,
        )
        return list(selected)
    _warn_if_changed(directory.path, manifest, Console(stderr=True), refuse_write=False, what=what)
    return list(selected)


def _print_text(text: object, color: bool | None) -> None:
    from rich.text import Text

    assert isinstance(text, Text)
    out = Console(force_terminal=color, no_color=color is False, highlight=False)
    if out.is_terminal and color is not False:
        out.print(text, soft_wrap=True, end="")
    else:
        typer.echo(text.plain, nl=False)


ColorOption = Annotated[
    bool | None, typer.Option("--color/--no-color", help="Colour (default: only in a terminal).", show_default=False)
]


@db_app.command("upgrade")
def db_upgrade_command(database_url: DatabaseUrlOption = None) -> None:
    """Apply the migrations (fresh, unversioned or older databases are upgraded in place; rows are kept)."""
    from contextdelta.store import StoreError, StoreUrlError, redact_database_url, upgrade_database

    url = database_url or _settings().database_url_for()
    try:
        report = upgrade_database(url)
    except StoreError as exc:
        raise _fail(str(exc), 2 if isinstance(exc, StoreUrlError) else 1) from None
    where = redact_database_url(url)
    if report.changed:
        typer.echo(f"{where}: {report.found} database upgraded from {report.before or 'empty'} to {report.after}")
    else:
        typer.echo(f"{where}: already at {report.after}")


@db_app.command("import")
def db_import_command(
    run_id: Annotated[str, typer.Argument(help="Run directory name under --results-dir.")],
    results_dir: ResultsDirOption = None,
    database_url: DatabaseUrlOption = None,
) -> None:
    """Load a run directory into the trace store (idempotent: importing twice changes nothing)."""
    from contextdelta.rundir import RunDirectory, RunDirectoryError
    from contextdelta.store import Store, StoreError
    from contextdelta.verify import seal_problems

    path = _run_directory(run_id, results_dir)
    try:  # the store would hold the changed records as the run's
        problems = seal_problems(path, unsealed_ok=True)
    except (RunDirectoryError, OSError) as exc:
        raise _fail(str(exc), 2) from None
    if problems:
        shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
        raise _fail(
            f"cannot import {path}: it was changed after its run ({shown}); `contextdelta verify {run_id}` names "
            "every change: import the run directory as its run wrote it",
            2,
        )
    store = _open_store(database_url, results_dir)
    assert isinstance(store, Store)
    try:
        report = store.import_run(RunDirectory(path))
    except RunDirectoryError as exc:
        raise _fail(str(exc), 2) from None
    except StoreError as exc:
        raise _fail(str(exc), 1) from None
    finally:
        store.close()
    typer.echo(f"{report.run_group_id}: {plural(report.total, 'episode')} ({report.counts()}) in {store.url}")
    repaired = report.repairs_named()
    if repaired is not None:
        typer.echo(f"{report.run_group_id}: {repaired}")


@app.command("replay")
def replay_command(
    run_id: Annotated[str, typer.Argument(help="Run directory name under --results-dir.")],
    run: Annotated[str | None, typer.Option("--run", help="One episode: its run id (or a unique prefix).")] = None,
    results_dir: ResultsDirOption = None,
    full: Annotated[bool, typer.Option("--full", help="Every message in full at every step.")] = False,
    attempt: Annotated[
        int | None,
        typer.Option(
            "--attempt",
            help="With --run: this attempt of the episode (an earlier one, superseded by --retry-failed); default "
            "its current one.",
            min=1,
        ),
    ] = None,
    color: ColorOption = None,
) -> None:
    """Step by step: what the model saw (and what the strategy removed), what it called, what came back, which
    hidden mutations happened in between, and the versions at each write."""
    from contextdelta.replay import render_episode, render_episodes
    from contextdelta.rundir import EpisodeRecord, RunDirectory, RunDirectoryError

    if attempt is not None and run is None:
        raise _fail("--attempt needs --run: the episode whose attempt to replay", 2)
    records = _episodes(run_id, results_dir, run, what="the replay comes")
    if attempt is None:
        _print_text(render_episodes(records, full=full), color)  # type: ignore[arg-type]
        return
    (current,) = records
    assert isinstance(current, EpisodeRecord)
    if attempt == current.attempt:
        _print_text(render_episode(current, full=full), color)
        return
    try:
        earlier = RunDirectory(_run_directory(run_id, results_dir)).read_episode(current.run_id, attempt)
    except RunDirectoryError:
        raise _fail(
            f"--attempt {attempt}: episode {current.run_id} has attempts 1 to {current.attempt} on record, not "
            f"{attempt}",
            2,
        ) from None
    _print_text(render_episode(earlier, full=full, superseded=True), color)


@app.command("attribute")
def attribute_command(
    run_id: Annotated[str, typer.Argument(help="Run directory name under --results-dir.")],
    run: Annotated[str | None, typer.Option("--run", help="One episode: its run id (or a unique prefix).")] = None,
    results_dir: ResultsDirOption = None,
    output_format: Annotated[str, typer.Option("--format", help="text or json.")] = "text",
    color: ColorOption = None,
) -> None:
    """The cause chain and failure mode (SPEC section 9) of each failed episode; the atlas's classifier."""
    from contextdelta.replay import attributions_json, render_attribution_report

    if output_format not in ("text", "json"):
        raise _fail(f"--format must be text or json, not {output_format!r}", 2)
    records = _episodes(run_id, results_dir, run, what="the attribution comes")
    if output_format == "json":
        typer.echo(json.dumps(attributions_json(records), indent=2))  # type: ignore[arg-type]
    else:
        _print_text(render_attribution_report(records), color)  # type: ignore[arg-type]


FormatOption = Annotated[str, typer.Option("--format", help="markdown or json.")]

POWER_MAX_REPEATS = 1000
"""The most repeats per task `power` plans for: its simulation holds a (repeats + 1) x (repeats + 1) table, so a
typo of a million repeats would ask for terabytes; repeats of a task are near copies, so more never pays."""


def _load_run(run_id: str, results_dir: Path | None) -> tuple[object, object, list[object]]:
    """(RunDirectory, RunManifest, episodes) of RUN_ID, read without changing anything; exit 2 if malformed."""
    from contextdelta.rundir import RunDirectory, RunDirectoryError

    directory = RunDirectory(_run_directory(run_id, results_dir))
    try:
        return directory, directory.read_manifest(), list(directory.read_episodes())
    except RunDirectoryError as exc:
        raise _fail(str(exc), 2) from None


def _analysis_params_model() -> type[BaseModel]:
    from contextdelta.stats import AnalysisParams

    return AnalysisParams


@app.command("report")
def report_command(
    run_id: Annotated[str, typer.Argument(help="Run directory name under --results-dir.")],
    output_format: FormatOption = "markdown",
    results_dir: ResultsDirOption = None,
    write: Annotated[
        bool,
        typer.Option(
            "--write",
            help="Also rebuild the derived files (task_results.csv, tool_events.jsonl, aggregate_metrics.json and the "
            "two Markdown reports) from raw_runs.jsonl and the manifest, offline: a deleted one is written again; an "
            "edited one is refused (verify names it).",
        ),
    ] = False,
    resamples: Annotated[
        int | None,
        typer.Option(
            "--resamples",
            help="Bootstrap resamples per interval (default: the run's recorded value, else 10000). Recomputes the "
            "report and records the value in aggregate_metrics.json, which verify then uses.",
            callback=_within(_analysis_params_model, "resamples"),
        ),
    ] = None,
    bootstrap_seed: Annotated[
        int | None,
        typer.Option(
            "--bootstrap-seed",
            help="Seed of the bootstrap and of the power simulations (default: the run's recorded value, else 0); "
            "recorded like --resamples.",
            callback=_within(_analysis_params_model, "seed"),
        ),
    ] = None,
    task_interval: Annotated[
        str | None,
        typer.Option(
            "--task-interval",
            help="Interval of the task-level statistics (paired differences; pass^k and flip rate under "
            "--share-interval bootstrap): "
            "expanded_percentile (default since 0.6.0) or percentile (the plain percentile interval of earlier "
            "reports); default: the run's recorded method. Recorded like --resamples.",
        ),
    ] = None,
    cluster_interval: Annotated[
        str | None,
        typer.Option(
            "--cluster-interval",
            help="Interval of the hierarchical bootstrap (rates, means, token reductions, rates per horizon): "
            "expanded_percentile (the default) or percentile (the plain levels of reports written by 0.13.0 and "
            "earlier); default: the run's recorded method. Recorded like --resamples.",
        ),
    ] = None,
    share_interval: Annotated[
        str | None,
        typer.Option(
            "--share-interval",
            help="Interval of pass^k and the flip rate: clopper_pearson (over tasks, the default) or "
            "bootstrap (the task bootstrap of --task-interval, as reports written by 0.13.0 and "
            "earlier); default: the run's recorded method. Recorded like --resamples.",
        ),
    ] = None,
) -> None:
    """Recompute and print the report of a run directory from the directory alone (no database, no model)."""
    from contextdelta.report import build_report, recorded_params, write_report_files
    from contextdelta.rundir import RunDirectory, RunDirectoryError, RunStatus
    from contextdelta.stats import DEFAULT_PARAMS, ShareInterval, TaskInterval

    if output_format not in ("markdown", "json"):
        raise _fail(f"--format must be markdown or json, not {output_format!r}", 2)
    methods = get_args(TaskInterval)
    if task_interval is not None and task_interval not in methods:
        raise _fail(f"--task-interval must be one of {', '.join(methods)}, not {task_interval!r}", 2)
    if cluster_interval is not None and cluster_interval not in methods:
        raise _fail(f"--cluster-interval must be one of {', '.join(methods)}, not {cluster_interval!r}", 2)
    shares = get_args(ShareInterval)
    if share_interval is not None and share_interval not in shares:
        raise _fail(f"--share-interval must be one of {', '.join(shares)}, not {share_interval!r}", 2)
    directory = RunDirectory(_run_directory(run_id, results_dir))
    # held from before the run is read until its files are rewritten: nothing a session writes meanwhile is lost
    flags = (resamples, bootstrap_seed, task_interval, cluster_interval, share_interval)
    writes = write or any(v is not None for v in flags)
    lock = _report_writer_lock(directory.path) if writes else None
    try:
        try:  # each episode's current record, and the superseded attempts of retried failed trials
            manifest, attempts = directory.read_manifest(), directory.read_attempts()
        except RunDirectoryError as exc:
            raise _fail(str(exc), 2) from None
        episodes = list(attempts.current)
        params = recorded_params(directory) or DEFAULT_PARAMS
        given = (
            ("resamples", resamples),
            ("seed", bootstrap_seed),
            ("task_interval", task_interval),
            ("cluster_interval", cluster_interval),
            ("share_interval", share_interval),
        )
        changed = {k: v for k, v in given if v is not None}
        params = params.model_copy(update=changed)
        report = build_report(manifest, episodes, params, attempts.superseded)
        err = Console(stderr=True)
        _warn_if_changed(directory.path, manifest, err, refuse_write=write or bool(changed))
        if write or changed:
            _refuse_edited_derived(directory, manifest.run_group_id, _derived_texts(episodes, report))
        if manifest.status is not RunStatus.COMPLETE:
            err.print(
                f"[yellow]note:[/yellow] run {manifest.run_group_id} is {manifest.status.value}: {len(episodes)} of "
                f"{plural(manifest.counts.planned, 'episode')}",
                highlight=False,
            )
        _note_shard(manifest, err, "the report comes")
        if output_format == "json":
            typer.echo(json.dumps(report.metrics_json(), indent=2, sort_keys=True))
        else:
            typer.echo(report.markdown, nl=False)
        if write or changed:
            # Analysis parameters other than the recorded ones are recorded with the report they produced, so the
            # directory stays consistent and verify recomputes with them.
            try:
                if manifest.status is not RunStatus.RUNNING:  # a session still running rewrites them when it ends
                    directory.write_derived(episodes)
                write_report_files(directory, report)
                directory.reseal_files()  # the seal records the files as rewritten on purpose; nothing else changes
            except OSError as exc:  # a full disk: what was rewritten so far is not what the seal holds
                where = f": {exc.filename}" if exc.filename else ""
                again = " ".join(
                    [f"contextdelta report {run_id}", *(["--write"] if write else [])]
                    + [f"--{flag} {value}" for flag, value in _report_flags(changed)]
                )
                raise _fail(
                    f"cannot write the reports of run {directory.path.name}: {exc.strerror or exc}{where}; until "
                    f"they are written and resealed, verify names the report files rewritten so far as changed after "
                    f"the run: run `{again}` again once there is room",
                    1,
                ) from None
            if changed:
                err.print(
                    f"recorded in {directory.path.name}/aggregate_metrics.json: "
                    f"{plural(params.resamples, 'resample')}, bootstrap seed {params.seed}, "
                    f"task-level intervals {params.task_interval}, rate intervals {params.cluster_interval}, pass^k "
                    f"and flip-rate intervals {params.share_interval} (verify uses them)",
                    highlight=False,
                )
    finally:
        if lock is not None:
            lock.release()


def _derived_texts(episodes: list[Any], report: Any) -> dict[str, str]:
    """What ``report --write`` writes into each derived file, by name."""
    from contextdelta.rundir import (
        AGGREGATE_METRICS,
        BENCHMARK_REPORT,
        FAILURE_ATLAS,
        TASK_RESULTS,
        TOOL_EVENTS,
        render_task_results,
        render_tool_events,
    )

    return {
        TOOL_EVENTS: render_tool_events(episodes),
        TASK_RESULTS: render_task_results(episodes),
        AGGREGATE_METRICS: json.dumps(report.metrics_json(), indent=2, sort_keys=True, ensure_ascii=False) + "\n",
        FAILURE_ATLAS: report.atlas,
        BENCHMARK_REPORT: report.markdown,
    }


def _refuse_edited_derived(directory: Any, run_id: str, texts: dict[str, str]) -> None:
    """Exit 2 when a derived file of the run was edited after the run (its bytes are not the sealed ones) and
    rebuilding would change it (``texts``: what ``report --write`` writes): rebuilding and resealing it would hide
    the edit, which verify names. A deleted one is rebuilt (nothing of the run is lost: it is a function of
    raw_runs.jsonl and the manifest), and so is one an earlier ``report --write`` wrote but could not reseal (its
    bytes are those the rebuild gives)."""
    edited = [
        name for name in directory.derived_edits() if directory.file(name).read_bytes() != texts[name].encode("utf-8")
    ]
    if edited:
        names = ", ".join(edited)
        raise _fail(
            f"report would rebuild and reseal {names} of {run_id}, edited after the run (its bytes are not the ones "
            f"the manifest sealed; `contextdelta verify {run_id}` names the edit); nothing was written: restore "
            f"{'it' if len(edited) == 1 else 'them'} as the run wrote {'it' if len(edited) == 1 else 'them'}, or "
            f"delete {'it' if len(edited) == 1 else 'them'} to have report --write rebuild "
            f"{'it' if len(edited) == 1 else 'them'} from raw_runs.jsonl",
            2,
        )


def _report_flags(changed: dict[str, Any]) -> list[tuple[str, Any]]:
    """The ``report`` flags that give the analysis parameters in ``changed`` (by their names in the command)."""
    names = {
        "resamples": "resamples",
        "seed": "bootstrap-seed",
        "task_interval": "task-interval",
        "cluster_interval": "cluster-interval",
        "share_interval": "share-interval",
    }
    return [(names[key], value) for key, value in changed.items()]


def _report_writer_lock(path: Path) -> Any:
    """The run's writer lock (``SessionLock``) for ``report --write``, or exit 2 while a session holds it: a session
    still running (or resuming) rewrites the report files and the manifest itself, and a reseal that read the
    manifest before the session's final one and wrote after it would put the old manifest back."""
    from contextdelta.rundir import SessionLock

    lock = SessionLock.acquire(path)
    if lock is None:
        raise _fail(
            f"report would rewrite and reseal the files of {path.name}, which a session is writing right now (a "
            f"run-benchmark, --resume, run-external or serve-world still running on {path}, or another report "
            "--write); nothing was written: wait for it to end, then run the same command again",
            2,
        )
    return lock


def _note_unfinished(manifest: object, err: Console, what: str) -> None:
    """A note on stderr when the run is not complete (still running, killed, or stopped early): what is shown then
    covers only the episodes recorded so far, which a reader must not take for the whole run's."""
    from contextdelta.rundir import RunManifest, RunStatus, resume_command

    assert isinstance(manifest, RunManifest)
    if manifest.status is RunStatus.COMPLETE:
        return

    run_id = manifest.run_group_id
    err.print(
        f"[yellow]note:[/yellow] run {run_id} is {manifest.status.value} ({plural(manifest.counts.planned, 'episode')} "
        f"planned): {what} from the episodes recorded so far, not the whole run; `contextdelta "
        f"{resume_command(manifest)}` finishes it",
        highlight=False,
        soft_wrap=True,
    )


def _note_shard(manifest: object, err: Console, what: str) -> None:
    """A note on stderr when the run directory is one shard of a plan (``run-benchmark --shard I/N``, N > 1): its
    status says complete, yet it holds only every N-th episode of the shuffled plan, so what is shown covers that
    part alone, and a pair whose two episodes fell in different shards is missing from its comparisons."""
    from contextdelta.rundir import RunManifest

    assert isinstance(manifest, RunManifest)
    shard = manifest.shard
    if shard is None or shard.count == 1:
        return
    err.print(
        f"[yellow]note:[/yellow] run {manifest.run_group_id} is shard {shard.index}/{shard.count} of its plan "
        f"({manifest.counts.planned} of the plan's episodes): {what} from this part only, and the paired "
        "comparisons leave out each pair whose other episode is in another shard; `contextdelta merge` joins the "
        "shards into the run group",
        highlight=False,
        soft_wrap=True,
    )


def _warn_if_changed(
    path: Path, manifest: object, err: Console, *, refuse_write: bool, what: str = "the numbers below come"
) -> None:
    """Warn when the seal of a run finds a change since the run, or a seal the run must carry is gone (what is shown
    then comes from files that may have changed), and refuse to rewrite and reseal such a directory (exit 2). A run
    from before receipts (no seal to check) is not warned about. A run still ``running`` (or killed) is checked as
    far as it is sealed: what a kill leaves (the last record without its receipt, a torn line) is no change."""
    from contextdelta.rundir import RunDirectoryError, RunManifest
    from contextdelta.verify import seal_problems

    assert isinstance(manifest, RunManifest)
    run_id = manifest.run_group_id
    try:
        problems = seal_problems(path, derived_files=False, unsealed_ok=True)  # report --write rebuilds those
    except (RunDirectoryError, OSError, ValueError) as exc:
        problems = [str(exc)]
    if not problems:
        return
    err.print(
        f"[yellow]warning:[/yellow] run {run_id} was changed after its run ({plural(len(problems), 'change')} "
        f"found by its seal; first: {problems[0]}); {what} from the changed files. `contextdelta verify {run_id}` "
        "names every change.",
        highlight=False,
        soft_wrap=True,
    )
    if refuse_write:
        raise _fail(
            f"report would rewrite and reseal the files of {run_id}, which was changed after its run: restore the "
            "run directory as the run wrote it (or run again), then write its report",
            2,
        )


@app.command("power")
def power_command(
    pilot: Annotated[str, typer.Option("--pilot", help="Run directory of the pilot run under --results-dir.")],
    difference: Annotated[
        float,
        typer.Option(
            "--difference",
            help="The difference to detect, as a share (0.10 = 10 percentage points).",
            callback=lambda v: _refuse_outside(v, 0, True, 1, False),
        ),
    ],
    repeats: Annotated[
        str,
        typer.Option(
            "--repeats", help=f"Comma-separated numbers of repeats per task to plan for, each 1 to {POWER_MAX_REPEATS}."
        ),
    ] = "1,2,3,5",
    target_power: Annotated[
        float,
        typer.Option("--power", help="Target power.", callback=lambda v: _refuse_outside(v, 0, True, 1, True)),
    ] = 0.8,
    max_tasks: Annotated[
        int,
        typer.Option(
            "--max-tasks",
            help="Largest number of tasks considered.",
            callback=lambda v: _refuse_outside(v, 2, False, None, False),
        ),
    ] = 20_000,
    output_format: FormatOption = "markdown",
    results_dir: ResultsDirOption = None,
) -> None:
    """Tasks and repeats a planned run needs for the primary test to detect --difference with --power, for each
    research-question comparison, simulated from the pilot run's own per-task rates."""
    from contextdelta.report import (
        no_comparison_message,
        no_data_message,
        plan_run,
        recorded_params,
        render_power_plan,
    )
    from contextdelta.rundir import EpisodeRecord, RunDirectory, RunManifest

    if output_format not in ("markdown", "json"):
        raise _fail(f"--format must be markdown or json, not {output_format!r}", 2)
    try:
        planned = [int(r) for r in _csv(repeats, "--repeats") or []]
    except ValueError:
        raise _fail(f"--repeats must be comma-separated whole numbers, not {repeats!r}", 2) from None
    if not planned or min(planned) < 1 or max(planned) > POWER_MAX_REPEATS:
        raise _fail(f"--repeats must list numbers from 1 to {POWER_MAX_REPEATS}, not {repeats!r}", 2)
    directory, manifest, records = _load_run(pilot, results_dir)
    assert isinstance(directory, RunDirectory) and isinstance(manifest, RunManifest)
    episodes = [r for r in records if isinstance(r, EpisodeRecord)]
    if not episodes:
        raise _fail(f"--pilot {pilot}: the run has no finished episode to plan from", 2)
    _note_unfinished(manifest, Console(stderr=True), "the plan comes")
    _note_shard(manifest, Console(stderr=True), "the plan comes")
    plan = plan_run(
        manifest,
        episodes,
        difference,
        repeats=sorted(set(planned)),
        params=recorded_params(directory),
        target_power=target_power,
        max_tasks=max_tasks,
    )
    if not plan.comparisons:
        raise _fail(f"--pilot {pilot}: {no_comparison_message(manifest, episodes)}", 2)
    if (why := no_data_message(manifest, plan)) is not None:
        raise _fail(f"--pilot {pilot}: {why}", 2)
    if output_format == "json":
        typer.echo(json.dumps(plan.model_dump(mode="json"), indent=2, sort_keys=True))
    else:
        typer.echo(render_power_plan(plan), nl=False)


@app.command("verify")
def verify_command(
    run_id: Annotated[str, typer.Argument(help="Run directory name under --results-dir.")],
    results_dir: ResultsDirOption = None,
    allow_incomplete: Annotated[
        bool, typer.Option("--allow-incomplete", help="Check the episodes of a running/incomplete run too.")
    ] = False,
) -> None:
    """Re-execute every episode's tool calls from the task snapshot, re-grade, recompute the aggregates; print
    MATCH (exit 0) or one line per divergence (exit 1: every edit of a sealed run's files, each line of
    raw_runs.jsonl duplicated, moved, deleted, cut, inserted or changed included, names its file and line); exit 2
    for a malformed or incomplete directory."""
    from contextdelta.verify import VerifyError, verify_run

    path = _run_directory(run_id, results_dir)
    try:
        with _stdout_to_stderr():  # a plug-in re-deriving its contexts may print: MATCH stays alone on stdout
            result = verify_run(path, allow_incomplete=allow_incomplete)
    except VerifyError as exc:
        raise _fail(str(exc), 2) from None
    err = Console(stderr=True)
    for note in result.notes:
        err.print(f"[yellow]note:[/yellow] {note}", highlight=False, soft_wrap=True)
    for line in result.lines():
        typer.echo(line)
    if not result.ok:
        raise typer.Exit(1)


def _shard_folder(run_ids: list[str], results_dir: Path | None) -> tuple[Path, list[str]]:
    """The results folder of the shards and their names: a shard given by its path (as run-benchmark printed it)
    must lie in that folder, where the merged run is written too."""
    from contextdelta.rundir import RunIdError, run_dir

    folder = results_dir or Path(_settings().results_dir)
    paths = [rid for rid in run_ids if "/" in rid or "\\" in rid or Path(rid).is_absolute()]
    parents = set()
    for rid in paths:
        try:
            parents.add(run_dir(folder, rid).resolve().parent)
        except RunIdError as exc:
            raise _fail(f"cannot merge {rid}: {exc}", 2) from None
    if parents:
        where = ", ".join(sorted(str(p) for p in parents))
        if len(parents) > 1:
            raise _fail(
                f"cannot merge: the shards lie in {where}, not in one results folder; the merged run is written "
                "beside them: give shards of one folder",
                2,
            )
        if results_dir is not None and parents != {results_dir.resolve()}:
            raise _fail(
                f"cannot merge: the shards lie in {where}, not in --results-dir {results_dir}; the merged run is "
                "written beside them: leave --results-dir out, or give that folder",
                2,
            )
        folder = parents.pop()
    return folder, [Path(rid).name if rid in paths else rid for rid in run_ids]


@app.command("merge")
def merge_command(
    run_ids: Annotated[
        list[str],
        typer.Argument(
            help="The shard run directories: names under --results-dir, or the paths run-benchmark printed."
        ),
    ],
    out: Annotated[
        str, typer.Option("--out", help="Run group id of the merged run directory, written beside the shards.")
    ],
    results_dir: ResultsDirOption = None,
) -> None:
    """Join the shard directories of one plan (`run-benchmark --shard I/N`) into one run group with its derived
    files and reports; refuses (exit 2, naming the field) shards that differ or episodes missing or twice."""
    from rich.markup import escape

    from contextdelta.runner import MergeError, merge_shards
    from contextdelta.verify import seal_problems

    folder, names = _shard_folder(run_ids, results_dir)
    try:
        directory = merge_shards(
            folder,
            names,
            out,
            changed_since_run=seal_problems,
            repaired=lambda said: Console(stderr=True).print(
                f"[yellow]repaired:[/yellow] {escape(said)}", highlight=False, soft_wrap=True
            ),
        )
    except MergeError as exc:
        raise _fail(str(exc), exc.exit_code) from None
    except OSError as exc:  # a folder that cannot be written, a full disk: nothing is left under --out
        raise _fail(f"cannot write the merged run in {folder}: {exc.strerror or exc}", 2) from None
    manifest = directory.read_manifest()
    Console(stderr=True).print(
        f"merged {plural(len(run_ids), 'shard')}: {plural(manifest.counts.finished, 'episode')}, "
        f"{manifest.counts.succeeded} succeeded, {plural(manifest.counts.failed, 'failed trial')}",
        highlight=False,
    )
    typer.echo(str(directory.path))


class ExportFormatChoice(StrEnum):
    inspect = "inspect"
    parquet = "parquet"


@app.command("export")
def export_command(
    run_id: Annotated[str, typer.Argument(help="Run directory name under --results-dir (or its path).")],
    output_format: Annotated[
        ExportFormatChoice,
        typer.Option(
            "--format",
            help="inspect: an inspect_ai log (JSON file); parquet: a folder of tables.",
            case_sensitive=False,
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help="inspect: the .json log file, or a folder to write it in under the name inspect_ai gives its logs "
            "(which `inspect view --log-dir` lists); parquet: the folder of tables. Outside every run directory.",
            parser=path_flag,
            metavar=PATH_METAVAR,
        ),
    ],
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing --out.")] = False,
    results_dir: ResultsDirOption = None,
) -> None:
    """Write a run directory as an inspect_ai evaluation log (one sample per episode; open it with `inspect view`)
    or as parquet tables, one per record type (DuckDB, pandas); prints the files written. The run directory is
    only read."""
    from contextdelta.export import INSPECT_LISTED, ExportError, export_run, inspect_file_name
    from contextdelta.rundir import RunDirectory

    path = _run_directory(run_id, results_dir)
    try:
        written = export_run(path, output_format.value, out, overwrite=overwrite)
    except ExportError as exc:
        raise _fail(str(exc), 2) from None
    except OSError as exc:  # --out under a file, in a folder that cannot be written, a full disk
        raise _fail(f"--out {out}: {exc.strerror or exc}; give a path in a folder you can write to", 2) from None
    manifest = RunDirectory(path).read_manifest()  # export_run read it; the seal walk after cheap refusals
    _warn_if_changed(path, manifest, Console(stderr=True), refuse_write=False, what="the export comes")
    _note_unfinished(manifest, Console(stderr=True), "the export comes")
    _note_shard(manifest, Console(stderr=True), "the export comes")
    if output_format.value == "inspect" and not INSPECT_LISTED.match(written[0].name):
        from rich.markup import escape

        Console(stderr=True).print(
            f"[yellow]note:[/yellow] {escape(written[0].name)} is read by inspect_ai.log.read_eval_log, but `inspect "
            "view --log-dir` and inspect_ai.analysis (evals_df, samples_df) list only logs whose name starts with a "
            f"timestamp; give a folder as --out to get the name inspect_ai gives its logs "
            f"({escape(inspect_file_name(manifest))})",
            highlight=False,
            soft_wrap=True,
        )
    for file in written:
        typer.echo(str(file))


@app.command("compare")
def compare_command(
    run_a: Annotated[str, typer.Argument(help="First run directory name (a).")],
    run_b: Annotated[str, typer.Argument(help="Second run directory name (b).")],
    output_format: FormatOption = "markdown",
    results_dir: ResultsDirOption = None,
) -> None:
    """Task-level paired comparison of two run groups per condition (sign-flip test over tasks, difference of task
    means a - b with a task-bootstrap interval, Holm);
    NOT COMPARABLE (exit 2) when the task set, system prompt or tool schemas differ."""
    from contextdelta.report import NotComparable, compare_runs, render_comparison
    from contextdelta.rundir import EpisodeRecord, RunDirectory, RunManifest

    if output_format not in ("markdown", "json"):
        raise _fail(f"--format must be markdown or json, not {output_format!r}", 2)
    directory_a, manifest_a, records_a = _load_run(run_a, results_dir)
    directory_b, manifest_b, records_b = _load_run(run_b, results_dir)
    assert isinstance(manifest_a, RunManifest) and isinstance(manifest_b, RunManifest)
    assert isinstance(directory_a, RunDirectory) and isinstance(directory_b, RunDirectory)
    if directory_a.path.resolve() == directory_b.path.resolve():  # every difference would be 0 by construction
        raise _fail(
            f"RUN_A {run_a!r} and RUN_B {run_b!r} both name the run directory {directory_a.path}: compare two "
            "different runs",
            2,
        )
    try:
        result = compare_runs(
            manifest_a,
            [r for r in records_a if isinstance(r, EpisodeRecord)],
            manifest_b,
            [r for r in records_b if isinstance(r, EpisodeRecord)],
        )
    except NotComparable as exc:
        # a refusal, like every other: on stderr, so stdout holds a comparison or nothing
        typer.echo(f"NOT COMPARABLE: {'; '.join(exc.reasons)}", err=True)
        raise typer.Exit(2) from None
    runs = {
        directory_a.path.resolve(): (directory_a, manifest_a),
        directory_b.path.resolve(): (directory_b, manifest_b),
    }
    for directory, manifest in runs.values():
        _warn_if_changed(
            directory.path, manifest, Console(stderr=True), refuse_write=False, what="the comparison comes"
        )
        _note_unfinished(manifest, Console(stderr=True), "its side of the comparison comes")
        _note_shard(manifest, Console(stderr=True), "its side of the comparison comes")
    if output_format == "json":
        typer.echo(json.dumps(result.model_dump(mode="json"), indent=2, sort_keys=True))
    else:
        typer.echo(render_comparison(result), nl=False)


def _is_loopback(host: str) -> bool:
    """Whether ``host`` names a loopback interface (``localhost``, 127.0.0.0/8, ``::1``)."""
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@app.command("serve")
def serve_command(
    upstream: Annotated[
        str | None,
        typer.Option(
            help="Upstream OpenAI base URL, e.g. http://127.0.0.1:8000/v1 (default CONTEXTDELTA_BASE_URL).",
            show_default=False,
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="Interface to bind; anything but loopback needs care.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port; 0 picks a free one (printed in the ready line).")
    ] = 8800,
    token: Annotated[
        str | None,
        typer.Option(
            help="Require 'Authorization: Bearer TOKEN' from clients (default CONTEXTDELTA_PROXY_TOKEN).",
            show_default=False,
        ),
    ] = None,
    upstream_api_key: Annotated[
        str | None,
        typer.Option(
            help="Key sent upstream (default CONTEXTDELTA_UPSTREAM_API_KEY, else CONTEXTDELTA_API_KEY / "
            "OPENAI_API_KEY; none: the client's own header).",
            show_default=False,
        ),
    ] = None,
    database_url: DatabaseUrlOption = None,
    timeout_s: Annotated[
        float,
        typer.Option(
            help="Upstream timeout, seconds: for each read, and for the whole of a non-streamed response (at most "
            "3600).",
            callback=_seconds(PROXY_MAX_TIMEOUT_S),
        ),
    ] = 600.0,
    max_connections: Annotated[
        int,
        typer.Option(
            min=1,
            max=65536,
            help="Client connections served at once (each holds a thread and up to 64 MiB of request); one more "
            "is answered 503 with Retry-After.",
        ),
    ] = 128,
) -> None:
    """OpenAI-compatible recording proxy: forwards /v1/chat/completions (streaming too) and /v1/models to
    --upstream and stores every request/response pair, redacted, in the trace store."""
    import logging
    import signal
    from types import FrameType

    from contextdelta.proxy import ProxyConfig, RecordingProxy
    from contextdelta.settings import BaseUrlError, check_base_url
    from contextdelta.store import Store

    _refuse_blank({"--upstream": upstream})

    settings = _settings()
    upstream = upstream or settings.base_url
    if not upstream:
        raise _fail("no upstream: pass --upstream URL or set CONTEXTDELTA_BASE_URL", 2)
    try:
        check_base_url(upstream, "--upstream / CONTEXTDELTA_BASE_URL")
    except BaseUrlError as exc:
        raise _fail(str(exc), 2) from None
    if token is None and settings.proxy_token is not None:
        token = settings.proxy_token.get_secret_value()
    if not token and not _is_loopback(host):
        raise _fail(
            f"--host {host} is not a loopback address and there is no proxy token: anyone who can reach it could "
            "use the upstream, and the key sent there, through it; pass --token TOKEN or set "
            "CONTEXTDELTA_PROXY_TOKEN (clients then send 'Authorization: Bearer TOKEN')",
            2,
        )
    secret = settings.upstream_api_key or settings.effective_api_key
    key = upstream_api_key or (secret.get_secret_value() if secret else None)
    store = _open_store(database_url)
    assert isinstance(store, Store)
    try:
        proxy = RecordingProxy(
            ProxyConfig(
                upstream=upstream,
                host=host,
                port=port,
                token=token,
                upstream_api_key=key,
                timeout_s=timeout_s,
                max_connections=max_connections,
            ),
            store,
        )
    except (ValueError, OSError) as exc:
        store.close()
        raise _fail(str(exc), 2) from None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)

    def _terminate(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _terminate)
    print(
        f"ready port={proxy.port} base_url={proxy.base_url} upstream={proxy.upstream.display} store={store.url}",
        flush=True,
    )
    try:
        proxy.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        proxy.stop()
        store.close()


@app.command("dashboard")
def dashboard_command(
    results_dir: ResultsDirOption = None,
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to serve on.")] = 8501,
    host: Annotated[str, typer.Option(help="Interface to bind; anything but loopback exposes your runs.")] = (
        "127.0.0.1"
    ),
    database_url: DatabaseUrlOption = None,
) -> None:
    """Streamlit dashboard of the run directories in --results-dir: runs, conditions, every episode (filters, text
    search), the failure atlas, episode timelines, and the comparison of two run groups. Headless, no usage
    statistics, no outside requests; stop it with Ctrl-C."""
    import os

    from contextdelta.dashboard import exec_streamlit, streamlit_command, streamlit_env
    from contextdelta.store import Store

    folder = results_dir or Path(_settings().results_dir)
    database_url = database_url or _settings().database_url_for(folder)
    store = _open_store(database_url)  # applies the migrations before the app starts
    assert isinstance(store, Store)
    store.close()
    command = streamlit_command(folder, host=host, port=port, store_migrated=True)
    env = streamlit_env(os.environ, database_url=database_url)
    print(f"dashboard: http://{host}:{port}/ (results {folder.resolve()})", flush=True)
    exec_streamlit(command, env)


def _register_local_model() -> None:
    from contextdelta.local_model import local_model_app

    app.add_typer(local_model_app, name="local-model")


_register_local_model()


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    finally:
        # the process ends now: its last cyclic collection need not walk every object the command made (after a
        # run of 864 episodes it took 0.9 s); objects are still freed, and files closed, as their modules go
        gc.freeze()


if __name__ == "__main__":
    main()
