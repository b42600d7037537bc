"""Reading a chat-completions request the way the scripted policies do: from the messages alone.

The scripted server keeps no state between requests (the agent's context strategy may drop any old message),
so everything a policy knows comes from here: which of its own calls came last (their ids encode the
trajectory position, see :class:`CallId`), what each tool result said, and which resource versions are
visible anywhere in the messages.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from contextdelta.canonical import canonical_json, sha256_hex
from contextdelta.worlds import json_values_in, resource_views


class Phase(StrEnum):
    """Why a scripted call was made; part of its id, so the next request knows what to do next."""

    MAIN = "main"
    """The trajectory step itself."""
    PRE = "pre"
    """A read made before write step i because no version of its resource was visible."""
    REREAD = "reread"
    """A read made after write step i came back ``version_conflict``."""
    RETRY = "retry"
    """Write step i again, with the version from the re-read."""
    FAULT = "fault"
    """Step i, corrupted by fault injection (malformed arguments, unknown tool): it is issued again next."""


@dataclass(frozen=True)
class CallId:
    """A scripted tool-call id: ``call_<policy>_<step>_<phase>_<nonce>``.

    ``step`` is the 0-based index into the policy's trajectory. ``nonce`` is derived from the request's
    messages, so ids are deterministic and (in practice) unique within an episode.
    """

    policy: str
    step: int
    phase: Phase
    nonce: str

    def render(self) -> str:
        return f"call_{self.policy}_{self.step}_{self.phase.value}_{self.nonce}"

    @classmethod
    def parse(cls, text: str) -> CallId | None:
        """The id's parts, or None when ``text`` is not a scripted id."""
        if not text.startswith("call_"):
            return None
        parts = text[len("call_") :].split("_")
        if len(parts) < 4:
            return None
        *policy_parts, step, phase, nonce = parts
        if not (step.isascii() and step.isdigit()) or phase not in Phase.__members__.values():
            return None
        return cls(policy="_".join(policy_parts), step=int(step), phase=Phase(phase), nonce=nonce)


def nonce_of(messages: Sequence[Mapping[str, Any]]) -> str:
    """A short deterministic fingerprint of the messages, used to keep call ids unique."""
    return sha256_hex(canonical_json(list(messages)))[:8]


def text_of(content: Any) -> str:
    """The text of a message's ``content``: a string, or the text parts of a content-part list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text"]
        return "\n".join(t for t in texts if isinstance(t, str))
    return str(content)


def error_code_of(result: Any) -> str | None:
    """The ``error.code`` of a tool result, or None for a result without an error."""
    if isinstance(result, dict) and isinstance(result.get("error"), dict):
        code = result["error"].get("code")
        return code if isinstance(code, str) else "error"
    return None


@dataclass(frozen=True)
class ToolCallSeen:
    """A tool call in an assistant message, with the tool result answering it (if the messages hold it)."""

    message_index: int
    id: str
    name: str
    arguments: str
    result_text: str | None
    result: Any
    """The result parsed as JSON; None when absent or not JSON."""

    @property
    def call_id(self) -> CallId | None:
        return CallId.parse(self.id)

    @property
    def parsed_arguments(self) -> dict[str, Any] | None:
        try:
            value = json.loads(self.arguments) if self.arguments.strip() else {}
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None


class Transcript:
    """A parsed view of one request's messages."""

    def __init__(self, messages: Sequence[Mapping[str, Any]]) -> None:
        self.messages = list(messages)
        results: dict[str, tuple[str | None, Any]] = {}
        for message in self.messages:
            if message.get("role") == "tool" and isinstance(message.get("tool_call_id"), str):
                text = text_of(message.get("content"))
                results[message["tool_call_id"]] = (text, _parse_json(text))
        calls: list[ToolCallSeen] = []
        for index, message in enumerate(self.messages):
            if message.get("role") != "assistant":
                continue
            for call in message.get("tool_calls") or []:
                if not isinstance(call, dict):
                    continue
                function = call.get("function") or {}
                call_id = str(call.get("id") or "")
                result_text, parsed = results.get(call_id, (None, None))  # a dropped result reads as None
                calls.append(
                    ToolCallSeen(
                        message_index=index,
                        id=call_id,
                        name=str(function.get("name") or ""),
                        arguments=str(function.get("arguments") or ""),
                        result_text=result_text,
                        result=parsed,
                    )
                )
        self.tool_calls = calls
        self._views_cache: dict[bool, list[tuple[int, dict[str, Any]]]] = {}

    def user_texts(self) -> list[str]:
        return [text_of(m.get("content")) for m in self.messages if m.get("role") == "user"]

    def system_texts(self) -> list[str]:
        return [text_of(m.get("content")) for m in self.messages if m.get("role") in ("system", "developer")]

    def last_own_call(self, policy: str) -> ToolCallSeen | None:
        """The last tool call of the most recent assistant message with tool calls, if ``policy`` made it."""
        if not self.tool_calls:
            return None
        last_index = self.tool_calls[-1].message_index
        for call in reversed(self.tool_calls):
            if call.message_index != last_index:
                break
            parsed = call.call_id
            if parsed is not None and parsed.policy == policy:
                return call
        return None

    def calls_for_step(self, policy: str, step: int) -> list[ToolCallSeen]:
        """The calls ``policy`` made for trajectory step ``step`` that are still in the messages, oldest first."""
        return [c for c in self.tool_calls if (p := c.call_id) is not None and p.policy == policy and p.step == step]

    def views(self, *, tool_results_only: bool) -> list[tuple[int, dict[str, Any]]]:
        """(message index, resource view) pairs in message order.

        With ``tool_results_only`` only tool messages count; otherwise any message text holding JSON objects
        with ``resource`` and ``version`` counts too (a state digest, a summary, a pasted result).
        """
        cached = self._views_cache.get(tool_results_only)
        if cached is not None:
            return cached
        found: list[tuple[int, dict[str, Any]]] = []
        for index, message in enumerate(self.messages):
            role = message.get("role")
            if tool_results_only and role != "tool":
                continue
            text = text_of(message.get("content"))
            if not text:
                continue
            values = [_parse_json(text)] if role == "tool" else list(json_values_in(text))
            for value in values:
                found.extend((index, view) for view in resource_views(value))
        self._views_cache[tool_results_only] = found
        return found

    def latest_view(self, key: str, *, tool_results_only: bool) -> dict[str, Any] | None:
        """The most recent view of resource ``key`` in the messages, or None when it is not visible."""
        latest = None
        for _, view in self.views(tool_results_only=tool_results_only):
            if view["resource"] == key:
                latest = view
        return latest

    def latest_version(self, key: str, *, tool_results_only: bool) -> int | None:
        """The version of ``key`` in its most recent view, or None when it is not visible."""
        view = self.latest_view(key, tool_results_only=tool_results_only)
        return int(view["version"]) if view is not None else None

    def successful_call_visible(self, tool: str, same: Callable[[Mapping[str, Any]], bool]) -> bool:
        """Whether a call of ``tool`` whose parsed arguments are ``same`` (the caller's notion of one action)
        shows a non-error result."""
        for call in self.tool_calls:
            if call.name != tool or call.result is None or error_code_of(call.result) is not None:
                continue
            parsed = call.parsed_arguments
            if parsed is not None and same(parsed):
                return True
        return False


def version_in(value: Any, key: str) -> int | None:
    """The version of resource ``key`` shown in a JSON value, or None."""
    for view in resource_views(value):
        if view["resource"] == key:
            return int(view["version"])
    return None


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None
