"""Re-deriving the contexts of a plug-in that blocks its thread is bounded by the run's --timeout-s: verify ends,
with the step the loop cut short not a finding (the loop recorded the same time-out), instead of waiting forever."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import anyio
import pytest

from contextdelta.agent import TerminationReason, run_episode
from contextdelta.context import Message, StrategyBase, TransformResult
from contextdelta.providers import MockProvider
from contextdelta.verify._contexts import REDERIVE_TIMEOUT_S, context_divergences, rederive_limit
from tests.agent.helpers import GET, REFUND, make_task, make_world, reply


class BlocksAtStepTwo(StrategyBase):
    name = "blocks"
    deterministic = True

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        if any(m["role"] == "assistant" for m in history):
            time.sleep(3600)
        return TransformResult(messages=list(history))


@pytest.mark.slow
def test_a_plugin_that_blocks_is_left_behind_when_its_contexts_are_re_derived() -> None:
    task = make_task(None)
    provider = MockProvider([reply(None, GET), reply(None, REFUND), reply("Refunded.")], model="fake-model")
    provider.timeout_s = 0.3  # type: ignore[attr-defined]  # as the HTTP provider's --timeout-s
    trace = anyio.run(
        lambda: run_episode(task.public_task, make_world(task), provider, BlocksAtStepTwo(), max_steps=5, seed=7)
    )
    assert trace.termination is TerminationReason.HARNESS_ERROR and len(trace.steps) == 2
    found: list[object] = []
    worker = threading.Thread(
        target=lambda: found.append(context_divergences(trace, BlocksAtStepTwo(), make_world(task), None, 0.3)),
        daemon=True,
    )
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "re-deriving the contexts never ended"
    assert found == [[]]


def test_the_limit_is_the_longest_timeout_of_the_run_sessions() -> None:
    assert rederive_limit([{"timeout_s": 3.0}, {"timeout_s": 30}, {"timeout_s": None}]) == 30.0
    assert rederive_limit([{}, {"timeout_s": True}]) == REDERIVE_TIMEOUT_S
