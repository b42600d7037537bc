"""Fixtures for the store tests: the plumbing fixture as a run directory, and SQLite URLs in a temp folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from examples.smoke.mock_pipeline import Fixture, load_fixture, write_run_directory


@pytest.fixture(scope="session")
def mock_fixture() -> Fixture:
    return load_fixture()


@pytest.fixture
def mock_run(tmp_path: Path, mock_fixture: Fixture) -> Path:
    """``tmp_path/results/mock-pipeline``, written from examples/smoke/mock_pipeline.jsonl."""
    return write_run_directory(tmp_path / "results", mock_fixture)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'db' / 'contextdelta.db'}"
