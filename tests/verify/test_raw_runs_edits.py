"""Every edit of ``raw_runs.jsonl`` in a sealed run is an edit of a receipt: one exit code (1, a divergence) and one
kind of line, naming the file, the line and what differs, whatever the edit (a line duplicated, two lines swapped,
one deleted, the file truncated, a line inserted, a byte changed). A duplicate or a line that no longer reads as a
record was a malformed directory (exit 2, "appears twice", "not valid JSON") while a swap was a divergence (exit 1).
A run written before receipts has no seal to tell an edit from a malformed file: such a line is still exit 2."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.rundir import RAW_RUNS
from tests.report import runs

cli = CliRunner()
Lines = list[bytes]


def _dup(lines: Lines) -> Lines:
    return [lines[0], lines[1], lines[1], *lines[2:]]


def _swap(lines: Lines) -> Lines:
    return [lines[0], lines[2], lines[1], *lines[3:]]


def _delete(lines: Lines) -> Lines:
    return [lines[0], *lines[2:]]


def _byte(old: bytes, new: bytes) -> Callable[[Lines], Lines]:
    def edit(lines: Lines) -> Lines:
        assert old in lines[1], old
        return [lines[0], lines[1].replace(old, new, 1), *lines[2:]]

    return edit


EDITS: dict[str, tuple[Callable[[Lines], Lines], str]] = {
    "a line duplicated": (_dup, r"raw_runs\.jsonl: line 3 repeats the record sealed as line 2: a copy added after"),
    "two lines swapped": (_swap, r"raw_runs\.jsonl: line 2 holds the record sealed as line 3: lines out of order"),
    "a line deleted": (_delete, r"raw_runs\.jsonl: line 2 is missing: the chain sealed a record of this episode"),
    "an empty line inserted": (
        lambda lines: [lines[0], b"", *lines[1:]],
        r"raw_runs\.jsonl: line 2 is not in the hash chain \(added after the run",
    ),
    "a JSON object inserted": (
        lambda lines: [lines[0], b"{}", *lines[1:]],
        r"raw_runs\.jsonl: line 2 is not in the hash chain \(added after the run",
    ),
    "garbage inserted": (
        lambda lines: [lines[0], b"garbage", *lines[1:]],
        r"raw_runs\.jsonl: line 2 is not in the hash chain \(added after the run",
    ),
    "a value changed": (
        _byte(b'"final_answer":"', b'"final_answer":"X'),
        r"trace\.final_answer: raw_runs\.jsonl line 2: edited after the run",
    ),
    "a byte that breaks the JSON": (
        _byte(b'"run_id":"', b'"run_id""'),
        r"raw_runs\.jsonl: line 2 is not a JSON record \(.*\): edited after the run",
    ),
    "a byte that breaks the record's schema": (
        _byte(b'"steps":[', b'"steps":{"x":[]},"y":['),
        r"trace\.steps\S*: raw_runs\.jsonl line 2: \w+ after the run",
    ),
}


def _write(path: Path, lines: Lines, *, last_newline: bool = True) -> None:
    path.write_bytes(b"\n".join(lines) + (b"\n" if last_newline else b""))


def _verify(run: Path) -> tuple[int, str]:
    result = cli.invoke(app, ["verify", run.name, "--results-dir", str(run.parent)])
    return result.exit_code, result.stdout + result.stderr


@pytest.mark.parametrize("case", sorted(EDITS))
def test_every_edit_of_raw_runs_exits_1_naming_the_file_and_the_line(tmp_path: Path, case: str) -> None:
    edit, wanted = EDITS[case]
    run = runs.copy_run(runs.single_task_run(), tmp_path)
    raw = run / RAW_RUNS
    _write(raw, edit(raw.read_bytes().split(b"\n")[:-1]))
    code, said = _verify(run)
    assert code == 1, (case, said)
    assert "malformed run directory" not in said
    assert re.search(wanted, said), (case, said)


def test_a_finished_run_truncated_mid_record_exits_1_naming_its_last_line(tmp_path: Path) -> None:
    run = runs.copy_run(runs.single_task_run(), tmp_path)
    raw = run / RAW_RUNS
    lines = raw.read_bytes().split(b"\n")[:-1]
    _write(raw, [*lines[:-1], lines[-1][:500]], last_newline=False)
    code, said = _verify(run)
    assert code == 1, said
    assert f"raw_runs.jsonl: line {len(lines)} is torn: cut short after 500 bytes" in said, said


def test_a_bad_line_of_a_run_from_before_receipts_is_still_a_malformed_directory(legacy: Path) -> None:
    raw = legacy / RAW_RUNS
    raw.write_bytes(b"garbage\n" + raw.read_bytes())
    code, said = _verify(legacy)
    assert code == 2
    assert "malformed run directory" in said and "line 1 is not valid JSON" in said
