"""Strategy factories for the registry tests, imported by path (``tests.context.plugin_fixture:...``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextdelta.context import Message, StrategyBase, StrategyServices, TransformResult


class KeepFirstGroups(StrategyBase):
    """Pinned messages plus the first ``count`` messages after them (deterministic)."""

    name = "keep_first"
    deterministic = True

    def __init__(self, count: int = 2) -> None:
        super().__init__()
        self.count = count

    @property
    def params(self) -> dict[str, Any]:
        return {"count": self.count}

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        return TransformResult(messages=list(history))


class Undeclared(StrategyBase):
    """Forgets to declare whether it is deterministic."""

    name = "undeclared"

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        return TransformResult(messages=list(history))


class MisNamed(KeepFirstGroups):
    name = "Bad.Name"


class ShadowsBuiltin(KeepFirstGroups):
    name = "last_n"


class WithServices(StrategyBase):
    """Records the services it was given."""

    name = "with_services"
    deterministic = False

    def __init__(self, services: StrategyServices, level: int = 1) -> None:
        super().__init__()
        self.services = services
        self.level = level

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        return TransformResult(messages=list(history))


def not_a_strategy() -> object:
    return object()


not_a_strategy.name = "not_a_strategy"  # type: ignore[attr-defined]


class RandomParams(KeepFirstGroups):
    """Draws a parameter at random in its factory: built twice, it differs from itself."""

    name = "random_params"

    def __init__(self) -> None:
        import random

        super().__init__(count=random.randint(0, 10**9))


class NanParams(KeepFirstGroups):
    """Its params hold a float that JSON has no form for."""

    name = "nan_params"

    @property
    def params(self) -> dict[str, Any]:
        return {"ratio": float("nan")}


class ExitsInFactory(KeepFirstGroups):
    """Calls sys.exit() when built (as a plug-in that misreads its configuration might)."""

    name = "exits_in_factory"

    def __init__(self, count: int = 2) -> None:
        super().__init__(count)
        raise SystemExit(7)


class HashFails(KeepFirstGroups):
    """A config_hash property that raises."""

    name = "hash_fails"

    @property
    def config_hash(self) -> str:
        raise RuntimeError("hash boom")


class NameFails(KeepFirstGroups):
    """A name that is a class attribute (for the registry) but a failing property on the instance."""

    name = "name_fails"

    def __getattribute__(self, item: str) -> Any:
        if item == "name":
            raise RuntimeError("name boom")
        return super().__getattribute__(item)


class FailsAtLength(KeepFirstGroups):
    """A factory whose error carries 5 MB of text."""

    name = "fails_at_length"

    def __init__(self, count: int = 2) -> None:
        super().__init__(count)
        raise RuntimeError("no " * 2_000_000)
