"""A run directory's JSON holding NaN, Infinity or nesting deeper than the interpreter's stack is an edit that verify
and the readers name, never a traceback: ``json.loads`` accepts the constants (which no run writes and canonical JSON
cannot encode, so every digest and comparison raised ValueError) and raises RecursionError on deep nesting."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.rundir import AGGREGATE_METRICS, MANIFEST, RAW_RUNS, TOOL_EVENTS, parse_json
from tests.report import runs

DEEP = "[" * 100_000 + "]" * 100_000
cli = CliRunner()


def _edit_line(name: str, index: int, old: str, new: str) -> Callable[[Path], None]:
    def edit(run: Path) -> None:
        path = run / name
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        assert old in lines[index], (name, old)
        lines[index] = lines[index].replace(old, new, 1)
        path.write_text("".join(lines), encoding="utf-8")

    return edit


def _replace(name: str, old: str, new: str) -> Callable[[Path], None]:
    def edit(run: Path) -> None:
        path = run / name
        text = path.read_text(encoding="utf-8")
        assert old in text, (name, old)
        path.write_text(text.replace(old, new, 1), encoding="utf-8")

    return edit


EDITS: dict[str, tuple[Callable[[Path], None], int, str]] = {
    # a sealed record edited is named by its receipt (exit 1), like any other edit of raw_runs.jsonl
    "NaN in a record": (
        _edit_line(RAW_RUNS, 0, '"cost_usd":0.0', '"cost_usd":NaN'),
        1,
        "raw_runs.jsonl: line 1 is not a JSON record (NaN is not a JSON number",
    ),
    "Infinity in a record": (
        _edit_line(RAW_RUNS, 0, '"cost_usd":0.0', '"cost_usd":-Infinity'),
        1,
        "line 1 is not a JSON record (-Infinity is not a JSON number",
    ),
    "NaN in the last record": (
        _edit_line(RAW_RUNS, -1, '"cost_usd":0.0', '"cost_usd":NaN'),
        1,  # it ends in a newline, so no kill tore it: an edit, like an edit of any other line
        "line 4 is not a JSON record (NaN is not a JSON number",
    ),
    "a record nested too deep": (
        _edit_line(RAW_RUNS, 0, '"control":null', f'"control":{DEEP}'),
        1,
        "nested too deeply",
    ),
    "the last record nested too deep": (
        _edit_line(RAW_RUNS, -1, '"control":null', f'"control":{DEEP}'),
        1,  # it ends in a newline, so no kill tore it: an edit, like an edit of any other line
        "nested too deeply",
    ),
    "NaN in the manifest": (_replace(MANIFEST, '"temperature": 0.0', '"temperature": NaN'), 2, "NaN is not a JSON"),
    "NaN in the aggregates": (_replace(AGGREGATE_METRICS, '"estimate": ', '"estimate": NaN, "x": '), 1, "NaN is not"),
    "aggregates nested too deep": (
        _replace(AGGREGATE_METRICS, '"estimate": ', f'"x": {DEEP}, "estimate": '),
        1,
        "deep",
    ),
    "NaN in a tool event": (
        _edit_line(TOOL_EVENTS, 1, '"version_at_execution":1', '"observed_version":NaN'),
        1,
        "line 2",
    ),
    "a tool event nested too deep": (
        _edit_line(TOOL_EVENTS, 1, '"version_at_execution":1', f'"observed_version":{DEEP}'),
        1,
        "line 2",
    ),
}


@pytest.mark.parametrize("name", list(EDITS))
def test_verify_names_the_edit_without_a_traceback(name: str, tmp_path: Path) -> None:
    edit, code, fragment = EDITS[name]
    run = runs.copy_run(runs.single_task_run(), tmp_path)
    edit(run)
    result = cli.invoke(app, ["verify", run.name, "--results-dir", str(tmp_path)])
    assert result.exit_code == code, result.output
    assert not isinstance(result.exception, (ValueError, RecursionError)), result.exception
    assert fragment in " ".join(result.output.split()), result.output


@pytest.mark.parametrize("command", ["report", "replay", "attribute"])
def test_the_readers_name_a_nan_record_without_a_traceback(command: str, tmp_path: Path) -> None:
    run = runs.copy_run(runs.single_task_run(), tmp_path)
    _edit_line(RAW_RUNS, 0, '"cost_usd":0.0', '"cost_usd":NaN')(run)
    result = cli.invoke(app, [command, run.name, "--results-dir", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert f"{RAW_RUNS}: line 1 is not valid JSON (NaN is not a JSON number" in " ".join(result.output.split())


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"a": -Infinity}', DEEP])
def test_parse_json_refuses_what_no_run_writes_as_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_json(text)
