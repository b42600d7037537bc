"""Fixtures for the provider tests: a recording sleep (retries never really wait) and a scripted endpoint."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from contextdelta.testing import serve_scripted
from tests.testing.episode_loop import FIXTURES


class RecordingSleep:
    """Stands in for ``asyncio.sleep`` between retries: records each wait and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def sleep() -> RecordingSleep:
    return RecordingSleep()


ScriptedFactory = Callable[..., AbstractContextManager[str]]


@pytest.fixture
def scripted() -> Iterator[ScriptedFactory]:
    """``with scripted(policy="oracle", **faults) as base_url``: an in-process scripted server on a free port."""

    def start(policy: str = "oracle", **options: Any) -> AbstractContextManager[str]:
        return serve_scripted(policy, FIXTURES, in_process=True, **options)

    yield start
