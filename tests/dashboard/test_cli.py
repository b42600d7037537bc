"""``contextdelta dashboard``: migrates the trace store, then replaces itself by a local, headless Streamlit that
is told so (``--store-migrated``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

import contextdelta.dashboard as dashboard
from contextdelta.cli import app
from contextdelta.store import create_store_engine, current_revision, head_revision

runner = CliRunner()


def test_dashboard_migrates_the_store_and_execs_streamlit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    launched: list[tuple[list[str], dict[str, str]]] = []

    def fake_exec(command: Sequence[str], env: Mapping[str, str]) -> None:
        launched.append((list(command), dict(env)))

    monkeypatch.setattr(dashboard, "exec_streamlit", fake_exec)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    results = tmp_path / "results"
    result = runner.invoke(app, ["dashboard", "--results-dir", str(results), "--port", "8611", "--database-url", url])
    assert result.exit_code == 0, result.output
    assert "http://127.0.0.1:8611/" in result.output
    ((command, env),) = launched
    # the store is migrated: the app need not again (its first page does not wait for it)
    assert command == dashboard.streamlit_command(results, host="127.0.0.1", port=8611, store_migrated=True)
    assert env["STREAMLIT_BROWSER_GATHER_USAGE_STATS"] == "false"
    assert env["CONTEXTDELTA_DATABASE_URL"] == url
    engine = create_store_engine(url)
    try:
        assert current_revision(engine) == head_revision()
    finally:
        engine.dispose()


def test_dashboard_defaults_to_the_settings_results_dir_and_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    launched: list[list[str]] = []
    monkeypatch.setattr(dashboard, "exec_streamlit", lambda command, env: launched.append(list(command)))
    result = runner.invoke(app, ["dashboard"])
    assert result.exit_code == 0, result.output
    (command,) = launched
    assert command[command.index("--server.address") + 1] == "127.0.0.1"
    assert command[command.index("--server.port") + 1] == "8501"
    assert command[-2:] == [str(Path(os.environ["CONTEXTDELTA_RESULTS_DIR"]).resolve()), "--store-migrated"]


def test_dashboard_help_names_its_options() -> None:
    result = runner.invoke(app, ["dashboard", "--help"])
    assert result.exit_code == 0
    for option in ("--results-dir", "--port", "--host", "--database-url"):
        assert option in result.output
