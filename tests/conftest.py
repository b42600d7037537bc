"""Session-wide test settings: nothing a test runs may write into the checkout's results/ or read a user's .env."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Property tests check what is computed, never how fast: on a loaded machine (CI beside other jobs) Hypothesis's
# timing checks (the per-example deadline, "input generation is slow") failed tests whose properties held.
settings.register_profile("contextdelta", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("contextdelta")


@pytest.fixture(autouse=True, scope="session")
def _isolated_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Point the default database and results folder at a temporary folder (subprocesses inherit it), and run
    episodes in the test's own process unless a test asks for workers: spawning a worker per core for every
    small run would cost more CPU than the runs (the worker-process tests pass --workers explicitly)."""
    root: Path = tmp_path_factory.mktemp("contextdelta-home")
    names = ("CONTEXTDELTA_DATABASE_URL", "CONTEXTDELTA_RESULTS_DIR", "CONTEXTDELTA_WORKERS")
    saved = {k: os.environ.get(k) for k in names}
    os.environ["CONTEXTDELTA_DATABASE_URL"] = f"sqlite:///{root / 'contextdelta.db'}"
    os.environ["CONTEXTDELTA_RESULTS_DIR"] = str(root / "results")
    os.environ["CONTEXTDELTA_WORKERS"] = "1"
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture
def no_retry_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Providers built in this process retry at once (no backoff sleep): what is tested is whether and how often a
    call is retried, never how long the harness waits between attempts."""
    from contextdelta.providers import RetryPolicy

    policy = RetryPolicy.for_timeout  # what run-benchmark and a provider without a policy use

    def immediate(timeout_s: float, max_attempts: int | None = None) -> RetryPolicy:
        return dataclasses.replace(
            policy(timeout_s, max_attempts), initial_backoff_s=0.0, max_backoff_s=0.0, jitter_s=0.0
        )

    monkeypatch.setattr(RetryPolicy, "for_timeout", staticmethod(immediate))
