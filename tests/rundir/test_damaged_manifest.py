"""A run_manifest.json damaged after the run (bytes that are not UTF-8, text that is not a manifest): every command
reading a run directory names the file and the problem (exit 2), never a traceback; replay and attribute, which can
show the episodes without it, say that the seal could not be checked instead of showing them as if vouched for."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.rundir import MANIFEST
from tests.report import runs

cli = CliRunner()


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return runs.copy_run(runs.single_task_run(), tmp_path / "results")


@pytest.mark.parametrize(
    "command",
    [
        ["verify"],
        ["report"],
        ["power", "--difference", "0.2", "--pilot"],
        ["export", "--format", "inspect", "--out", "OUT", "--"],
        ["compare", "OTHER"],
    ],
)
def test_a_manifest_that_is_not_utf8_is_a_named_error(run: Path, tmp_path: Path, command: list[str]) -> None:
    (run / MANIFEST).write_bytes(b"\xff\xfe" + (run / MANIFEST).read_bytes())
    args = [str(tmp_path / "out.json") if a == "OUT" else str(run) if a == "OTHER" else a for a in command]
    out = cli.invoke(app, [*args, str(run)])
    assert out.exit_code == 2, out.output
    assert out.exception is None or isinstance(out.exception, SystemExit), out.exception
    text = " ".join(out.stderr.split())
    assert f"{run / MANIFEST}: not UTF-8 text (invalid start byte at byte 0, line 1)" in text
    assert "Traceback" not in out.output


@pytest.mark.parametrize("damage", [b"\xff{}", b"", b"[]"])
@pytest.mark.parametrize("command", ["replay", "attribute"])
def test_replay_without_a_readable_manifest_warns_that_nothing_was_checked(
    run: Path, damage: bytes, command: str
) -> None:
    (run / MANIFEST).write_bytes(damage)
    out = cli.invoke(app, [command, str(run)])
    assert out.exit_code == 0, out.output
    text = " ".join(out.stderr.split())
    assert f"warning: {run / MANIFEST}:" in text
    assert "without a readable manifest the seal cannot be checked" in text
    assert f"contextdelta verify {run}" in text
