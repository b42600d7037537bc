"""Strategy plug-ins that misbehave in ``transform``: each breaks its own episode as a ``harness_error`` that names
the strategy, never a success; the canonical history and the record stay what the world and the model made."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from contextdelta.agent import PLUGIN_MODEL_CALLS, EpisodeTrace, TerminationReason, run_episode
from contextdelta.canonical import content_hash
from contextdelta.context import (
    MAX_CONTEXT_CHARS,
    ContextStrategy,
    EpisodeContext,
    Message,
    RegisteredStrategy,
    StrategyBase,
    StrategyServices,
    StrategySource,
    SummaryCall,
    TransformResult,
    build_strategy,
    create_strategy,
)
from contextdelta.providers import MockProvider, MockRequest, ToolCallRequest, Usage
from contextdelta.verify._contexts import context_divergences
from tests.agent.helpers import GET, REFUND, make_task, make_world, reply

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def run(strategy: ContextStrategy, *, timeout_s: float | None = None) -> tuple[EpisodeTrace, MockProvider]:
    task = make_task(None)
    provider = MockProvider([reply(None, GET), reply(None, REFUND), reply("Refunded.")], model="fake-model")
    if timeout_s is not None:
        provider.timeout_s = timeout_s  # type: ignore[attr-defined]  # as the HTTP provider's --timeout-s
    trace = await run_episode(task.public_task, make_world(task), provider, strategy, max_steps=5, seed=7)
    return trace, provider


class _Plugin(StrategyBase):
    name = "plug"
    deterministic = True

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        return TransformResult(messages=list(history))


class Raises(_Plugin):
    async def transform(self, history: Sequence[Message]) -> TransformResult:
        raise KeyError("no such key")


class ReturnsAList(_Plugin):
    async def transform(self, history: Sequence[Message]) -> Any:
        return list(history)


class NotDicts(_Plugin):
    async def transform(self, history: Sequence[Message]) -> TransformResult:
        not_messages: list[Any] = [1, 2]
        return TransformResult.model_construct(messages=not_messages, removed=[], inserted=[], summary_calls=[])


class ExtraKey(_Plugin):
    async def transform(self, history: Sequence[Message]) -> TransformResult:
        messages = [dict(m) for m in history]
        messages[1]["cache_hint"] = "ephemeral"
        return TransformResult(messages=messages)


class NotJson(_Plugin):
    async def transform(self, history: Sequence[Message]) -> TransformResult:
        messages = [dict(m) for m in history]
        messages[1]["content"] = {"a", "set"}
        return TransformResult.model_construct(messages=messages, removed=[], inserted=[], summary_calls=[])


class NestedTooDeeply(_Plugin):
    async def transform(self, history: Sequence[Message]) -> TransformResult:
        deep: list[Any] = []
        for _ in range(100_000):
            deep = [deep]
        messages = [*history, {"role": "user", "content": "see", "name": deep}]
        return TransformResult.model_construct(messages=messages, removed=[], inserted=[2], summary_calls=[])


class ArgumentsAsObject(_Plugin):
    """Rewrites each call's arguments as a JSON object (the endpoint takes a string) and declares it honestly."""

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        messages = [dict(m) for m in history]
        rewritten = []
        for i, message in enumerate(messages):
            if message.get("tool_calls"):
                calls = [
                    {**c, "function": {**c["function"], "arguments": {"order_id": "A-1001"}}}
                    for c in message["tool_calls"]
                ]
                messages[i] = {**message, "tool_calls": calls}
                rewritten.append(i)
        return TransformResult(messages=messages, removed=rewritten, inserted=list(rewritten))


class LoneSurrogate(_Plugin):
    async def transform(self, history: Sequence[Message]) -> TransformResult:
        note = {"role": "user", "content": "emoji \U0001f600 fine, half of one \ud83d not"}
        return TransformResult(messages=[*history, note], inserted=[len(history)])


class ToolCallsNotAList(_Plugin):
    async def transform(self, history: Sequence[Message]) -> TransformResult:
        note = {"role": "assistant", "content": "noted", "tool_calls": 5}
        return TransformResult(messages=[*history, note], inserted=[len(history)])


class RoleNotText(_Plugin):
    async def transform(self, history: Sequence[Message]) -> TransformResult:
        note = {"role": ["user"], "content": "noted"}
        return TransformResult(messages=[*history, note], inserted=[len(history)])


class ClearsInPlace(_Plugin):
    """Blanks every tool result by editing the history it was given, and says it sent everything verbatim."""

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        for message in history:
            if message["role"] == "tool":
                message["content"] = "CLEARED"
        return TransformResult(messages=list(history))


class ClearsHonestly(_Plugin):
    """The same clearing on copies, declared: the cleared messages are in ``removed`` and ``inserted``."""

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        cleared = [i for i, m in enumerate(history) if m["role"] == "tool"]
        messages = [{**m, "content": "CLEARED"} if i in cleared else m for i, m in enumerate(history)]
        return TransformResult(messages=messages, removed=cleared, inserted=list(cleared))


class RemovesOutOfRange(_Plugin):
    async def transform(self, history: Sequence[Message]) -> TransformResult:
        return TransformResult(messages=list(history), removed=[len(history) + 5])


class Hangs(_Plugin):
    async def transform(self, history: Sequence[Message]) -> TransformResult:
        import anyio

        await anyio.sleep(3600)
        raise AssertionError("unreachable")


class Enormous(_Plugin):
    """From step 2 on, a declared, well-formed context of 17 MiB: one user message after the instruction."""

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        if len(history) == 2:
            return TransformResult(messages=list(history))
        note = {"role": "user", "content": "x" * (17 * 1024 * 1024)}
        return TransformResult(messages=[*history[:2], note, *history[2:]], inserted=[2])


class ManyBadMessages(_Plugin):
    async def transform(self, history: Sequence[Message]) -> TransformResult:
        junk: list[Any] = [*history, *([{"role": "robot", "content": "?"}] * 100_000)]
        return TransformResult.model_construct(messages=junk, removed=[], inserted=[], summary_calls=[])


def _after_step_one(history: Sequence[Message]) -> bool:
    return any(m["role"] == "assistant" for m in history)


class Blocks(_Plugin):
    """Blocks its thread (a synchronous sleep, as a plug-in calling a blocking library does) from step 2 on."""

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        if _after_step_one(history):
            time.sleep(3600)
        return TransformResult(messages=list(history))


class AwaitsForever(_Plugin):
    """Not deterministic (it could call a model): from step 2 on, awaits something that never comes."""

    deterministic = False

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        if _after_step_one(history):
            await anyio.Event().wait()
        return TransformResult(messages=list(history))


class Exits(_Plugin):
    async def transform(self, history: Sequence[Message]) -> TransformResult:
        sys.exit(3)


@pytest.mark.parametrize(
    ("strategy", "words"),
    [
        (Raises(), "strategy plug: transform failed at step 1: KeyError: 'no such key'"),
        (ReturnsAList(), "transform returned list, not a TransformResult"),
        (NotDicts(), "message 0 is int, not a message dict"),
        (ExtraKey(), "message 1 (user) has keys a chat message does not have: ['cache_hint']"),
        (NotJson(), "messages are not plain JSON data"),
        (RoleNotText(), "message 2 has a role of type list, not one of ['assistant', 'system', 'tool', 'user']"),
        (ToolCallsNotAList(), "message 2: tool_calls is int, not a list of tool calls"),
        (
            LoneSurrogate(),
            "message 2 holds text that is not valid Unicode (the lone surrogate '\\ud83d'): no request can carry it",
        ),
        (ArgumentsAsObject(), "has arguments of type dict, not a JSON string"),
        (NestedTooDeeply(), "messages are not plain JSON data: nested too deeply to write as JSON"),
        (ClearsInPlace(), "the messages not listed in inserted are not the history's messages not listed in removed"),
        (RemovesOutOfRange(), "is not a list of ascending, distinct history indices"),
        (Exits(), "strategy plug: transform failed at step 1: SystemExit: 3"),
    ],
)
async def test_a_broken_transform_is_a_harness_error_naming_the_strategy(strategy: _Plugin, words: str) -> None:
    trace, provider = await run(strategy)
    assert trace.termination is TerminationReason.HARNESS_ERROR
    assert trace.error is not None and "strategy plug" in trace.error and words in trace.error, trace.error
    assert len(provider.requests) == len(trace.steps) - 1  # the broken context was never sent
    assert trace.final_answer is None


async def test_a_strategy_editing_its_input_leaves_the_canonical_history_and_the_record_intact() -> None:
    trace, _ = await run(ClearsInPlace())
    # the first step's context is the two pinned messages: nothing to clear, so it was sent
    assert trace.termination is TerminationReason.HARNESS_ERROR and len(trace.steps) == 2
    tool_message = trace.steps[0].appended[1]
    assert tool_message["role"] == "tool" and tool_message["content"] == trace.steps[0].tool_calls[0].result
    assert "CLEARED" not in tool_message["content"]
    # the canonical history keeps what the world returned
    assert all(m.get("content") != "CLEARED" for m in trace.canonical_history())


async def test_a_strategy_that_declares_what_it_rewrote_runs() -> None:
    trace, provider = await run(ClearsHonestly())
    assert trace.termination is TerminationReason.FINAL_ANSWER
    assert [m["content"] for m in provider.requests[1].messages if m["role"] == "tool"] == ["CLEARED"]
    assert trace.steps[1].context.removed == [3] and trace.steps[1].context.inserted == [3]
    assert all(m.get("content") != "CLEARED" for m in trace.canonical_history())


async def test_a_deterministic_transform_that_never_returns_is_bounded_by_the_call_timeout() -> None:
    import anyio

    with anyio.fail_after(30):  # without the bound the episode never ends
        trace, _ = await run(Hangs(), timeout_s=0.2)
    assert trace.termination is TerminationReason.HARNESS_ERROR
    assert (
        trace.error
        == "HarnessError: strategy plug: transform did not return within 0.2 s at step 1 (the per-call timeout, "
        "--timeout-s)"
    )


@pytest.mark.slow
async def test_an_enormous_context_is_refused_at_its_step_before_anything_is_sent() -> None:
    """A plug-in that returns 17 MiB of messages: its episode ends as a harness error naming the strategy, the step
    and the cap, and the context never reaches the model (nor the token counter, which would take seconds)."""
    trace, provider = await run(Enormous())
    assert trace.termination is TerminationReason.HARNESS_ERROR
    assert len(trace.steps) == 2 and len(provider.requests) == 1
    assert trace.error is not None and trace.error.startswith(
        "HarnessError: strategy plug produced an invalid message sequence"
    )
    assert "at step 2" in trace.error
    assert f"over the cap of {MAX_CONTEXT_CHARS:,}" in trace.error and "nothing was sent" in trace.error
    assert trace.steps[1].messages == [] and trace.totals.harness_prompt_tokens == trace.steps[0].harness_prompt_tokens


async def test_a_context_with_a_hundred_thousand_problems_is_named_in_one_short_error() -> None:
    trace, provider = await run(ManyBadMessages())
    assert trace.termination is TerminationReason.HARNESS_ERROR and provider.requests == []
    assert trace.error is not None and len(trace.error) < 2000, len(trace.error or "")
    assert "message 2: unknown role 'robot'" in trace.error and "and 99995 more" in trace.error


@pytest.mark.slow
async def test_a_plugin_that_blocks_its_thread_is_left_behind_at_the_call_timeout_and_the_episode_ends() -> None:
    """A deterministic plug-in whose transform blocks (time.sleep) at step 2: the episode ends at --timeout-s as a
    harness error naming the strategy and the step, and the event loop (every other episode on it) never stalls."""
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.05)
            ticks += 1

    with anyio.fail_after(30):  # without the bound the episode never ends
        async with anyio.create_task_group() as group:
            group.start_soon(tick)
            trace, provider = await run(Blocks(), timeout_s=0.5)
            group.cancel_scope.cancel()
    assert trace.termination is TerminationReason.HARNESS_ERROR and len(provider.requests) == 1
    assert trace.error == (
        "HarnessError: strategy plug: transform did not return within 0.5 s at step 2 (the per-call timeout, "
        "--timeout-s)"
    )
    assert ticks >= 5  # the loop went on while the plug-in slept


@pytest.mark.slow
async def test_a_plugin_that_is_not_deterministic_is_bounded_by_the_time_of_its_model_calls() -> None:
    with anyio.fail_after(30):
        trace, provider = await run(AwaitsForever(), timeout_s=0.1)
    assert trace.termination is TerminationReason.HARNESS_ERROR and len(provider.requests) == 1
    assert trace.error == (
        f"HarnessError: strategy plug: transform did not return within {PLUGIN_MODEL_CALLS * 0.1:g} s at step 2 (the "
        f"time of {PLUGIN_MODEL_CALLS} model calls of up to 0.1 s each)"
    )


class ForEpisodeReturnsNone(_Plugin):
    def for_episode(self, context: EpisodeContext) -> Any:
        return None


class ForEpisodeFails(_Plugin):
    def for_episode(self, context: EpisodeContext) -> Any:
        raise RuntimeError("no copy today")


@pytest.mark.parametrize(
    ("strategy", "words"),
    [
        (ForEpisodeReturnsNone(), "strategy plug: for_episode returned NoneType, not a strategy"),
        (ForEpisodeFails(), "strategy plug: for_episode failed: RuntimeError: no copy today"),
    ],
)
async def test_a_for_episode_that_gives_no_strategy_ends_its_episode_not_the_run(strategy: _Plugin, words: str) -> None:
    """The record still names the configured strategy (a worker used to stop the whole run on the trace it could not
    write)."""
    trace, provider = await run(strategy)
    assert trace.termination is TerminationReason.HARNESS_ERROR and provider.requests == []
    assert trace.error is not None and words in trace.error, trace.error
    assert (trace.strategy.name, trace.strategy.config_hash) == ("plug", strategy.config_hash)


class PlainDef(_Plugin):
    """``def transform`` where the protocol says ``async def``."""

    def transform(self, history: Sequence[Message]) -> TransformResult:  # type: ignore[override]
        return TransformResult(messages=list(history))


class PlainDefNotDeterministic(PlainDef):
    deterministic = False


@pytest.mark.parametrize("strategy", [PlainDef(), PlainDefNotDeterministic()])
async def test_a_plain_def_transform_runs_as_an_async_one(strategy: _Plugin) -> None:
    trace, provider = await run(strategy)
    assert trace.termination is TerminationReason.FINAL_ANSWER, trace.error
    assert len(provider.requests) == 3


@pytest.mark.slow
def test_a_history_the_model_made_too_big_is_a_context_window_overflow_not_the_strategys_error() -> None:
    """A tool call with 17 MiB of arguments: full_history sends the history verbatim, which is over the cap; the
    episode ends as context_window_exceeded at step 2, nothing sent, and full_history is not blamed."""
    task = make_task(None)
    huge = ToolCallRequest(id="c1", name="get_order", arguments='{"order_id": "' + "A" * (17 * 1024 * 1024) + '"}')
    provider = MockProvider([reply(None, huge), reply("done")], model="fake-model")
    trace = anyio.run(
        lambda: run_episode(
            task.public_task, make_world(task), provider, create_strategy("full_history"), max_steps=5, seed=7
        )
    )
    assert trace.termination is TerminationReason.CONTEXT_WINDOW_EXCEEDED, trace.error
    assert len(provider.requests) == 1 and len(trace.steps) == 2
    assert (
        trace.error is not None and "the episode's history takes" in trace.error and "full_history" not in trace.error
    )
    # verify re-derives the same (unsent) context of the last step: no finding
    assert context_divergences(trace, create_strategy("full_history"), make_world(task)) == []


class BlocksNotDeterministic(Blocks):
    deterministic = False


@pytest.mark.slow
async def test_a_plugin_that_is_not_deterministic_and_blocks_its_thread_is_left_behind_too() -> None:
    with anyio.fail_after(30):
        trace, provider = await run(BlocksNotDeterministic(), timeout_s=0.1)
    assert trace.termination is TerminationReason.HARNESS_ERROR and len(provider.requests) == 1
    assert trace.error is not None and "transform did not return within 0.4 s at step 2" in trace.error


class AsksTheModel(StrategyBase):
    """Not deterministic: asks its summary provider once per transform, from its own thread."""

    name = "asks"
    deterministic = False

    def __init__(self, services: StrategyServices) -> None:
        super().__init__()
        self.services = services

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        provider = self.services.summary_provider
        assert provider is not None
        await provider.complete([{"role": "user", "content": "hello"}], None)
        return TransformResult(messages=list(history))


async def test_a_plugins_model_calls_run_on_the_episodes_loop_while_its_transform_runs_in_its_own_thread() -> None:
    """The provider's rate limiter lives on the episode's loop: a plug-in's calls go back there."""
    episode_loop = asyncio.get_running_loop()
    loops: list[tuple[asyncio.AbstractEventLoop, int]] = []

    def answer(request: MockRequest) -> str:
        loops.append((asyncio.get_running_loop(), threading.get_ident()))
        return "a summary"

    summary_provider = MockProvider(answer, model="summary-model")
    strategy = build_strategy(
        RegisteredStrategy("asks", AsksTheModel, StrategySource(kind="module", target="tests:AsksTheModel")),
        {},
        StrategyServices(summary_provider=summary_provider),
    )[0]
    trace, _ = await run(strategy)
    assert trace.termination is TerminationReason.FINAL_ANSWER, trace.error
    assert len(loops) == 3 and {loop for loop, _ in loops} == {episode_loop}
    assert {thread for _, thread in loops} == {threading.get_ident()}


class EditsWhatItSentEarlier(_Plugin):
    """Keeps the messages it returned and, at the next step, renames the tool calls in them."""

    def _reset(self) -> None:
        self.sent: list[Message] = []

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        for message in self.sent:
            for call in message.get("tool_calls") or []:
                call["function"]["name"] = "LATER"
        self.sent = list(history)
        return TransformResult(messages=list(history))


async def test_a_plugin_editing_messages_it_returned_earlier_cannot_change_what_was_sent_or_recorded() -> None:
    trace, provider = await run(EditsWhatItSentEarlier())
    assert trace.termination is TerminationReason.FINAL_ANSWER, trace.error
    for step, request in zip(trace.steps, provider.requests, strict=True):
        assert content_hash(step.messages) == step.messages_sha256
        assert step.messages == request.messages
        assert "LATER" not in json.dumps(step.messages)


class RaisesAnEssay(_Plugin):
    async def transform(self, history: Sequence[Message]) -> TransformResult:
        raise ValueError("why " * 5_000_000)


async def test_a_plugin_exception_of_megabytes_is_recorded_in_a_readable_part() -> None:
    trace, _ = await run(RaisesAnEssay())
    assert trace.termination is TerminationReason.HARNESS_ERROR
    assert trace.error is not None and trace.error.startswith("HarnessError: strategy plug: transform failed at step 1")
    assert len(trace.error) < 2_500 and "characters in all" in trace.error
    assert trace.error_detail is not None and len(trace.error_detail) < 21_000
    assert trace.error_detail.startswith("Traceback") and "characters in all" in trace.error_detail


def _summary_call(content: str, usage: Usage | None, latency_s: float) -> SummaryCall:
    """A summary call a plug-in reports, covering no step."""
    return SummaryCall(
        prompt_version="1",
        model=None,
        new_steps=[],
        covers_steps=[],
        messages=[],
        messages_sha256="",
        harness_prompt_tokens=0,
        content=content,
        usage=usage,
        latency_s=latency_s,
    )


class ReportsNegativeUsage(_Plugin):
    """Not deterministic: says its summary call used -1,000,000 prompt tokens (which would pay back the budget)."""

    deterministic = False

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        call = _summary_call("summary", Usage(prompt_tokens=-1_000_000, completion_tokens=5), latency_s=0.1)
        return TransformResult(messages=list(history), summary_calls=[call])


async def test_a_summary_call_with_negative_counts_is_refused_and_not_counted() -> None:
    trace, provider = await run(ReportsNegativeUsage())
    assert trace.termination is TerminationReason.HARNESS_ERROR and provider.requests == []
    assert trace.error is not None and "summary call 0 has negative or missing counts" in trace.error
    assert "usage.prompt_tokens=-1000000" in trace.error
    assert trace.totals.summary_calls == 0 and trace.totals.summary_usage.prompt_tokens == 0


class EditsItsSummaryCallLater(_Plugin):
    """Not deterministic: reports one summary call per step and, at the next step, rewrites the one it reported."""

    deterministic = False

    def _reset(self) -> None:
        self.calls: list[SummaryCall] = []

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        for call in self.calls:
            call.content = "LATER"
        call = _summary_call("as it was", None, latency_s=0.0)
        self.calls.append(call)
        return TransformResult(messages=list(history), summary_calls=[call])


async def test_a_plugin_editing_a_summary_call_it_reported_earlier_cannot_change_the_record() -> None:
    trace, _ = await run(EditsItsSummaryCallLater())
    assert trace.termination is TerminationReason.FINAL_ANSWER, trace.error
    assert [c.content for s in trace.steps for c in s.context.summary_calls] == ["as it was"] * 3


class CopyBlocks(_Plugin):
    def for_episode(self, context: EpisodeContext) -> Any:
        time.sleep(3600)


@pytest.mark.slow
async def test_a_plugin_whose_for_episode_blocks_is_left_behind_at_the_call_timeout() -> None:
    with anyio.fail_after(30):  # without the bound the episode never starts, nor ends
        trace, provider = await run(CopyBlocks(), timeout_s=0.3)
    assert trace.termination is TerminationReason.HARNESS_ERROR and provider.requests == []
    assert trace.error == (
        "HarnessError: strategy plug: for_episode did not return within 0.3 s (the per-call timeout, --timeout-s)"
    )
