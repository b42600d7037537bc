"""``StrategyBase.for_episode`` gives every episode its own copy of the containers a strategy holds: a plug-in that
keeps state in a list it made in ``__init__`` does not carry one episode's state into the next."""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from contextdelta.context import EpisodeContext, Message, StrategyBase, TransformResult

HISTORY: list[Message] = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]


class CountsCalls(StrategyBase):
    """Tells the model how many times it was asked (state kept in a list and a dict made in __init__)."""

    name = "counts_calls"
    deterministic = True

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[int] = []
        self.by_length: dict[int, int] = {}

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        self.seen.append(len(history))
        self.by_length[len(history)] = self.by_length.get(len(history), 0) + 1
        note = f"call {len(self.seen)}, {self.by_length[len(history)]} at this length"
        messages = [*history, {"role": "user", "content": note}]
        return TransformResult(messages=messages, inserted=[len(messages) - 1])


def _last(strategy: StrategyBase) -> str:
    episode = strategy.for_episode(EpisodeContext(seed=1))
    result = anyio.run(episode.transform, list(HISTORY))
    return str(result.messages[-1]["content"])


def test_each_episode_starts_from_the_configured_state() -> None:
    configured = CountsCalls()
    assert [_last(configured) for _ in range(3)] == ["call 1, 1 at this length"] * 3
    assert configured.seen == [] and configured.by_length == {}
