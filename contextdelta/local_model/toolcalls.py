"""Tool calls out of a model's generated text, as OpenAI ``tool_calls``.

Small local models do not return structured tool calls; they write them into their text. Three forms are
recognised, in this order (the first form that yields a call wins; the others are then left as text):

- tagged: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (the form the Qwen2.5 chat template asks
  for; several tags give several calls; a tag left open at the end of the text still counts);
- fenced: a Markdown code block (```` ```json ... ``` ````) holding a call object, a list of them, or several;
- bare: call objects (or a list of them) written into the text as plain JSON.

A call object has a string ``name`` and an ``arguments`` (or ``parameters``) member; one with only a ``name`` is
a call inside a tag, and elsewhere when the name is one of the request's tools. OpenAI's own shape,
``{"type": "function", "function": {...}}``, is unwrapped.

The parser records what the model decided and nothing more: every call is returned in order, repeated calls
included, and nothing is validated against the tool schemas (the agent loop does that and records invalid
calls). Arguments that are a JSON object are re-serialised; a string is passed through as written; when the call
is not valid JSON (malformed, or cut off by the token limit), the name is recovered and the argument text is
passed through exactly as the model wrote it. A tag or block whose tool name cannot be recovered is left in the
text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Literal

CallForm = Literal["tagged", "fenced", "bare"]

_TAGGED = re.compile(r"<tool_call>(?P<body>.*?)(?:</tool_call>|(?=<tool_call>)|\Z)", re.DOTALL)
_FENCED = re.compile(r"```[ \t]*(?P<lang>[\w.+-]*)[ \t]*\n?(?P<body>.*?)(?:```|\Z)", re.DOTALL)
_FENCE_LINE = re.compile(r"^\s*```[\w.+-]*[ \t]*\n?|\n?```\s*$")
_BROKEN_CALL = re.compile(
    r"\{\s*\"name\"\s*:\s*\"(?P<name>[^\"\\\n]+)\"\s*,?\s*(?:\"(?:arguments|parameters)\"\s*:\s*(?P<args>.*))?",
    re.DOTALL,
)
_ARGUMENT_KEYS = ("arguments", "parameters")
_decoder = json.JSONDecoder()


@dataclass(frozen=True)
class ParsedToolCall:
    """One tool call found in the text."""

    name: str
    arguments: str
    """The argument text handed to the agent: JSON when the model wrote JSON, else exactly what it wrote."""
    form: CallForm


@dataclass(frozen=True)
class ParsedCompletion:
    """A completion split into its text (None when nothing is left) and its tool calls."""

    content: str | None
    tool_calls: list[ParsedToolCall] = field(default_factory=list)


def parse_completion(text: str, tool_names: Collection[str] = ()) -> ParsedCompletion:
    """Split generated ``text`` into the message text and the tool calls it contains (see the module notes)."""
    for finder in (_tagged_calls, _fenced_calls, _bare_calls):
        spans, calls = finder(text, tool_names)
        if calls:
            return ParsedCompletion(content=_remove_spans(text, spans), tool_calls=calls)
    stripped = text.strip()
    return ParsedCompletion(content=stripped or None)


# ---- the three forms ---------------------------------------------------------------------------------------

Spans = list[tuple[int, int]]


def _tagged_calls(text: str, tool_names: Collection[str]) -> tuple[Spans, list[ParsedToolCall]]:
    spans: Spans = []
    calls: list[ParsedToolCall] = []
    for match in _TAGGED.finditer(text):
        found = _calls_in_body(_FENCE_LINE.sub("", match.group("body")), tool_names, "tagged")
        if found:
            spans.append(match.span())
            calls.extend(found)
    return spans, calls


def _fenced_calls(text: str, tool_names: Collection[str]) -> tuple[Spans, list[ParsedToolCall]]:
    spans: Spans = []
    calls: list[ParsedToolCall] = []
    for match in _FENCED.finditer(text):
        found = _calls_in_body(match.group("body"), tool_names, "fenced")
        if found:
            spans.append(match.span())
            calls.extend(found)
    return spans, calls


def _bare_calls(text: str, tool_names: Collection[str]) -> tuple[Spans, list[ParsedToolCall]]:
    spans: Spans = []
    calls: list[ParsedToolCall] = []
    position = 0
    while position < len(text):
        start = _next_json_start(text, position)
        if start < 0:
            break
        try:
            value, end = _decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            position = start + 1
            continue
        found = _calls_in_value(value, tool_names, "bare")
        if found:
            spans.append((start, end))
            calls.extend(found)
            position = end
        else:
            position = start + 1  # look inside: a call may be nested in another object
    if calls:
        return spans, calls
    # no valid call: a call object that is not valid JSON (from its opening brace to the next one or the end)
    starts = [m.start() for m in _BROKEN_CALL.finditer(text)]
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(text)
        broken = _broken_call(text[start:end], "bare")
        # without a tag, a lone {"name": ...} is a call only when it names a tool or carries arguments
        if broken is not None and (broken.name in tool_names or _has_argument_key(text[start:end])):
            spans.append((start, end))
            calls.append(broken)
    return spans, calls


# ---- helpers -----------------------------------------------------------------------------------------------


def _calls_in_body(body: str, tool_names: Collection[str], form: CallForm) -> list[ParsedToolCall]:
    """Calls in the body of a tag or fence: one JSON value, several, or one broken call object."""
    stripped = body.strip()
    if not stripped:
        return []
    values: list[Any] = []
    position = 0
    while position < len(stripped):
        try:
            value, position = _decoder.raw_decode(stripped, position)
        except json.JSONDecodeError:
            break  # trailing text after the values (e.g. a stray brace) is not a call
        values.append(value)
        while position < len(stripped) and stripped[position] in " \t\r\n,":
            position += 1
    if values:  # valid JSON: calls, or not a call at all
        return [call for value in values for call in _calls_in_value(value, tool_names, form)]
    broken = _broken_call(stripped, form)
    if broken is None:
        return []
    # inside a tag the model meant a call; in a code block only when it names a tool or carries arguments
    if form == "tagged" or broken.name in tool_names or _has_argument_key(stripped):
        return [broken]
    return []


def _calls_in_value(value: Any, tool_names: Collection[str], form: CallForm) -> list[ParsedToolCall]:
    if isinstance(value, list):
        found = [_call_from_object(item, tool_names, form) for item in value]
        calls = [call for call in found if call is not None]
        # a list is a list of calls only when every item is one
        return calls if calls and len(calls) == len(found) else []
    call = _call_from_object(value, tool_names, form)
    return [call] if call is not None else []


def _call_from_object(value: Any, tool_names: Collection[str], form: CallForm) -> ParsedToolCall | None:
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("function"), dict) and "name" not in value:
        value = value["function"]
    name = value.get("name")
    if not isinstance(name, str) or not name.strip():
        return None
    key = next((k for k in _ARGUMENT_KEYS if k in value), None)
    if key is None:
        # no arguments given: inside a tag that is a call; elsewhere only when it names a tool
        if form != "tagged" and name not in tool_names:
            return None
        return ParsedToolCall(name=name, arguments="{}", form=form)
    return ParsedToolCall(name=name, arguments=_argument_text(value[key]), form=form)


def _argument_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)


def _broken_call(text: str, form: CallForm) -> ParsedToolCall | None:
    """A call object that is not valid JSON: its name, and its argument text as written (or ``{}``)."""
    match = _BROKEN_CALL.search(text)
    if match is None:
        return None
    raw = match.group("args")
    if raw is None:  # cut off before its arguments: pass on what follows the name, as written
        raw = text[match.end("name") + 1 :].lstrip(" \t\r\n,")
    raw = raw.strip()
    # the call object's own closing brace is not part of the arguments
    if raw.endswith("}") and raw.count("}") > raw.count("{"):
        raw = raw[:-1].rstrip()
    return ParsedToolCall(name=match.group("name"), arguments=raw, form=form)


def _has_argument_key(text: str) -> bool:
    return any(f'"{key}"' in text for key in _ARGUMENT_KEYS)


def _next_json_start(text: str, position: int) -> int:
    brace = text.find("{", position)
    bracket = text.find("[", position)
    candidates = [i for i in (brace, bracket) if i >= 0]
    return min(candidates) if candidates else -1


def _remove_spans(text: str, spans: Spans) -> str | None:
    pieces: list[str] = []
    cursor = 0
    for start, end in sorted(spans):
        pieces.append(text[cursor:start])
        cursor = max(cursor, end)
    pieces.append(text[cursor:])
    remaining = "\n".join(piece.strip() for piece in pieces if piece.strip())
    return remaining or None
