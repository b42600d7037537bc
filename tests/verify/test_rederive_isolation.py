"""Re-deriving contexts gives the rebuilt strategy a copy of the recorded history: a plug-in that edits its input
in place cannot change the episode's record while verify reads it (nor what the next step is compared against)."""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from contextdelta.agent import run_episode
from contextdelta.canonical import canonical_json
from contextdelta.context import Message, StrategyBase, TransformResult, create_strategy
from contextdelta.providers import MockProvider
from contextdelta.verify._contexts import context_divergences
from tests.agent.helpers import GET, REFUND, make_task, make_world, reply


class EditsItsInput(StrategyBase):
    name = "full_history"
    deterministic = True

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        sent = [dict(m) for m in history]
        for message in history:
            if message["role"] == "tool":
                message["content"] = "CLEARED"  # after taking its copy: what it sends is the full history
        return TransformResult(messages=sent)


def test_a_strategy_editing_its_input_during_verify_leaves_the_record_alone() -> None:
    task = make_task(None)
    provider = MockProvider([reply(None, GET), reply(None, REFUND), reply("Refunded.")], model="fake-model")
    trace = anyio.run(
        lambda: run_episode(
            task.public_task, make_world(task), provider, create_strategy("full_history"), max_steps=5, seed=7
        )
    )
    before = canonical_json(trace.model_dump(mode="json"))
    found = context_divergences(trace, EditsItsInput(), make_world(task))
    assert canonical_json(trace.model_dump(mode="json")) == before
    assert found == []
