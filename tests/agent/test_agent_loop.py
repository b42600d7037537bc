"""The agent loop against scripted providers: termination, records, invalid calls and information hygiene."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, ClassVar

import anyio
import pytest

from contextdelta.agent import (
    EMPTY_RESPONSE_NUDGE,
    SYSTEM_PROMPT,
    EpisodeTotals,
    EpisodeTrace,
    StepRecord,
    TerminationReason,
    invented_call_id,
    run_episode,
    system_prompt_sha256,
)
from contextdelta.canonical import canonical_json, content_hash
from contextdelta.context import (
    ContextStrategy,
    EpisodeContext,
    Message,
    StrategyBase,
    TransformResult,
    count_message_tokens,
    create_strategy,
    message_sequence_problems,
)
from contextdelta.providers import MockProvider, MockRequest, ProviderFailure, ToolCallRequest, Usage
from contextdelta.worlds import Outcome, ProtectionMode
from tests.agent.helpers import GET, INSTRUCTION, MARKER, REFUND, make_task, make_world, reply

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """Run the async tests on asyncio (the runner's backend)."""
    return "asyncio"


async def run(
    script: Any,
    *,
    strategy: ContextStrategy | None = None,
    max_steps: int = 8,
    mutations: list[dict[str, Any]] | None = None,
    mode: ProtectionMode = ProtectionMode.UNPROTECTED,
    **kwargs: Any,
) -> tuple[EpisodeTrace, MockProvider]:
    task = make_task(mutations)
    provider = MockProvider(script, model="fake-model")
    trace = await run_episode(
        task.public_task,
        make_world(task, mode),
        provider,
        strategy or create_strategy("full_history"),
        max_steps=max_steps,
        seed=7,
        **kwargs,
    )
    return trace, provider


async def test_final_answer_after_tool_calls() -> None:
    trace, provider = await run([reply(None, GET), reply("Checking.", REFUND), reply("Refunded $129.00.")])
    assert trace.termination is TerminationReason.FINAL_ANSWER
    assert trace.final_answer == "Refunded $129.00."
    assert trace.error is None
    assert [s.step for s in trace.steps] == [1, 2, 3]
    # the world really ran the calls
    assert trace.evaluator.final_state["order/order/A-1001"]["fields"]["status"] == "refunded"
    assert [e.outcome for e in trace.tool_events()] == [Outcome.EXECUTED, Outcome.EXECUTED]
    # each step sent exactly the canonical history so far (full_history)
    history = trace.canonical_history()
    assert trace.steps[2].messages == history[: len(trace.steps[2].messages)]
    assert history[-1] == {"role": "assistant", "content": "Refunded $129.00."}
    # the provider received the tool schemas and the seed at every call
    assert all(r.tools and r.seed == 7 for r in provider.requests)
    assert [r.messages for r in provider.requests] == [s.messages for s in trace.steps]
    assert trace.totals.agent_calls == 3
    assert trace.totals.agent_usage == Usage(prompt_tokens=300, completion_tokens=30)
    assert trace.totals.agent_latency_s == pytest.approx(0.75)
    assert trace.totals.summary_calls == 0
    assert trace.totals.tool_calls == 2


async def test_first_messages_are_the_fixed_prompt_and_the_task() -> None:
    trace, _ = await run(["Nothing to do."])
    system, user = trace.steps[0].messages
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    assert user["role"] == "user"
    assert user["content"].endswith(INSTRUCTION)
    assert "Sam Ortiz" in user["content"] and "Tier 2 support agent" in user["content"]
    assert "sam@corp.example" in user["content"]
    assert trace.system_prompt_sha256 == system_prompt_sha256()
    for word in ("freshness", "expected_version", "hazard", "stale", "unprotected", "contract"):
        assert word not in SYSTEM_PROMPT.lower()


async def test_each_step_records_fingerprint_tokens_and_response() -> None:
    trace, _ = await run([reply("Let me look.", GET), reply("Done.")])
    for step in trace.steps:
        assert step.messages_sha256 == content_hash(step.messages)
        assert step.harness_prompt_tokens == count_message_tokens(step.messages)
        assert step.harness_prompt_tokens > 0
        assert step.response is not None and step.response.usage is not None
        assert step.response.latency_s == 0.25
    first, second = trace.steps
    assert second.harness_prompt_tokens > first.harness_prompt_tokens
    assert first.response is not None and first.response.content == "Let me look."
    assert first.tool_calls[0].name == "get_order"
    assert json.loads(first.tool_calls[0].result)["order"]["resource"] == "order/order/A-1001"
    assert first.evaluator.tool_events[0].call_id == first.tool_calls[0].call_id
    assert trace.totals.harness_prompt_tokens == first.harness_prompt_tokens + second.harness_prompt_tokens
    assert trace.tools_sha256 == content_hash(make_world(make_task()).tool_schemas())
    assert trace.tools_harness_tokens > 0


async def test_max_steps_ends_the_episode() -> None:
    trace, provider = await run(lambda _request: reply(None, GET), max_steps=3)
    assert trace.termination is TerminationReason.MAX_STEPS
    assert len(trace.steps) == 3 and len(provider.requests) == 3
    assert trace.final_answer is None
    # the tool calls of the last step still ran and were answered
    assert len(trace.tool_events()) == 3
    assert message_sequence_problems(trace.canonical_history()) == []


@pytest.mark.parametrize("reason", ["provider_error", "context_window_exceeded"])
async def test_provider_failure_ends_with_its_reason(reason: Any) -> None:
    failure = ProviderFailure(reason, "endpoint said no", retries=2)
    trace, _ = await run([reply(None, GET), failure])
    assert trace.termination == TerminationReason(reason)
    assert trace.error == "endpoint said no"
    assert len(trace.steps) == 2
    failed = trace.steps[1]
    assert failed.response is None and failed.error == "endpoint said no"
    assert failed.messages and failed.harness_prompt_tokens > 0
    assert trace.totals.agent_calls == 2 and trace.totals.agent_retries == 2


async def test_invalid_arguments_and_unknown_tool_get_error_results_and_the_loop_goes_on() -> None:
    script = [
        reply(None, ("get_order", '{"order_id": "A-1001"')),  # malformed JSON
        reply(None, ("teleport_order", {"order_id": "A-1001"})),  # unknown tool
        reply(None, ("issue_refund", {"order_id": "A-1001"})),  # schema violation
        reply("I could not do it."),
    ]
    trace, provider = await run(script)
    assert trace.termination is TerminationReason.FINAL_ANSWER
    events = trace.tool_events()
    assert [e.outcome for e in events] == [Outcome.INVALID] * 3
    assert [e.error_code for e in events] == ["malformed_arguments", "unknown_tool", "invalid_arguments"]
    for step in trace.steps[:3]:
        (call,) = step.tool_calls
        assert "error" in json.loads(call.result)
    # the model saw each error as the tool message answering its call
    last_sent = provider.requests[-1].messages
    tool_messages = [m for m in last_sent if m["role"] == "tool"]
    assert [json.loads(m["content"])["error"]["code"] for m in tool_messages] == [e.error_code for e in events]
    # the raw malformed text is what the history keeps
    assert trace.steps[0].tool_calls[0].arguments == '{"order_id": "A-1001"'


async def test_empty_reply_is_nudged_once_then_continues() -> None:
    trace, provider = await run([reply(None), reply("Refund done.")])
    assert trace.termination is TerminationReason.FINAL_ANSWER
    first = trace.steps[0]
    assert first.note is not None and "empty" in first.note
    assert first.appended == [
        {"role": "assistant", "content": ""},
        {"role": "user", "content": EMPTY_RESPONSE_NUDGE},
    ]
    assert provider.requests[1].messages[-1] == {"role": "user", "content": EMPTY_RESPONSE_NUDGE}


@pytest.mark.parametrize("empty", [None, "", "   \n"])
async def test_second_empty_reply_is_a_provider_error_never_a_success(empty: str | None) -> None:
    trace, _ = await run([reply(empty), reply(empty), reply("too late")])
    assert trace.termination is TerminationReason.PROVIDER_ERROR
    assert trace.error == "empty response"
    assert trace.final_answer is None
    assert len(trace.steps) == 2


async def test_a_refusal_is_the_final_answer_named_in_the_note_not_an_empty_reply_nor_a_failure() -> None:
    refused = reply(None).model_copy(update={"refusal": "I can't issue refunds."})
    trace, provider = await run([refused, reply("Refunded.")])
    assert trace.termination is TerminationReason.FINAL_ANSWER and trace.error is None
    assert trace.steps[0].note == "refusal: I can't issue refunds."
    assert trace.final_answer == "I can't issue refunds." and len(provider.requests) == 1


async def test_a_refusal_beside_tool_calls_lets_the_calls_run() -> None:
    both = reply(None, GET).model_copy(update={"refusal": "I won't refund."})
    trace, _ = await run([both, reply("Done.")])
    assert trace.termination is TerminationReason.FINAL_ANSWER
    assert [e.tool for e in trace.tool_events()] == ["get_order"]


@pytest.mark.parametrize(
    ("finish", "words"),
    [("length", "cut at the completion token limit"), ("content_filter", "cut by the endpoint's content filter")],
)
async def test_a_final_answer_cut_short_is_named_in_its_step(finish: str, words: str) -> None:
    cut = reply("Refunded $129.00 and").model_copy(update={"finish_reason": finish})
    trace, _ = await run([reply(None, REFUND), cut])
    assert trace.termination is TerminationReason.FINAL_ANSWER
    assert trace.final_answer == "Refunded $129.00 and"
    assert trace.steps[-1].note == f"final answer {words} (finish_reason {finish!r})"
    assert trace.steps[0].note is None


async def test_tool_calls_cut_at_the_token_limit_run_as_sent_and_are_named() -> None:
    cut = reply(None, ("issue_refund", '{"order_id": "A-1001", "amo')).model_copy(update={"finish_reason": "length"})
    trace, _ = await run([cut, reply("Done.")])
    [event] = trace.tool_events()
    assert (event.outcome, event.error_code) == (Outcome.INVALID, "malformed_arguments")
    assert trace.steps[0].note == (
        "cut at the completion token limit (finish_reason 'length'): its tool calls may be incomplete"
    )


async def test_hidden_mutations_are_recorded_at_their_step() -> None:
    mutations = [
        {
            "id": "warehouse-ships",
            "actor": "warehouse",
            "trigger": {"after_tool_call": {"tool": "get_order", "n": 1}},
            "set": {"resource": "order/order/A-1001", "fields": {"status": "shipped"}},
        },
        {
            "id": "note-before-step-3",
            "actor": "supervisor",
            "trigger": {"before_step": {"step": 3}},
            "tool": {"name": "add_order_note", "args": {"order_id": "A-1002", "text": "checked"}},
        },
    ]
    trace, _ = await run([reply(None, GET), reply(None, GET), reply("done")], mutations=mutations)
    first, second, third = trace.steps
    assert [m.mutation_id for m in first.evaluator.mutations_after_calls] == ["warehouse-ships"]
    assert first.evaluator.mutations_after_calls[0].after_seq == first.evaluator.tool_events[0].seq
    assert first.evaluator.mutations_before_step == [] and second.evaluator.mutations_after_calls == []
    assert [m.mutation_id for m in third.evaluator.mutations_before_step] == ["note-before-step-3"]
    assert [m.mutation_id for m in trace.mutation_events()] == ["warehouse-ships", "note-before-step-3"]
    # the second read shows the other actor's change; the first result does not
    assert json.loads(first.tool_calls[0].result)["order"]["status"] == "paid"
    assert json.loads(second.tool_calls[0].result)["order"]["version"] == 2


async def test_only_public_task_data_reaches_any_message() -> None:
    mutations = [
        {
            "id": "hidden-one",
            "actor": f"actor-{MARKER}".lower(),
            "trigger": {"before_step": {"step": 2}},
            "set": {"resource": "order/order/A-1002", "fields": {"customer_name": "Changed"}},
        }
    ]
    trace, provider = await run([reply(None, GET, ("list_orders", {})), reply("done")], mutations=mutations)
    sent = canonical_json([r.messages for r in provider.requests] + [trace.canonical_history()])
    assert MARKER not in sent and MARKER.lower() not in sent
    assert "hidden-one" not in sent
    # the evaluator records do carry the evaluator-only data, in their own fields
    assert trace.mutation_events()[0].mutation_id == "hidden-one"


async def test_the_full_task_is_refused() -> None:
    task = make_task()
    with pytest.raises(TypeError, match="PublicTask"):
        await run_episode(
            task,  # type: ignore[arg-type]
            make_world(task),
            MockProvider(["x"]),
            create_strategy("full_history"),
            max_steps=2,
        )


async def test_missing_or_reused_tool_call_ids_are_made_unique() -> None:
    same = ToolCallRequest(id="dup", name="get_order", arguments='{"order_id": "A-1001"}')
    blank = ToolCallRequest(id="", name="get_order", arguments='{"order_id": "A-1002"}')
    trace, _ = await run([reply(None, same, same, blank), reply(None, same), reply("ok")])
    ids = [c.call_id for s in trace.steps for c in s.tool_calls]
    assert len(ids) == len(set(ids)) == 4
    assert ids[0] == "dup"
    assert [c.original_id for s in trace.steps for c in s.tool_calls] == ["dup", "dup", "", "dup"]
    assert message_sequence_problems(trace.canonical_history()) == []


async def test_unexpected_provider_exception_is_a_harness_error() -> None:
    def explode(_request: MockRequest) -> Any:
        raise RuntimeError("boom")

    trace, _ = await run(explode)
    assert trace.termination is TerminationReason.HARNESS_ERROR
    assert trace.error == "RuntimeError: boom"
    assert trace.error_detail is not None and "RuntimeError" in trace.error_detail
    assert len(trace.steps) == 1 and trace.steps[0].response is None


class _BrokenStrategy(StrategyBase):
    """Orphans a tool call, which the loop must refuse to send."""

    name = "broken"

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        kept = [m for m in history if m["role"] != "tool"]
        return TransformResult(messages=kept)


async def test_a_strategy_that_breaks_the_sequence_is_a_harness_error() -> None:
    trace, provider = await run([reply(None, GET), reply("done")], strategy=_BrokenStrategy())
    assert trace.termination is TerminationReason.HARNESS_ERROR
    assert trace.error is not None and "invalid message sequence" in trace.error
    assert len(provider.requests) == 1  # the broken request was never sent


async def test_budget_check_stops_before_a_step() -> None:
    seen: list[EpisodeTotals] = []

    def budget(totals: EpisodeTotals) -> str | None:
        seen.append(totals)
        return "cost cap of $0.01 reached" if totals.agent_usage.prompt_tokens >= 200 else None

    trace, provider = await run(lambda _request: reply(None, GET), budget=budget)
    assert trace.termination is TerminationReason.BUDGET_EXCEEDED
    assert trace.error == "cost cap of $0.01 reached"
    assert len(provider.requests) == 2 and len(trace.steps) == 2
    assert [t.agent_calls for t in seen] == [0, 1, 2]


async def test_on_step_sees_every_step() -> None:
    steps: list[StepRecord] = []
    trace, _ = await run([reply(None, GET), reply("done")], on_step=steps.append)
    assert [s.step for s in steps] == [1, 2]
    assert steps == trace.steps


def _summariser(request: MockRequest) -> Any:
    if request.messages[0]["content"].startswith("ContextDelta summary prompt"):
        return reply(f"summary #{request.messages[1]['content'].count('Step ')}", usage=Usage(prompt_tokens=50))
    # deterministic ids, so identical episodes have identical histories
    call = ToolCallRequest(id=f"c{len(request.messages)}", name="get_order", arguments='{"order_id": "A-1001"}')
    return reply(None, call) if len(request.messages) < 40 else reply("done")


async def test_summary_calls_are_recorded_apart_and_added_to_totals() -> None:
    summary = MockProvider(_summariser, model="summary-model")
    strategy = create_strategy("semantic_summary", summary_provider=summary, summary_trigger=2, summary_keep=1)
    trace, _ = await run(_summariser, strategy=strategy, max_steps=5)
    assert trace.termination is TerminationReason.MAX_STEPS
    calls = [c for s in trace.steps for c in s.context.summary_calls]
    # groups: step k sees k-1 groups; trigger 2 means steps 4 and 5 summarise (one new batch each)
    assert [s.step for s in trace.steps if s.context.summary_calls] == [4, 5]
    assert [c.new_steps for c in calls] == [[1, 2], [3]]
    assert trace.totals.summary_calls == 2
    assert trace.totals.summary_usage == Usage(prompt_tokens=100)
    assert trace.totals.agent_usage == Usage(prompt_tokens=500, completion_tokens=50)
    assert trace.totals.latency_s == pytest.approx(trace.totals.agent_latency_s + trace.totals.summary_latency_s)
    assert trace.strategy.name == "semantic_summary"
    assert trace.strategy.params["summary_model"] == "summary-model"
    step5 = trace.steps[4]
    assert step5.context.removed == list(range(2, 2 + 3 * 2))
    assert step5.context.inserted == [2]
    assert step5.messages[2]["content"].startswith("Summary of your earlier steps 1-3")


async def test_a_failed_summary_call_ends_the_episode_with_its_reason() -> None:
    summary = MockProvider([ProviderFailure("context_window_exceeded", "summary too long")])
    strategy = create_strategy("semantic_summary", summary_provider=summary, summary_trigger=1, summary_keep=1)
    trace, provider = await run(lambda _request: reply(None, GET), strategy=strategy)
    assert trace.termination is TerminationReason.CONTEXT_WINDOW_EXCEEDED
    assert trace.error == "summary call failed: summary too long"
    assert len(provider.requests) == 2  # the third agent call never happened
    assert trace.steps[-1].response is None


async def test_episodes_sharing_one_strategy_run_concurrently_without_sharing_state() -> None:
    summary = MockProvider(_summariser, model="summary-model")
    strategy = create_strategy("semantic_summary", summary_provider=summary, summary_trigger=2, summary_keep=1)
    traces: list[EpisodeTrace] = []

    async def one() -> None:
        trace, _ = await run(_summariser, strategy=strategy, max_steps=5)
        traces.append(trace)

    async with anyio.create_task_group() as group:
        for _ in range(4):
            group.start_soon(one)
    assert len(traces) == 4
    fingerprints = {tuple(s.messages_sha256 for s in t.steps) for t in traces}
    assert len(fingerprints) == 1  # identical episodes, independent summary caches
    assert all(t.totals.summary_calls == 2 for t in traces)


async def test_trace_round_trips_through_json() -> None:
    trace, _ = await run([reply("thinking", GET, REFUND), reply("done")], mode=ProtectionMode.FRESHNESS_CONTRACT)
    again = EpisodeTrace.model_validate_json(trace.model_dump_json())
    assert again == trace
    assert again.protection_mode == "freshness_contract"
    # under the contract the refund without expected_version is a schema violation the model can read
    assert trace.tool_events()[1].error_code == "invalid_arguments"


class _Recorder(StrategyBase):
    name = "recorder"
    contexts: ClassVar[list[EpisodeContext]] = []  # a class's: each episode copy gets its own list attributes

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        self.contexts.append(self.episode)
        return TransformResult(messages=list(history))


async def test_strategy_gets_the_seed_and_the_write_tools() -> None:
    recorder = _Recorder()
    _Recorder.contexts.clear()
    await run([reply("done")], strategy=recorder)
    (context,) = recorder.contexts
    assert context.seed == 7
    assert context.write_tools == {"issue_refund", "cancel_order", "update_shipping_address", "add_order_note"}


async def test_invented_tool_call_ids_are_nine_letters_and_digits_from_seed_step_and_index() -> None:
    """Mistral's API rejects a tool-call id that is not exactly 9 of [a-zA-Z0-9]: every id the loop invents for a
    call without one (or with one already used) has that shape, is unique in the episode and the same in every run."""
    same = ToolCallRequest(id="dup", name="get_order", arguments='{"order_id": "A-1001"}')
    blank = ToolCallRequest(id="", name="get_order", arguments='{"order_id": "A-1002"}')
    script = [reply(None, blank, blank, same, same), reply(None, blank, same), reply("ok")]
    first, _ = await run(list(script))
    again, _ = await run(list(script))
    ids = [c.call_id for s in first.steps for c in s.tool_calls]
    assert ids == [c.call_id for s in again.steps for c in s.tool_calls]
    assert len(ids) == len(set(ids)) == 6
    invented = [i for i in ids if i != "dup"]
    assert len(invented) == 5
    assert all(re.fullmatch(r"[a-zA-Z0-9]{9}", i) for i in invented), invented
    assert ids[:2] == [invented_call_id(7, 1, 0), invented_call_id(7, 1, 1)]
    assert ids[4] == invented_call_id(7, 2, 0)
    assert invented_call_id(8, 1, 0) != invented_call_id(7, 1, 0)
    assert message_sequence_problems(first.canonical_history()) == []
