"""Each context strategy on hand-built histories (SPEC section 7)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextdelta.context import (
    STRATEGY_NAMES,
    SUMMARY_MARKER,
    EpisodeContext,
    FullHistory,
    HistoryError,
    LastN,
    Message,
    SemanticSummary,
    TypedStateDigest,
    create_strategy,
    message_sequence_problems,
    parse_history,
)
from contextdelta.providers import MockProvider, MockRequest, OpenAIProvider, ProviderFailure, Usage, mock_response
from tests.context.helpers import INSTRUCTION, SYSTEM, WRITE_TOOLS, Call, history, order, read, reads
from tests.providers.conftest import RETRIES, RawEndpoint, completion

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """Run the async tests on asyncio (the runner's backend)."""
    return "asyncio"


def digest_of(messages: list[Message]) -> dict[str, Any]:
    """The digest JSON inside the digest message at index 2."""
    text = messages[2]["content"]
    digest: dict[str, Any] = json.loads(text.split("\n", 1)[1])
    return digest


def digest_strategy(trigger: int = 6, keep: int = 3) -> TypedStateDigest:
    strategy = TypedStateDigest(trigger, keep).for_episode(EpisodeContext(write_tools=WRITE_TOOLS))
    assert isinstance(strategy, TypedStateDigest)
    return strategy


# ---- history parsing ----------------------------------------------------------------------------------------


def test_parse_history_finds_groups_loose_messages_and_steps() -> None:
    messages = history([read(1)], "nudge", [read(1), read(2, oid="A-1002")])
    segments = parse_history(messages)
    assert [(s.kind, s.start, s.end, s.step) for s in segments] == [
        ("group", 2, 4, 1),
        ("loose", 4, 5, 2),
        ("loose", 5, 6, None),
        ("group", 6, 9, 3),
    ]


@pytest.mark.parametrize(
    "broken",
    [
        [SYSTEM],
        [INSTRUCTION, SYSTEM],
        [SYSTEM, INSTRUCTION, {"role": "tool", "tool_call_id": "x", "content": "{}"}],
        history([read(1)])[:-1],  # call without its result
    ],
)
def test_parse_history_rejects_malformed_histories(broken: list[Message]) -> None:
    with pytest.raises(HistoryError):
        parse_history(broken)


# ---- full_history and last_n ----------------------------------------------------------------------------------


async def test_full_history_sends_everything() -> None:
    messages = history(*reads(9))
    result = await FullHistory().transform(messages)
    assert result.messages == messages and result.removed == [] and result.inserted == []


@pytest.mark.parametrize("n", [0, 1, 3, 5])
async def test_last_n_keeps_exactly_the_last_n_groups_and_the_pinned_messages(n: int) -> None:
    messages = history(*reads(7))
    result = await LastN(n).transform(messages)
    assert result.messages[:2] == [SYSTEM, INSTRUCTION]
    kept = result.messages[2:]
    assert kept == messages[len(messages) - 2 * n :] if n else kept == []
    assert len([m for m in kept if m["role"] == "assistant"]) == n
    assert result.removed == list(range(2, len(messages) - 2 * n))
    assert message_sequence_problems(result.messages) == []


async def test_last_n_with_few_groups_drops_nothing() -> None:
    messages = history(*reads(3))
    result = await LastN(3).transform(messages)
    assert result.messages == messages and result.removed == []


async def test_last_n_keeps_loose_messages_inside_the_kept_tail_only() -> None:
    messages = history([read(1)], "nudge", [read(2)], [read(3)], "nudge", [read(4)])
    result = await LastN(2).transform(messages)
    # the kept tail starts at the second-last group: that group, the later nudge, and the last group
    assert result.messages[2:] == messages[8:]
    assert result.removed == list(range(2, 8))
    roles = ["system", "user", "assistant", "tool", "assistant", "user", "assistant", "tool"]
    assert [m["role"] for m in result.messages] == roles


# ---- typed_state_digest -----------------------------------------------------------------------------------------


async def test_digest_waits_for_the_trigger() -> None:
    messages = history(*reads(6))
    result = await digest_strategy().transform(messages)
    assert result.messages == messages and result.removed == []


async def test_digest_replaces_evicted_groups_and_keeps_the_last_groups_verbatim() -> None:
    messages = history(*reads(7))
    result = await digest_strategy().transform(messages)
    assert result.messages[:2] == [SYSTEM, INSTRUCTION]
    assert result.messages[3:] == messages[-6:]
    assert result.inserted == [2] and result.removed == list(range(2, 10))
    assert result.messages[2]["role"] == "user"
    digest = digest_of(result.messages)
    assert digest["covers_steps"] == [1, 4]
    assert [r["resource"] for r in digest["resources"]] == [f"order/order/A-{100 + i}" for i in range(1, 5)]
    entry = digest["resources"][0]
    assert entry == {
        "resource": "order/order/A-101",
        "version": 1,
        "state": {"status": "paid", "total_cents": 12900},
        "observed_step": 1,
        "source_tool": "get_order",
        "refresh_before": "write",
        "conflicts": [],
    }
    assert message_sequence_problems(result.messages) == []


async def test_digest_is_byte_identical_for_identical_histories() -> None:
    groups = [[read(1)], [read(2, "shipped", tool="list_orders")], *reads(6)]
    first = await digest_strategy().transform(history(*groups))
    second = await digest_strategy().transform(history(*groups))
    assert first.messages[2]["content"].encode() == second.messages[2]["content"].encode()
    # and a different history gives a different digest
    other = await digest_strategy().transform(history([read(1)], [read(3, "shipped")], *reads(6)))
    assert other.messages[2]["content"] != first.messages[2]["content"]


async def test_digest_lists_conflicting_observations_separately_and_keeps_the_last() -> None:
    groups = [
        [read(1, "paid", tool="list_orders")],
        [read(2, "shipped", tool="get_order")],  # changed by someone else: a conflict
        [read(2, "shipped", tool="list_orders")],  # agrees with the previous observation
        [read(2, "paid", tool="list_orders")],  # same version, different state: a conflict
        *reads(3),
    ]
    digest = digest_of((await digest_strategy(trigger=6, keep=3).transform(history(*groups))).messages)
    (entry,) = [r for r in digest["resources"] if r["resource"] == "order/order/A-1001"]
    assert entry["version"] == 2 and entry["state"]["status"] == "paid" and entry["source_tool"] == "list_orders"
    assert entry["observed_step"] == 4
    assert entry["conflicts"] == [
        {
            "earlier": {
                "version": 1,
                "state": {"status": "paid", "total_cents": 12900},
                "step": 1,
                "tool": "list_orders",
            },
            "later": {
                "version": 2,
                "state": {"status": "shipped", "total_cents": 12900},
                "step": 2,
                "tool": "get_order",
            },
        },
        {
            "earlier": {
                "version": 2,
                "state": {"status": "shipped", "total_cents": 12900},
                "step": 3,
                "tool": "list_orders",
            },
            "later": {
                "version": 2,
                "state": {"status": "paid", "total_cents": 12900},
                "step": 4,
                "tool": "list_orders",
            },
        },
    ]


async def test_digest_lists_own_writes_with_outcomes_and_own_writes_are_not_conflicts() -> None:
    refund_args = {"order_id": "A-1001", "amount_cents": 12900, "reason": "damaged"}
    groups: list[list[Call]] = [
        [read(1)],
        [("issue_refund", refund_args, {"refunded_cents": 12900, "order": order(2, "refunded")})],
        [("cancel_order", {"order_id": "A-1001"}, {"error": {"code": "not_cancellable", "message": "refunded"}})],
        [("add_order_note", "{not json", {"error": {"code": "malformed_arguments", "message": "bad"}})],
        *reads(3),
    ]
    digest = digest_of((await digest_strategy().transform(history(*groups))).messages)
    assert digest["writes"] == [
        {
            "step": 2,
            "tool": "issue_refund",
            "arguments": refund_args,
            "outcome": "executed",
            "error_code": None,
            "resources_shown": ["order/order/A-1001"],
        },
        {
            "step": 3,
            "tool": "cancel_order",
            "arguments": {"order_id": "A-1001"},
            "outcome": "error",
            "error_code": "not_cancellable",
            "resources_shown": [],
        },
        {
            "step": 4,
            "tool": "add_order_note",
            "arguments": "{not json",
            "outcome": "error",
            "error_code": "malformed_arguments",
            "resources_shown": [],
        },
    ]
    (entry,) = [r for r in digest["resources"] if r["resource"] == "order/order/A-1001"]
    assert entry["version"] == 2 and entry["state"]["status"] == "refunded" and entry["conflicts"] == []


async def test_digest_flags_an_own_write_that_skipped_a_version() -> None:
    groups: list[list[Call]] = [
        [read(1)],
        [("add_order_note", {"order_id": "A-1001", "text": "x"}, {"order": order(3)})],  # someone wrote v2 between
        *reads(5),
    ]
    digest = digest_of((await digest_strategy().transform(history(*groups))).messages)
    (entry,) = [r for r in digest["resources"] if r["resource"] == "order/order/A-1001"]
    assert [(c["earlier"]["version"], c["later"]["version"]) for c in entry["conflicts"]] == [(1, 3)]


async def test_digest_uses_only_tool_results_not_assistant_text() -> None:
    fake = json.dumps(order(99, "cancelled"))
    messages = history(*reads(7))
    messages[2] = {**messages[2], "content": f"I believe the order is {fake}"}
    digest = digest_of((await digest_strategy().transform(messages)).messages)
    assert all(r["version"] == 1 for r in digest["resources"])


async def test_digest_finds_resources_in_lists() -> None:
    listing: Call = ("list_orders", {}, {"orders": [order(1, oid="A-1"), order(4, oid="A-2")], "count": 2})
    digest = digest_of((await digest_strategy().transform(history([listing], *reads(6)))).messages)
    assert {r["resource"]: r["version"] for r in digest["resources"]}["order/order/A-2"] == 4


# ---- semantic_summary -------------------------------------------------------------------------------------------


class Summariser:
    """A summary model double: answers with the step numbers it was asked about; records every request."""

    def __init__(self) -> None:
        self.provider = MockProvider(self.answer, model="summary-model")

    def answer(self, request: MockRequest) -> Any:
        user = request.messages[1]["content"]
        steps = [line for line in user.splitlines() if line.startswith("Step ")]
        return mock_response(f"S[{','.join(steps)}]", usage=Usage(prompt_tokens=40, completion_tokens=5), latency_s=0.5)

    @property
    def requests(self) -> list[MockRequest]:
        return self.provider.requests


async def test_summary_waits_for_the_trigger_and_makes_no_call() -> None:
    summariser = Summariser()
    result = await SemanticSummary(summariser.provider).transform(history(*reads(6)))
    assert result.summary_calls == [] and summariser.requests == []


async def test_summary_uses_the_fixed_prompt_without_tools() -> None:
    summariser = Summariser()
    strategy = SemanticSummary(summariser.provider).for_episode(EpisodeContext(seed=11))
    result = await strategy.transform(history(*reads(7)))
    (request,) = summariser.requests
    assert request.tools is None and request.seed == 11
    assert request.messages[0]["role"] == "system"
    assert request.messages[0]["content"].splitlines()[0] == SUMMARY_MARKER
    assert INSTRUCTION["content"] not in json.dumps(request.messages)
    assert "order/order/A-101" in request.messages[1]["content"]
    assert result.messages[2] == {
        "role": "user",
        "content": "Summary of your earlier steps 1-4 (the log of those steps was condensed to save space):\n\n"
        "S[Step 1,Step 2,Step 3,Step 4]",
    }
    assert result.messages[3:] == history(*reads(7))[-6:]
    (call,) = result.summary_calls
    assert call.new_steps == [1, 2, 3, 4] and call.covers_steps == [1, 2, 3, 4]
    assert call.usage == Usage(prompt_tokens=40, completion_tokens=5) and call.latency_s == 0.5
    assert call.messages == request.messages and call.harness_prompt_tokens > 0


async def test_summary_is_incremental_one_call_per_newly_evicted_batch() -> None:
    summariser = Summariser()
    strategy = SemanticSummary(summariser.provider).for_episode(EpisodeContext())
    groups = reads(10)
    calls_per_step = []
    for count in range(1, 11):
        result = await strategy.transform(history(*groups[:count]))
        calls_per_step.append(len(result.summary_calls))
    assert calls_per_step == [0] * 6 + [1, 1, 1, 1]
    users = [r.messages[1]["content"] for r in summariser.requests]
    # the first call summarises steps 1-4; each later call gets the previous summary and only the new step
    assert [[line for line in u.splitlines() if line.startswith("Step ")] for u in users] == [
        ["Step 1", "Step 2", "Step 3", "Step 4"],
        ["Step 5"],
        ["Step 6"],
        ["Step 7"],
    ]
    assert "Previous summary (steps 1-4):\nS[Step 1,Step 2,Step 3,Step 4]" in users[1]
    # the same history again costs nothing
    again = await strategy.transform(history(*groups))
    assert again.summary_calls == [] and len(summariser.requests) == 4
    assert again.messages[2]["content"].startswith("Summary of your earlier steps 1-7")


async def test_for_episode_starts_with_an_empty_summary_cache() -> None:
    summariser = Summariser()
    config = SemanticSummary(summariser.provider)
    first = config.for_episode(EpisodeContext())
    await first.transform(history(*reads(7)))
    second = config.for_episode(EpisodeContext())
    result = await second.transform(history(*reads(7)))
    assert len(result.summary_calls) == 1 and len(summariser.requests) == 2


async def test_summary_failure_and_empty_summary_raise_provider_failure() -> None:
    failing = SemanticSummary(MockProvider([ProviderFailure("provider_error", "down")]))
    with pytest.raises(ProviderFailure, match="down"):
        await failing.transform(history(*reads(7)))
    empty = SemanticSummary(MockProvider(["   "]))
    with pytest.raises(ProviderFailure, match="empty summary") as caught:
        await empty.transform(history(*reads(7)))
    assert caught.value.reason == "provider_error"


TOOL_CALL_SUMMARY = {
    "content": None,
    "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_order", "arguments": "{}"}}],
}


@pytest.mark.parametrize(
    ("message", "finish", "why"),
    [
        (
            TOOL_CALL_SUMMARY,
            "tool_calls",
            "the summary model returned 1 tool call (get_order) instead of a summary text (the summary request "
            "offers no tools)",
        ),
        (
            {"content": None, "refusal": "I can't summarise this."},
            "stop",
            "the summary model refused: I can't summarise this.",
        ),
        ({"content": ""}, "length", "the summary model returned an empty summary (finish_reason 'length')"),
        ({"content": "  "}, "stop", "the summary model returned an empty summary"),
    ],
    ids=["tool-call", "refusal", "cut-empty", "blank"],
)
async def test_a_summary_reply_without_text_says_why_over_http(message: dict[str, Any], finish: str, why: str) -> None:
    with RawEndpoint([completion(message, finish)]) as endpoint:
        async with OpenAIProvider(base_url=endpoint.base_url, model="raw", api_key="k", retry=RETRIES) as provider:
            with pytest.raises(ProviderFailure) as caught:
                await SemanticSummary(provider).transform(history(*reads(7)))
        assert endpoint.requests == 1
    assert (caught.value.reason, caught.value.message) == ("provider_error", why)


# ---- configuration --------------------------------------------------------------------------------------------


def test_factory_builds_every_strategy_with_hashed_params() -> None:
    summariser = Summariser()
    built = {name: create_strategy(name, summary_provider=summariser.provider) for name in STRATEGY_NAMES}
    assert {name: s.name for name, s in built.items()} == {name: name for name in STRATEGY_NAMES}
    assert built["last_n"].params == {"n": 3}
    assert built["typed_state_digest"].params == {"trigger": 6, "keep": 3, "digest_version": 1}
    assert built["semantic_summary"].params["summary_model"] == "summary-model"
    assert len({s.config_hash for s in built.values()}) == len(STRATEGY_NAMES) == 6
    assert create_strategy("last_n", last_n=3).config_hash == built["last_n"].config_hash
    assert create_strategy("last_n", last_n=4).config_hash != built["last_n"].config_hash


def test_factory_rejects_bad_configurations() -> None:
    with pytest.raises(ValueError, match="unknown strategy"):
        create_strategy("everything")
    with pytest.raises(ValueError, match="summary provider"):
        create_strategy("semantic_summary")
    with pytest.raises(ValueError, match="keep"):
        create_strategy("typed_state_digest", summary_trigger=2, summary_keep=3)
    with pytest.raises(ValueError):
        create_strategy("last_n", last_n=-1)
