"""An editor's byte-level changes to the JSONL files the seal covers line by line (``raw_runs.jsonl`` and its
receipts) change no value: verify names each as what it is (a CRLF conversion, a byte order mark) on the file and
line it touched, instead of as an edited or unchained record, and blames nothing else on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextdelta.rundir import RAW_RUNS, RAW_RUNS_RECEIPTS
from contextdelta.verify import verify_run
from tests.report import runs

BOM = b"\xef\xbb\xbf"
CRLF = "its line endings were converted to CRLF (\\r\\n) after the run; the runner writes \\n"
BOM_ADDED = "starts with a UTF-8 byte order mark (BOM) added after the run; the runner writes none"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return runs.copy_run(runs.single_task_run(), tmp_path)


def _found(run: Path) -> list[tuple[str, str, str]]:
    return [(d.run_id, d.field, d.detail) for d in verify_run(run).divergences]


def _first_run_id(run: Path) -> str:
    return str(json.loads((run / RAW_RUNS).read_bytes().split(b"\n")[0])["run_id"])


@pytest.mark.parametrize("name", [RAW_RUNS, RAW_RUNS_RECEIPTS])
def test_a_jsonl_file_converted_to_crlf_is_named_once_as_such(run: Path, name: str) -> None:
    path = run / name
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert _found(run) == [(run.name, name, CRLF)]


def test_one_record_line_converted_to_crlf_is_named_with_its_line(run: Path) -> None:
    path = run / RAW_RUNS
    lines = path.read_bytes().split(b"\n")
    lines[1] += b"\r"
    path.write_bytes(b"\n".join(lines))
    (found,) = _found(run)
    assert found[1:] == (RAW_RUNS, "line 2: its line ending was converted to CRLF (\\r\\n) after the run")


def test_a_byte_order_mark_before_the_first_record_is_named_on_its_line(run: Path) -> None:
    path = run / RAW_RUNS
    path.write_bytes(BOM + path.read_bytes())
    assert _found(run) == [(_first_run_id(run), RAW_RUNS, f"line 1: {BOM_ADDED}")]


def test_a_byte_order_mark_before_the_first_receipt_is_named_and_the_chain_still_read(run: Path) -> None:
    """Before, the first receipt did not parse, so none was read and every record was named as added after the
    run."""
    path = run / RAW_RUNS_RECEIPTS
    path.write_bytes(BOM + path.read_bytes())
    assert _found(run) == [(_first_run_id(run), f"{RAW_RUNS_RECEIPTS} line 1", BOM_ADDED)]
