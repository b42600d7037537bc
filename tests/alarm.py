"""A wall-clock bound for a test that would otherwise hang or fill the memory (SIGALRM, the main thread only)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def within(seconds: int, what: str) -> Iterator[None]:
    """Raise TimeoutError ``still <what> after N s`` when the block runs past ``seconds``."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise TimeoutError(f"still {what} after {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
