"""Fixtures for the runner tests: a scripted HTTP server per policy (module scope) and a results folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from contextdelta.testing import serve_scripted

TASKS = Path(__file__).resolve().parents[2] / "tasks"


@pytest.fixture(scope="module")
def oracle_url() -> Iterator[str]:
    with serve_scripted("oracle", TASKS) as url:
        yield url


@pytest.fixture(scope="module")
def trusting_url() -> Iterator[str]:
    with serve_scripted("context_trusting", TASKS) as url:
        yield url
