"""Checks that a message list is a valid OpenAI chat sequence for a tool-using conversation."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import json
import re
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio

from contextdelta.canonical import canonical_json
from contextdelta.context.base import PINNED, ContextStrategy, EpisodeContext, Message, SummaryCall, TransformResult
from contextdelta.providers import ChatProvider, ProviderResponse

ROLES = frozenset({"system", "user", "assistant", "tool"})

MAX_CONTEXT_CHARS = 16 * 1024 * 1024
"""The most characters the messages a strategy returns may take as canonical JSON: 16 MiB, about 4 million
tokens, beyond the context window of any endpoint. A larger context is the strategy's error, named before any
request is sent (counting its tokens alone would hold the episode for seconds per megabyte)."""

SHOWN_PROBLEMS = 5
"""How many of a context's problems an error names (the rest are counted)."""
PROBLEM_CHARS = 300
"""The longest a named problem is (one that quotes a value a strategy wrote is cut)."""


def describe_problems(problems: Sequence[str]) -> str:
    """``problems`` on one line for an error: the first :data:`SHOWN_PROBLEMS`, each cut to :data:`PROBLEM_CHARS`,
    and how many more there are (a strategy that returns a million bad messages is not a million-line error)."""
    shown = [p if len(p) <= PROBLEM_CHARS else f"{p[:PROBLEM_CHARS]}... [{len(p)} characters]" for p in problems]
    text = "; ".join(shown[:SHOWN_PROBLEMS])
    more = len(problems) - SHOWN_PROBLEMS
    return f"{text}; and {more} more" if more > 0 else text


def message_sequence_problems(messages: Sequence[Message]) -> list[str]:
    """Every way ``messages`` breaks the rules a chat-completions endpoint enforces; empty when valid.

    Rules: the system prompt comes first and a user message second; every assistant tool call is answered by
    exactly one tool message with its id, and all answers come right after the call's assistant message (before
    the next assistant or user message); no tool message answers a call that is not pending; ids are unique;
    an assistant message without tool calls has string content.
    """
    problems: list[str] = []
    if len(messages) < 2:
        return ["a sequence needs at least the system prompt and the user instruction"]
    if messages[0].get("role") != "system":
        problems.append("message 0 is not the system prompt")
    if messages[1].get("role") != "user":
        problems.append("message 1 is not a user message")
    pending: list[str] = []
    seen: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role")
        if role not in ROLES:
            problems.append(f"message {i}: unknown role {role!r}")
            continue
        if role == "tool":
            answered = message.get("tool_call_id")
            if answered not in pending:
                problems.append(f"message {i}: tool result {answered!r} answers no pending call")
            else:
                pending.remove(answered)
            if not isinstance(message.get("content"), str):
                problems.append(f"message {i}: tool result content is not text")
            continue
        if pending:
            problems.append(f"message {i}: tool calls {pending} were not answered before a {role} message")
            pending = []
        if role == "system" and i != 0:
            problems.append(f"message {i}: a system message after the first message")
        if role == "assistant":
            calls = message.get("tool_calls") or []
            if not isinstance(calls, list):
                problems.append(f"message {i}: tool_calls is {type(calls).__name__}, not a list of tool calls")
                continue
            for call in calls:
                call_id = call.get("id") if isinstance(call, dict) else None
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(call_id, str) or not call_id:
                    problems.append(f"message {i}: a tool call without an id")
                    continue
                if call_id in seen:
                    problems.append(f"message {i}: duplicate tool call id {call_id!r}")
                if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                    problems.append(f"message {i}: tool call {call_id!r} has no function name")
                elif not isinstance(function.get("arguments"), str):
                    got = type(function.get("arguments")).__name__
                    problems.append(
                        f"message {i}: tool call {call_id!r} has arguments of type {got}, not a JSON string"
                    )
                if call.get("type", "function") != "function":
                    problems.append(f"message {i}: tool call {call_id!r} has type {call.get('type')!r}, not 'function'")
                seen.add(call_id)
                pending.append(call_id)
            if not calls and not isinstance(message.get("content"), str):
                problems.append(f"message {i}: an assistant message with neither content nor tool calls")
        elif not isinstance(message.get("content"), str):
            problems.append(f"message {i}: {role} content is not text")
    if pending:
        problems.append(f"tool calls {pending} at the end were never answered")
    return problems


MESSAGE_KEYS: dict[str, frozenset[str]] = {
    "system": frozenset({"role", "content", "name"}),
    "user": frozenset({"role", "content", "name"}),
    "assistant": frozenset({"role", "content", "name", "tool_calls"}),
    "tool": frozenset({"role", "content", "tool_call_id"}),
}
"""The keys a message of each role may carry (what the agent loop writes, plus ``name``): an endpoint rejects
others, or worse, reads them."""


def detached(history: Sequence[Message]) -> list[Message]:
    """A copy of ``history`` that shares no dict or list with it: what a strategy is given, so that one that
    edits its input in place cannot change the canonical history."""
    return [_copy(message) for message in history]


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def transform_problems(history: Sequence[Message], result: object) -> list[str]:
    """Every way ``result`` is not an honest :class:`TransformResult` of ``history``; empty when it is one.

    Beyond the chat-sequence rules of :func:`message_sequence_problems`: the result is a TransformResult whose
    ``messages`` is a list of plain-JSON message dicts with only their role's keys (:data:`MESSAGE_KEYS`), at most
    :data:`MAX_CONTEXT_CHARS` characters as canonical JSON;
    ``removed`` lists ascending, distinct history indices after the pinned messages and ``inserted`` ascending,
    distinct indices of ``messages``; and what it says is true: the messages not in ``inserted`` are, in order,
    exactly the history's messages not in ``removed`` (a message the strategy rewrote is in both). The record
    keeps ``removed`` and ``inserted`` as the account of what the model was not shown; this keeps it right.
    """
    if not isinstance(result, TransformResult):
        return [f"transform returned {type(result).__name__}, not a TransformResult"]
    messages = result.messages
    if not isinstance(messages, list):
        return [f"messages is {type(messages).__name__}, not a list of message dicts"]
    problems: list[str] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            problems.append(f"message {i} is {type(message).__name__}, not a message dict")
            continue
        role = message.get("role")
        if not isinstance(role, str):
            problems.append(f"message {i} has a role of type {type(role).__name__}, not one of {sorted(ROLES)}")
            continue
        allowed = MESSAGE_KEYS.get(role)
        extra = sorted(str(k) for k in message if allowed is not None and k not in allowed)
        if extra:
            problems.append(f"message {i} ({message.get('role')}) has keys a chat message does not have: {extra}")
    if problems:
        return problems
    try:
        text = canonical_json(messages)
    except (TypeError, ValueError) as exc:
        return [f"messages are not plain JSON data: {exc}"]
    except RecursionError:
        return ["messages are not plain JSON data: nested too deeply to write as JSON"]
    size = len(text)
    if not text.isascii() and SURROGATE.search(text):  # a surrogate code point, which no request body can carry
        problems = _not_unicode(messages)
        if problems:
            return problems
    if size > MAX_CONTEXT_CHARS:
        return [
            f"the messages take {size:,} characters as JSON, over the cap of {MAX_CONTEXT_CHARS:,} (16 MiB, more than "
            "any endpoint's context window); nothing was sent"
        ]
    problems.extend(message_sequence_problems(messages))
    problems.extend(summary_call_problems(result.summary_calls))
    removed, inserted = result.removed, result.inserted
    if not _ascending(removed, PINNED, len(history)):
        problems.append(
            f"removed {removed} is not a list of ascending, distinct history indices from {PINNED} to "
            f"{len(history) - 1} (the pinned messages are always sent)"
        )
    if not _ascending(inserted, 0, len(messages)):
        problems.append(
            f"inserted {inserted} is not a list of ascending, distinct indices of the {len(messages)} messages"
        )
    if problems:
        return problems
    dropped, added = set(removed), set(inserted)
    kept = [(i, m) for i, m in enumerate(history) if i not in dropped]
    sent = [(j, m) for j, m in enumerate(messages) if j not in added]
    if [m for _, m in sent] != [m for _, m in kept]:
        where = next(
            (f"message {j} is not history message {i}" for (j, a), (i, b) in zip(sent, kept, strict=False) if a != b),
            f"{len(sent)} messages are not listed in inserted, {len(kept)} history messages not in removed",
        )
        problems.append(
            f"the messages not listed in inserted are not the history's messages not listed in removed ({where}): "
            "list every history message not sent verbatim in removed and every message the strategy wrote in inserted"
        )
    return problems


SURROGATE = re.compile("[\ud800-\udfff]")
"""A surrogate code point: text holding one is not valid Unicode, and UTF-8 cannot encode it."""


def _not_unicode(messages: Sequence[Message]) -> list[str]:
    """The first message holding text that is not valid Unicode (a lone surrogate, e.g. ``"\\ud800"``): the request
    body is UTF-8, which cannot encode it."""
    for i, message in enumerate(messages):
        try:
            json.dumps(message, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            bad = exc.object[exc.start : exc.end]
            return [
                f"message {i} holds text that is not valid Unicode (the lone surrogate {bad!r}): no request can "
                "carry it"
            ]
    return []


def summary_call_problems(calls: object) -> list[str]:
    """Every summary call a strategy reports whose counts or times are negative (or not numbers): they are added to
    the episode's tokens, latency and cost, so a negative one would hide spending from the budget."""
    if not isinstance(calls, list):
        return [f"summary_calls is {type(calls).__name__}, not a list of SummaryCall"]
    problems: list[str] = []
    for i, call in enumerate(calls):
        if not isinstance(call, SummaryCall):
            problems.append(f"summary call {i} is {type(call).__name__}, not a SummaryCall")
            continue
        usage = call.usage
        counts = {
            "harness_prompt_tokens": call.harness_prompt_tokens,
            "latency_s": call.latency_s,
            "queue_s": call.queue_s,
            "retries": call.retries,
            **(
                {
                    "usage.prompt_tokens": usage.prompt_tokens,
                    "usage.completion_tokens": usage.completion_tokens,
                    "usage.cached_tokens": usage.cached_tokens or 0,
                    "usage.cache_write_tokens": usage.cache_write_tokens or 0,
                }
                if usage is not None
                else {}
            ),
        }
        bad = [f"{k}={v!r}" for k, v in counts.items() if not isinstance(v, int | float) or not v >= 0]
        if bad:
            problems.append(f"summary call {i} has negative or missing counts: {', '.join(bad)}")
    return problems


def _ascending(indices: object, low: int, high: int) -> bool:
    if not isinstance(indices, list):
        return False
    previous = low - 1
    for index in indices:
        if isinstance(index, bool) or not isinstance(index, int) or index <= previous or index >= high:
            return False
        previous = index
    return True


def is_builtin(strategy: object) -> bool:
    """Whether ``strategy`` is one of the harness's own (its class is defined in ``contextdelta``)."""
    return type(strategy).__module__.startswith("contextdelta.")


def runs_in_own_thread(strategy: object) -> bool:
    """Whether :func:`bounded_transform` runs ``strategy``'s transform in a thread of its own: every plug-in's (a
    built-in runs on the caller's loop). A plug-in's calls of the provider it was given go back to the episode's
    loop (:class:`EpisodeLoopProvider`)."""
    return not is_builtin(strategy)


_EPISODE_LOOP: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "contextdelta_episode_loop", default=None
)
"""In a plug-in's transform thread: the loop of the episode waiting for it."""


class EpisodeLoopProvider:
    """The provider a plug-in strategy is given (``StrategyServices.summary_provider``): the run's provider, whose
    calls made from the plug-in's transform thread run on the episode's event loop, where the provider's rate
    limiter lives (:func:`bounded_transform`). Everything else is the wrapped provider's."""

    def __init__(self, wrapped: ChatProvider) -> None:
        self.wrapped = wrapped

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)

    async def complete(self, *args: Any, **kwargs: Any) -> ProviderResponse:
        home = _EPISODE_LOOP.get()
        if home is None or home is asyncio.get_running_loop():
            return await self.wrapped.complete(*args, **kwargs)
        call = asyncio.run_coroutine_threadsafe(self.wrapped.complete(*args, **kwargs), home)
        try:
            return await asyncio.wrap_future(call)
        finally:
            call.cancel()  # the transform was given up on: its call on the episode's loop ends too


async def call_transform(strategy: ContextStrategy, history: list[Message]) -> object:
    """``strategy.transform(history)``, awaited when it is a coroutine: a plug-in that wrote a plain ``def
    transform`` (the protocol's is ``async def``) works the same."""
    result: object = strategy.transform(history)
    if inspect.isawaitable(result):
        result = await result
    return result


async def bounded_transform(strategy: ContextStrategy, history: Sequence[Message], limit_s: float | None) -> object:
    """``strategy.transform`` of a :func:`detached` copy of ``history``; TimeoutError when it has not returned
    within ``limit_s`` seconds (None: no limit).

    A transform that awaits forever is cancelled at the limit. One that blocks its thread (``time.sleep``, a busy
    loop, a synchronous HTTP call) cannot be: a plug-in's (:func:`runs_in_own_thread`) runs on an event loop of its
    own in a daemon thread, which is left behind at the limit (it ends with the process) so that the episode, and
    every other episode on the caller's loop, goes on. What it returns is not checked here (see
    :func:`transform_problems`)."""
    copy = detached(history)

    async def transform() -> object:
        return await call_transform(strategy, copy)

    return await _bounded(strategy, transform, limit_s)


async def bounded_for_episode(strategy: ContextStrategy, context: EpisodeContext, limit_s: float | None) -> object:
    """``strategy.for_episode(context)`` within ``limit_s`` seconds, a plug-in's in a thread of its own as its
    transform is (:func:`bounded_transform`): one whose copy blocks is left behind, never waited for."""

    async def copy() -> object:
        return strategy.for_episode(context)

    return await _bounded(strategy, copy, limit_s)


async def _bounded(strategy: object, work: Callable[[], Awaitable[object]], limit_s: float | None) -> object:
    if not runs_in_own_thread(strategy):
        with anyio.fail_after(limit_s):
            return await work()
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[object] = loop.create_future()

    def settle(result: object, error: BaseException | None) -> None:  # on the caller's loop
        if outcome.done():  # the caller gave up
            return
        if error is not None:
            outcome.set_exception(error)
        else:
            outcome.set_result(result)

    def run() -> None:
        result: object = None
        error: BaseException | None = None
        _EPISODE_LOOP.set(loop)
        try:
            result = anyio.run(work)
        except BaseException as exc:  # handed to the caller, whatever the plug-in raised
            error = exc
        with contextlib.suppress(RuntimeError):  # the caller's loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, result, error)

    thread = threading.Thread(target=run, name=f"strategy-{getattr(strategy, 'name', '?')}", daemon=True)
    thread.start()
    with anyio.fail_after(limit_s):
        return await outcome
