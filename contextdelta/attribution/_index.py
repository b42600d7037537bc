"""An index over one episode trace: where each tool result sits in the canonical history, what it showed, and
what the messages sent at each step contained (verbatim results and summary/digest claims).

Observations are read from the recorded tool results: every JSON object with a string ``resource`` and an
integer ``version`` in a result that the world recorded as showing that resource (``resources_observed``), plus
``version_conflict`` errors, which reveal a resource's current version (not its state).

Claims are what a strategy-written message (semantic summary, typed state digest) states about a resource:
a JSON object with ``resource`` and ``version`` anywhere in the text (the last one wins), or, in prose, the
resource key or id followed within 80 characters by ``version N`` / ``vN``. Write claims are JSON objects with
``tool``, ``arguments`` and ``outcome`` (the digest's and the scripted summary's write records).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from contextdelta.agent import EpisodeTrace, StepRecord, ToolCallRecord
from contextdelta.canonical import canonical_json
from contextdelta.grading import mutation_position
from contextdelta.worlds import (
    MutationEvent,
    Outcome,
    ToolEvent,
    ToolKind,
    json_values_in,
    resource_views,
    write_records,
)

OBSERVATION_READ = "read"
OBSERVATION_OWN_WRITE = "own_write"
OBSERVATION_CONFLICT = "version_conflict"

_CLAIM_WINDOW = 80
_VERSION_NEAR = re.compile(r"\bversion\s*(?:is\s*|[:=#]\s*)?(\d+)|\bv(\d+)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Observation:
    """A version of a resource shown to the agent by one tool result."""

    resource: str
    version: int
    step: int
    seq: int
    tool: str
    kind: str
    message: int | None
    """Canonical-history index of the tool message that carried it."""


@dataclass(frozen=True)
class Change:
    """A change of a resource's version before the decisive action: another actor's or the agent's own."""

    position: float
    """On the seq axis (see ``grading.mutation_position``); an own write sits just before its own result."""
    version_before: int | None
    version_after: int | None
    mutation: MutationEvent | None = None
    own_write: ToolEvent | None = None


@dataclass(frozen=True)
class Claim:
    """A version of a resource stated by a strategy-written message."""

    version: int
    text: str


def message_text(message: dict[str, Any]) -> str:
    """The text content of a chat message (string content or the text parts of a list)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def resource_id(resource: str) -> str:
    """The last part of a ``world/kind/id`` key."""
    return resource.rsplit("/", 1)[-1]


def text_claim(text: str, resource: str) -> Claim | None:
    """The version a text states for ``resource``: JSON objects first, then prose near the key or id."""
    found: int | None = None
    for value in json_values_in(text):
        for obj in resource_views(value):
            if obj["resource"] == resource:
                found = obj["version"]
    if found is not None:
        return Claim(found, text)
    ident = resource_id(resource)
    names = [re.escape(resource)] + ([rf"(?<![\w/-]){re.escape(ident)}(?![\w-])"] if ident != resource else [])
    for match in re.finditer("|".join(names), text):
        near = _VERSION_NEAR.search(text, match.end(), match.end() + _CLAIM_WINDOW)
        if near is not None:
            found = int(near.group(1) or near.group(2))
    return Claim(found, text) if found is not None else None


def _arguments(event: ToolEvent) -> dict[str, Any]:
    return (
        {k: v for k, v in event.arguments.items() if k != "expected_version"}
        if isinstance(event.arguments, dict)
        else {}
    )


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


class EpisodeIndex:
    """Lookups over one episode trace used by the attribution (pure; built once per episode)."""

    def __init__(self, trace: EpisodeTrace) -> None:
        self.trace = trace
        self.steps: dict[int, StepRecord] = {s.step: s for s in trace.steps}
        self.events: dict[int, ToolEvent] = {}
        self.records: dict[int, ToolCallRecord] = {}
        self.call_message: dict[int, int] = {}
        self.result_message: dict[int, int] = {}
        self.message_step: dict[int, int] = {}
        self.mutations: list[MutationEvent] = trace.mutation_events()
        index = len(trace.initial_messages)
        for step in trace.steps:
            call_at: dict[str, int] = {}
            result_at: dict[str, int] = {}
            for message in step.appended:
                self.message_step[index] = step.step
                if message.get("role") == "assistant":
                    for call in message.get("tool_calls") or []:
                        call_at[str(call.get("id"))] = index
                elif message.get("role") == "tool":
                    result_at[str(message.get("tool_call_id"))] = index
                index += 1
            for record, event in zip(step.tool_calls, step.evaluator.tool_events, strict=False):
                self.events[event.seq] = event
                self.records[event.seq] = record
                if record.call_id in call_at:
                    self.call_message[event.seq] = call_at[record.call_id]
                if record.call_id in result_at:
                    self.result_message[event.seq] = result_at[record.call_id]
        self.observations: list[Observation] = sorted(self._observations(), key=lambda o: (o.seq, o.resource))

    # ---- what the agent was shown ---------------------------------------------------------------------------

    def _observations(self) -> Iterator[Observation]:
        for seq, event in self.events.items():
            if event.actor != "agent":
                continue
            message = self.result_message.get(seq)
            parsed = _parse(event.result)
            if event.outcome is Outcome.BLOCKED and isinstance(parsed, dict):
                error = parsed.get("error")
                current = error.get("current_version") if isinstance(error, dict) else None
                if event.resource is not None and isinstance(current, int) and not isinstance(current, bool):
                    yield Observation(
                        event.resource, current, event.step, seq, event.tool, OBSERVATION_CONFLICT, message
                    )
                continue
            shown = set(event.resources_observed)
            versions: dict[str, int] = {}
            for obj in resource_views(parsed):
                if obj["resource"] in shown:
                    versions[obj["resource"]] = obj["version"]
            own = event.kind is ToolKind.WRITE and event.outcome is Outcome.EXECUTED
            for key, version in versions.items():
                kind = OBSERVATION_OWN_WRITE if own and key in event.resources_written else OBSERVATION_READ
                yield Observation(key, version, event.step, seq, event.tool, kind, message)

    def observations_before(self, resource: str, action: ToolEvent) -> list[Observation]:
        """Observations of ``resource`` the model could have seen when it chose ``action`` (earlier steps)."""
        return [o for o in self.observations if o.resource == resource and o.step < action.step and o.seq < action.seq]

    # ---- what was sent at a step ------------------------------------------------------------------------------

    def sent(self, step: int, message: int | None) -> bool:
        """Whether canonical message ``message`` was sent verbatim at ``step``."""
        record = self.steps.get(step)
        if record is None or message is None:
            return False
        return message < record.context.canonical_message_count and message not in set(record.context.removed)

    def ever_sent(self, message: int | None, until_step: int) -> bool:
        """Whether ``message`` was sent verbatim in any request up to and including ``until_step``."""
        if message is None or message not in self.message_step:
            return False
        return any(self.sent(k, message) for k in range(self.message_step[message] + 1, until_step + 1))

    def inserted_texts(self, step: int) -> list[str]:
        """The texts of the messages the strategy wrote into the request of ``step``."""
        record = self.steps.get(step)
        if record is None:
            return []
        return [message_text(record.messages[i]) for i in record.context.inserted if 0 <= i < len(record.messages)]

    def claim(self, step: int, resource: str) -> Claim | None:
        """What the inserted messages of ``step`` state about ``resource`` (the last claim wins)."""
        found: Claim | None = None
        for text in self.inserted_texts(step):
            claim = text_claim(text, resource)
            if claim is not None:
                found = claim
        return found

    def write_claim(self, step: int, event: ToolEvent) -> str | None:
        """The outcome an inserted message of ``step`` states for a write like ``event`` (same tool and arguments,
        ``expected_version`` aside), or ``"mentioned"`` when prose names the tool and the resource id on one
        line; None when no inserted message mentions it."""
        wanted = canonical_json([event.tool, _arguments(event)])
        outcome: str | None = None
        for text in self.inserted_texts(step):
            for value in json_values_in(text):
                for record in write_records(value):
                    arguments = record["arguments"]
                    plain = (
                        {k: v for k, v in arguments.items() if k != "expected_version"}
                        if isinstance(arguments, dict)
                        else arguments
                    )
                    if canonical_json([record["tool"], plain]) == wanted:
                        outcome = str(record["outcome"])
            if outcome is None and event.resource is not None:
                ident = resource_id(event.resource)
                if any(event.tool in line and ident in line for line in text.splitlines()):
                    outcome = "mentioned"
        return outcome

    # ---- what changed -------------------------------------------------------------------------------------------

    def changes(self, resource: str, before_seq: int) -> list[Change]:
        """Every version change of ``resource`` before call ``before_seq``: hidden mutations and the agent's
        own executed writes, in position order."""
        found: list[Change] = []
        events = list(self.events.values())
        for mutation in self.mutations:
            if mutation.outcome is not Outcome.EXECUTED or resource not in mutation.resources:
                continue
            before, after = mutation.versions_before.get(resource), mutation.versions_after.get(resource)
            position = mutation_position(mutation, events)
            if before != after and position < before_seq:
                found.append(Change(position, before, after, mutation=mutation))
        for event in self.events.values():
            if (
                event.actor == "agent"
                and event.seq < before_seq
                and event.outcome is Outcome.EXECUTED
                and resource in event.resources_written
            ):
                before = event.version_at_execution if event.resource == resource else None
                after = next(
                    (o.version for o in self.observations if o.seq == event.seq and o.resource == resource), None
                )
                found.append(Change(event.seq - 0.5, before, after, own_write=event))
        return sorted(found, key=lambda c: c.position)

    def first_change_after(self, resource: str, after: float, before_seq: int) -> Change | None:
        """The first change of ``resource`` positioned after ``after`` and before call ``before_seq``."""
        return next((c for c in self.changes(resource, before_seq) if c.position > after), None)


def position_of(observation: Observation | None) -> float:
    """An observation's seq as a position; -inf for none (the start of the episode)."""
    return -math.inf if observation is None else float(observation.seq)
