"""Every command reports bad input on stderr (one message, no traceback) and prints nothing on stdout, so that
stdout only ever holds a command's result. The table covers every command: a new command must be added to it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from contextdelta.cli import app

runner = CliRunner()


def _commands() -> list[str]:
    found: list[str] = []

    def walk(command: Any, words: list[str]) -> None:
        if hasattr(command, "commands"):  # a group (typer ships its own click)
            for name, sub in command.commands.items():
                walk(sub, [*words, name])
        else:
            found.append(" ".join(words))

    walk(typer.main.get_command(app), [])
    return found


def bad_invocations(tmp: Path) -> dict[str, list[str]]:
    """One invalid invocation per command (a missing folder, an unknown name, an unreachable endpoint, ...)."""
    results = ["--results-dir", str(tmp)]
    return {
        "tools": ["--world", "nope"],
        "validate-tasks": ["--tasks", str(tmp / "nope")],
        "suites": ["--format", "yaml"],  # takes no input: an unknown option is its bad input
        "generate-tasks": ["--family", "nope", "--out", str(tmp / "out")],
        "run-benchmark": ["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--no-store", *results],
        "serve-world": ["--task", "nope", "--mode", "unprotected", "--no-store", *results],
        "run-external": ["--agent-cmd", "true", "--tasks", str(tmp / "nope"), "--no-store", *results],
        "replay": ["nope", *results],
        "attribute": ["nope", *results],
        "report": ["nope", *results],
        "power": ["--pilot", "nope", "--difference", "0.1", *results],
        "verify": ["nope", *results],
        "merge": ["nope-a", "nope-b", "--out", "merged", *results],
        "compare": ["nope-a", "nope-b", *results],
        "export": ["nope", "--format", "inspect", "--out", str(tmp / "out.eval"), *results],
        "serve": ["--database-url", f"sqlite:///{tmp / 'proxy.db'}"],  # no upstream configured
        "dashboard": ["--database-url", "nope://nowhere", *results],
        "db upgrade": ["--database-url", "nope://nowhere"],
        "db import": ["nope", "--database-url", f"sqlite:///{tmp / 'store.db'}", *results],
        "local-model info": ["--model", "nope"],
        "local-model serve": ["--model", "nope"],
    }


def test_the_table_covers_every_command(tmp_path: Path) -> None:
    assert sorted(bad_invocations(tmp_path)) == sorted(_commands())


@pytest.mark.parametrize("command", _commands())
def test_bad_input_goes_to_stderr_and_nothing_to_stdout(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CONTEXTDELTA_BASE_URL", raising=False)
    result = runner.invoke(app, [*command.split(), *bad_invocations(tmp_path)[command]])
    assert result.exit_code not in (0, None), result.output
    assert result.stdout == "", result.stdout
    assert result.stderr.strip() and "Traceback" not in result.stderr


def test_verify_reports_a_malformed_directory_on_stderr(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "run_manifest.json").write_text("{not json", encoding="utf-8")
    (broken / "raw_runs.jsonl").write_text("", encoding="utf-8")
    result = runner.invoke(app, ["verify", str(broken)])
    assert result.exit_code == 2
    assert result.stdout == "" and result.stderr.startswith("error: ")
