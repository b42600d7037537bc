"""Property: for any well-formed history, every strategy sends a valid OpenAI message sequence."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextdelta.canonical import canonical_json
from contextdelta.context import (
    STRATEGY_NAMES,
    EpisodeContext,
    Message,
    TransformResult,
    count_message_tokens,
    create_strategy,
    message_sequence_problems,
    parse_history,
)
from contextdelta.providers import MockProvider, MockRequest, mock_response
from tests.context.helpers import INSTRUCTION, SYSTEM, WRITE_TOOLS

TOOLS = ["get_order", "list_orders", "issue_refund", "cancel_order", "add_order_note"]

resource = st.fixed_dictionaries(
    {
        "resource": st.sampled_from(["order/order/A-1", "order/order/A-2", "calendar/room/atlas"]),
        "version": st.integers(1, 5),
        "status": st.sampled_from(["paid", "shipped", "refunded"]),
    }
)
result_data = st.one_of(
    st.builds(lambda r: {"order": r}, resource),
    st.builds(lambda rs: {"orders": rs, "count": len(rs)}, st.lists(resource, max_size=3)),
    st.just({"error": {"code": "version_conflict", "message": "changed"}}),
    st.text(max_size=20),  # a non-JSON result must not break anything
)
arguments = st.one_of(
    st.fixed_dictionaries({"order_id": st.sampled_from(["A-1", "A-2"])}).map(canonical_json),
    st.text(max_size=10),
)
call = st.tuples(st.sampled_from(TOOLS), arguments, result_data)
segment: st.SearchStrategy[Any] = st.one_of(
    st.tuples(st.just("group"), st.lists(call, min_size=1, max_size=3), st.one_of(st.none(), st.text(max_size=10))),
    st.tuples(st.just("nudge"), st.just([]), st.none()),
)


def build(segments: list[tuple[str, list[tuple[str, str, Any]], str | None]], shuffle: list[int]) -> list[Message]:
    messages: list[Message] = [dict(SYSTEM), dict(INSTRUCTION)]
    n = 0
    for kind, calls, content in segments:
        if kind == "nudge":
            messages += [{"role": "assistant", "content": ""}, {"role": "user", "content": "Continue."}]
            continue
        ids = []
        for _ in calls:
            n += 1
            ids.append(f"call_{n}")
        messages.append(
            {
                "role": "assistant",
                "content": content,
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": name, "arguments": args}}
                    for i, (name, args, _r) in zip(ids, calls, strict=True)
                ],
            }
        )
        results = [
            {"role": "tool", "tool_call_id": i, "content": r if isinstance(r, str) else json.dumps(r)}
            for i, (_n, _a, r) in zip(ids, calls, strict=True)
        ]
        # results may come back in any order; the sequence stays valid
        if shuffle and len(results) > 1:
            k = shuffle[n % len(shuffle)] % len(results)
            results = results[k:] + results[:k]
        messages += results
    return messages


def summary(request: MockRequest) -> Any:
    return mock_response(f"summary of {len(request.messages[1]['content'])} characters")


async def transform_all(messages: list[Message]) -> dict[str, TransformResult]:
    provider = MockProvider(summary, model="summary")
    context = EpisodeContext(seed=1, write_tools=WRITE_TOOLS)
    out = {}
    for name in STRATEGY_NAMES:
        for trigger, keep in ((6, 3), (2, 1), (0, 0)):
            strategy = create_strategy(
                name,
                last_n=keep,
                summary_trigger=trigger,
                summary_keep=keep,
                token_budget=max(1, keep) * 150,
                summary_provider=provider,
            ).for_episode(context)
            out[f"{name}/{trigger}/{keep}"] = await strategy.transform(messages)
    return out


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(segment, max_size=12), st.lists(st.integers(0, 5), max_size=4))
def test_every_strategy_output_is_a_valid_sequence(segments: Any, shuffle: list[int]) -> None:
    messages = build(segments, shuffle)
    assert message_sequence_problems(messages) == []
    groups = [s for s in parse_history(messages) if s.kind == "group"]
    results = anyio.run(transform_all, messages)
    for label, result in results.items():
        sent = result.messages
        assert message_sequence_problems(sent) == [], label
        assert sent[:2] == [SYSTEM, INSTRUCTION], label
        # nothing verbatim is invented or changed: every sent message is a history message or an inserted one
        verbatim = [m for i, m in enumerate(sent) if i not in result.inserted]
        assert all(m in messages for m in verbatim), label
        assert len(verbatim) + len(result.removed) == len(messages), label
        kept_groups = sum(1 for m in sent if m.get("role") == "assistant" and m.get("tool_calls"))
        name, trigger, keep = label.split("/")
        if name == "full_history":
            assert sent == messages
        elif name == "token_budget_trim":
            # whatever was trimmed, what is sent fits the budget unless not even one group does
            budget = max(1, int(keep)) * 150
            assert sent == messages or count_message_tokens(sent) <= budget or kept_groups == 0, label
            assert result.inserted == [], label
        elif name == "tool_result_clearing":
            assert len(sent) == len(messages) and result.removed == result.inserted, label
            tool_count = sum(1 for m in messages if m.get("role") == "tool")
            expected = max(0, tool_count - int(keep)) if len(groups) > int(trigger) else 0
            assert len(result.removed) == expected, label
        elif name == "last_n":
            assert kept_groups == min(int(keep), len(groups)), label
        elif len(groups) > int(trigger):
            assert kept_groups == int(keep) and result.inserted == [2], label
        else:
            assert sent == messages, label


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(st.lists(segment, max_size=12))
def test_digest_is_a_pure_function_of_the_history(segments: Any) -> None:
    first = anyio.run(transform_all, build(segments, []))["typed_state_digest/2/1"]
    second = anyio.run(transform_all, build(segments, []))["typed_state_digest/2/1"]
    assert canonical_json(first.messages) == canonical_json(second.messages)
