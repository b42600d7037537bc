"""The command line: help, version, and the tools listing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta import __version__
from contextdelta.cli import app

runner = CliRunner()


@pytest.mark.slow
def test_help_lists_the_commands() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "contextdelta", "--help"], capture_output=True, text=True, check=True
    )
    assert "tools" in result.stdout
    assert "Usage" in result.stdout


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"contextdelta {__version__}"


def test_tools_json_matches_mode() -> None:
    contract = json.loads(
        runner.invoke(app, ["tools", "--world", "order", "--mode", "freshness_contract", "--json"]).stdout
    )
    names = {t["function"]["name"]: t["function"]["parameters"] for t in contract["order"]}
    assert "expected_version" in names["issue_refund"]["required"]
    assert "expected_version" not in names["get_order"]["properties"]


def test_tools_json_gives_each_tools_kind_resource_and_a_writes_effect_key_beside_its_schema() -> None:
    result = runner.invoke(app, ["tools", "--json"])
    assert result.exit_code == 0, result.output
    listing = json.loads(result.stdout)
    entries = {t["function"]["name"]: t["contextdelta"] for world in listing.values() for t in world}
    assert entries["issue_refund"] == {
        "kind": "write",
        "resource": "order/{order_id}",
        "effect_key": ["order_id", "amount_cents"],
        "effect_form": None,
    }
    assert entries["get_order"] == {
        "kind": "read",
        "resource": "order/{order_id}",
        "effect_key": None,
        "effect_form": None,
    }
    assert entries["list_orders"]["resource"] is None
    # a tool that reads its effect arguments coarser than their JSON says how
    assert entries["update_attendees"]["effect_key"] == ["event_id", "add", "remove"]
    assert "case-insensitively" in entries["update_attendees"]["effect_form"]
    # every write of every world has its key; the text is stable (sorted keys) from run to run
    assert all(e["effect_key"] for e in entries.values() if e["kind"] == "write")
    assert runner.invoke(app, ["tools", "--json"]).stdout == result.stdout
    assert list(listing) == sorted(listing)


def test_tools_table_shows_each_tools_resource_and_a_writes_effect_key() -> None:
    result = runner.invoke(app, ["tools", "--world", "order"])
    assert result.exit_code == 0, result.output
    rows = {
        line.split("│")[2].strip(): [c.strip() for c in line.split("│")[3:6]]
        for line in result.stdout.splitlines()
        if line.startswith("│")
    }
    assert rows["issue_refund"] == ["write", "order/{order_id}", "order_id, amount_cents"]
    assert rows["cancel_order"] == ["write", "order/{order_id}", "order_id"]
    assert rows["get_order"] == ["read", "order/{order_id}", "-"]
    assert rows["list_orders"] == ["read", "-", "-"]
    assert "same action (no_duplicate_action)" in " ".join(result.stdout.split())


def test_unknown_world_is_a_clear_error() -> None:
    result = runner.invoke(app, ["tools", "--world", "warehouse"])
    assert result.exit_code == 2
    assert "unknown world 'warehouse'" in result.stderr and result.stdout == ""


@pytest.mark.parametrize("flag", ["--strategies", "--protection-modes", "--task-ids", "--controls"])
@pytest.mark.parametrize("value", ["", " , "])
def test_a_list_option_that_names_nothing_is_refused_not_read_as_the_default(
    flag: str, value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["run-benchmark", flag, value, "--results-dir", str(tmp_path), "--no-store"])
    assert result.exit_code == 2, result.output
    assert f"{flag} {value!r} names nothing" in " ".join(result.stderr.split())
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("words", "flag", "value"),
    [
        (["run-benchmark", "--no-store"], "--strategies", "full_history,,last_n"),
        (["run-benchmark", "--no-store"], "--protection-modes", "unprotected,"),
        (["run-benchmark", "--no-store"], "--task-ids", ",cfg-search-ramp"),
        (["run-benchmark", "--no-store"], "--controls", "no_mutation, ,"),
        (["run-external", "--agent-cmd", "true", "--no-store"], "--task-ids", "a,,b"),
        (
            ["run-external", "--agent-cmd", "true", "--no-store"],
            "--protection-modes",
            "unprotected,,freshness_contract",
        ),
        (["power", "--pilot", "x", "--difference", "0.1"], "--repeats", "1,,3"),
        (["generate-tasks", "--family", "all", "--out", "o"], "--horizons", "1,,2"),
        (["generate-tasks", "--out", "o"], "--family", "order-address-shipped,"),
    ],
)
def test_a_list_option_with_an_empty_item_is_refused_naming_the_flag(
    words: list[str], flag: str, value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """'full_history,,last_n' ran full_history and last_n as if the typo were not there."""
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, [*words, flag, value])
    assert result.exit_code == 2, result.output
    assert f"{flag} {value!r} has an empty item" in " ".join(result.stderr.split()), result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seed", "99999999999999999999"], "Invalid value for '--seed'"),
        (["--out", "/etc/passwd"], "--out /etc/passwd: Not a directory"),
        (
            ["--family", "order-address-shipped,order-address-shipped"],
            "--family: Value error, families must not repeat",
        ),
    ],
)
def test_generate_tasks_refuses_what_it_cannot_write_by_name(args: list[str], message: str, tmp_path: Path) -> None:
    command = ["generate-tasks", "--family", "order-address-shipped", "--horizons", "1", "--per-cell", "1"]
    if "--out" not in args:
        command += ["--out", str(tmp_path / "suite")]
    result = runner.invoke(app, [*command, *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not (tmp_path / "suite").exists()


@pytest.mark.parametrize(
    ("words", "flag"),
    [
        (["run-benchmark", "--model", "m", "--no-store"], "--base-url"),
        (["run-benchmark", "--base-url", "http://127.0.0.1:9/v1", "--no-store"], "--model"),
        (["run-benchmark", "--no-store"], "--summary-model"),
        (["run-benchmark", "--no-store"], "--executor"),
        (["run-benchmark", "--no-store"], "--ray-address"),
        (["run-benchmark", "--no-store"], "--provider"),
        (["serve"], "--upstream"),
    ],
)
@pytest.mark.parametrize("value", ["", "  "])
def test_a_text_flag_given_empty_is_refused_not_read_as_the_default(
    words: list[str], flag: str, value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--base-url '' fell back to the default endpoint (api.openai.com), as if the flag had not been given."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CONTEXTDELTA_BASE_URL", "http://127.0.0.1:9/v1")
    result = runner.invoke(app, [*words, flag, value])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (
        f"error: {flag} {value!r} names nothing: give a value, or leave {flag} out (the default)"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("words", "flag"),
    [
        (["run-benchmark", "--no-store", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"], "--results-dir"),
        (["run-benchmark", "--no-store", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"], "--price-table"),
        (["run-external", "--agent-cmd", "true", "--no-store"], "--results-dir"),
        (["generate-tasks", "--family", "order-refund-handled", "--horizons", "1", "--per-cell", "1"], "--out"),
        (["report", "RUN"], "--results-dir"),
        (["verify", "RUN"], "--results-dir"),
        (["export", "RUN", "--format", "inspect"], "--out"),
        (["merge", "RUN", "--out", "joined"], "--results-dir"),
    ],
)
@pytest.mark.parametrize("value", ["", "  "])
def test_a_path_flag_given_empty_is_refused_not_read_as_the_current_folder(
    words: list[str], flag: str, value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read as a path, '' is the working folder and '  ' a folder named by spaces: generate-tasks --out '' wrote a
    suite into the folder the command ran in, and run-benchmark --results-dir '  ' its run directory under '  '."""
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, [*words, flag, value])
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.replace("│", " ").split())  # the error panel wraps at the terminal width
    assert f"Invalid value for '{flag}':" in message
    assert "names nothing: give a path (write . for the current folder)" in message
    assert list(tmp_path.iterdir()) == []
