"""Building a strategy by name from the run configuration."""

from __future__ import annotations

from contextdelta.context.base import ContextStrategy
from contextdelta.context.full_history import FullHistory
from contextdelta.context.last_n import LastN
from contextdelta.context.semantic_summary import SemanticSummary
from contextdelta.context.typed_state_digest import TypedStateDigest
from contextdelta.providers.base import ChatProvider

STRATEGY_NAMES: tuple[str, ...] = ("full_history", "last_n", "semantic_summary", "typed_state_digest")


def create_strategy(
    name: str,
    *,
    last_n: int = 3,
    summary_trigger: int = 6,
    summary_keep: int = 3,
    summary_provider: ChatProvider | None = None,
    summary_model: str | None = None,
) -> ContextStrategy:
    """The strategy ``name`` with its parameters. ``summary_trigger``/``summary_keep`` apply to both
    ``semantic_summary`` and ``typed_state_digest``; ``semantic_summary`` needs ``summary_provider``."""
    if name == "full_history":
        return FullHistory()
    if name == "last_n":
        return LastN(last_n)
    if name == "typed_state_digest":
        return TypedStateDigest(summary_trigger, summary_keep)
    if name == "semantic_summary":
        if summary_provider is None:
            raise ValueError("semantic_summary needs a summary provider")
        return SemanticSummary(summary_provider, model=summary_model, trigger=summary_trigger, keep=summary_keep)
    raise ValueError(f"unknown strategy {name!r}; known: {', '.join(STRATEGY_NAMES)}")
