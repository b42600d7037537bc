"""Every command that reads a task suite takes ``--tasks`` alike: a folder or ``package:NAME``, by default ./tasks
when it is a folder and otherwise the packaged core suite; ``contextdelta suites`` lists the packaged ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.tasks import packaged_suites, read_lock
from contextdelta.testing.server import app as scripted_server_app

runner = CliRunner()

REQUIRED = {
    "scripted-server": ["--policy", "oracle"],
    "serve-world": ["--task", "cfg-search-ramp", "--mode", "unprotected"],
    "run-external": ["--agent-cmd", "true"],
}
"""Valid values of a command's other required options."""


def _tasks_options(application: typer.Typer, name: str | None = None) -> dict[str, Any]:
    """Command name -> its ``--tasks`` click parameter, for every command of ``application`` that has one."""
    found: dict[str, Any] = {}

    def walk(command: Any, words: list[str]) -> None:
        if hasattr(command, "commands"):
            for sub_name, sub in command.commands.items():
                walk(sub, [*words, sub_name])
            return
        for param in command.params:
            if "--tasks" in getattr(param, "opts", ()):
                found[" ".join(words) or name or ""] = param

    walk(typer.main.get_command(application), [])
    return found


COMMANDS = {**_tasks_options(app), **_tasks_options(scripted_server_app, "scripted-server")}


def test_the_enumeration_sees_every_command_that_reads_a_suite() -> None:
    assert set(COMMANDS) == {"validate-tasks", "run-benchmark", "serve-world", "run-external", "scripted-server"}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_tasks_option_defaults_to_the_rule_and_says_so(name: str) -> None:
    param = COMMANDS[name]
    assert param.default is None  # resolved by contextdelta.tasks.resolve_suite, never a fixed Path("tasks")
    assert "package:" in param.help and "./tasks" in param.help


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_an_unknown_packaged_suite_is_refused_by_every_command(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    application, words = (scripted_server_app, []) if name == "scripted-server" else (app, [name])
    result = runner.invoke(application, [*words, *REQUIRED.get(name, []), "--tasks", "package:nope"])
    assert result.exit_code == 2, result.output
    message = " ".join(result.stderr.split())
    assert "--tasks package:nope: no packaged suite 'nope'; packaged: package:core, package:horizon" in message
    assert list(tmp_path.iterdir()) == []  # refused before anything was written


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_an_empty_tasks_value_is_refused_not_read_as_the_working_directory(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "order").mkdir()
    (tmp_path / "order" / "x.yaml").write_text("a: [\n")  # what Path("") would have read
    monkeypatch.chdir(tmp_path)
    application, words = (scripted_server_app, []) if name == "scripted-server" else (app, [name])
    result = runner.invoke(application, [*words, *REQUIRED.get(name, []), "--tasks", ""])
    assert result.exit_code == 2, result.output
    message = " ".join(result.stderr.split())
    assert "--tasks '' names nothing: give a task folder or package:NAME, or leave --tasks out" in message
    assert "x.yaml" not in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["order"]


@pytest.mark.slow
def test_suites_lists_every_packaged_suite_with_its_hash() -> None:
    result = runner.invoke(app, ["suites", "--json"])
    assert result.exit_code == 0, result.output
    listed = {row["tasks_option"]: row for row in json.loads(result.stdout)}
    assert list(listed) == [f"package:{name}" for name in packaged_suites()]
    for name, path in packaged_suites().items():
        lock = read_lock(path / "SUITE.lock")
        row = listed[f"package:{name}"]
        assert (row["suite_sha256"], row["tasks"], row["lock_matches"]) == (lock.suite_hash, len(lock.entries), True)
        assert row["generator"] == lock.generator


@pytest.mark.slow
def test_validate_tasks_reads_the_packaged_suite_outside_a_clone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["validate-tasks"])
    assert result.exit_code == 0, result.output
    assert "Tasks in package:core" in result.stdout
    assert f"suite hash: {read_lock(packaged_suites()['core'] / 'SUITE.lock').suite_hash}" in result.stdout


def test_write_lock_refuses_a_packaged_suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["validate-tasks", "--tasks", "package:core", "--write-lock"])
    assert result.exit_code == 2
    assert "package:core is a suite shipped in the package; give its folder with --tasks DIR" in result.stderr
