"""``probe_strategy``: a deterministic strategy's transform of the smallest history, checked before a run."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest

from contextdelta.context import Message, StrategyBase, TransformResult, create_strategy, probe_strategy, registry


class Blocks(StrategyBase):
    """Blocks the thread it runs on (a busy loop or a sleep, not an await): no event-loop timeout can end it."""

    name = "blocks"
    deterministic = True

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        time.sleep(8)
        return TransformResult(messages=list(history))


def test_a_transform_that_blocks_is_reported_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "PROBE_TIMEOUT_S", 0.5)
    started = time.monotonic()
    assert probe_strategy(Blocks()) == "its transform did not return within 0.5 s"
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("name", ["full_history", "last_n", "typed_state_digest", "tool_result_clearing"])
def test_the_built_ins_pass_the_probe(name: str) -> None:
    assert probe_strategy(create_strategy(name)) is None


class Slow(StrategyBase):
    """Blocks its thread for ``seconds`` (default 1.5, past a 0.5 s limit and its join), then returns."""

    name = "slow"
    deterministic = True

    def __init__(self, seconds: float = 1.5) -> None:
        self.seconds = seconds

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        time.sleep(self.seconds)
        return TransformResult(messages=list(history))


def test_the_probe_waits_no_longer_than_the_runs_timeout() -> None:
    """A transform slower than --timeout-s passed the probe (which waited 30 s) and then failed every episode."""
    assert probe_strategy(Slow(), timeout_s=0.5) == (
        "its transform did not return within 0.5 s (the run's --timeout-s, which bounds every transform of the run)"
    )
    assert probe_strategy(Slow(), timeout_s=600) is None


def test_a_transform_that_blocks_past_the_limit_and_then_returns_is_too_slow() -> None:
    """A blocking transform that returned after the limit but before the probe stopped waiting passed: fail_after
    cannot cancel a blocking call, and the probe took its result (a flaky pass of the test above under load)."""
    # Slow(0.8) returns within the probe's join (limit + 1 s)
    assert probe_strategy(Slow(0.8), timeout_s=0.5) == (
        "its transform did not return within 0.5 s (the run's --timeout-s, which bounds every transform of the run)"
    )
