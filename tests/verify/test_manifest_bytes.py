"""verify checks the bytes of run_manifest.json, not its text: a CRLF conversion (which reading as text would undo)
and a lost final newline are named, the latter as such."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.rundir import MANIFEST
from contextdelta.verify import verify_run
from tests.report import runs


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return runs.copy_run(runs.single_task_run(), tmp_path)


def _manifest_divergences(run: Path) -> list[str]:
    return [d.detail for d in verify_run(run).divergences if d.field == MANIFEST]


@pytest.mark.slow
def test_a_manifest_converted_to_crlf_is_named(run: Path) -> None:
    data = (run / MANIFEST).read_bytes()
    (run / MANIFEST).write_bytes(data.replace(b"\n", b"\r\n"))
    assert _manifest_divergences(run) == [
        "its line endings were converted to CRLF (\\r\\n) after the run; the runner writes \\n"
    ]
    result = CliRunner().invoke(app, ["verify", run.name, "--results-dir", str(run.parent)])
    assert result.exit_code == 1 and f"{run.name}: {MANIFEST}: its line endings were converted to CRLF" in result.stdout


@pytest.mark.slow
def test_a_manifest_that_lost_its_final_newline_is_named_as_such(run: Path) -> None:
    data = (run / MANIFEST).read_bytes()
    (run / MANIFEST).write_bytes(data[:-1])
    assert _manifest_divergences(run) == [
        "lost its final newline after the run (every other byte is as the runner wrote it)"
    ]
    (run / MANIFEST).write_bytes(data[:-1].replace(b"\n", b"\r\n"))
    assert _manifest_divergences(run) == [
        "its line endings were converted to CRLF (\\r\\n) and lost its final newline after the run; the runner "
        "writes \\n"
    ]
    (run / MANIFEST).write_bytes(data.replace(b"\n  ", b"\n    "))  # re-indented
    assert _manifest_divergences(run) == ["its bytes are not the form the runner writes (reformatted after the run)"]
    (run / MANIFEST).write_bytes(data)
    assert verify_run(run).ok


@pytest.mark.slow
def test_a_manifest_saved_with_a_byte_order_mark_is_named_not_malformed(run: Path) -> None:
    """An editor that saves UTF-8 "with BOM" changes nothing but the first three bytes: verify names that change
    (exit 1), alone or with a CRLF conversion, as it names other byte-level changes, and reads the manifest."""
    data = (run / MANIFEST).read_bytes()
    (run / MANIFEST).write_bytes(b"\xef\xbb\xbf" + data)
    assert _manifest_divergences(run) == [
        "a UTF-8 byte order mark (BOM) was added at its start after the run; the runner writes none"
    ]
    result = CliRunner().invoke(app, ["verify", run.name, "--results-dir", str(run.parent)])
    assert result.exit_code == 1, result.output
    assert f"{run.name}: {MANIFEST}: a UTF-8 byte order mark (BOM) was added" in result.stdout
    (run / MANIFEST).write_bytes(b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n"))
    assert _manifest_divergences(run) == [
        "a UTF-8 byte order mark (BOM) was added at its start after the run; the runner writes none; and its line "
        "endings were converted to CRLF (\\r\\n) after the run; the runner writes \\n"
    ]
