"""The tool-call parser on raw completions the real local models wrote for benchmark prompts.

The fixtures under ``fixtures/outputs/<model>/`` are byte-exact completions of Qwen2.5-Coder 0.5B and 1.5B
(GGUF Q4_K_M, greedy) for the first two requests of real tasks and for plain questions, recorded with
``scripts/record_local_model_outputs.py``; ``fixtures/outputs/episodes/`` holds completions recorded by
``local-model serve --record`` during a ``make demo`` run. The expectations below were read off the files by hand.

In about 130 recorded generations neither model used the ``<tool_call>`` tags its chat template asks for: they
write fenced or bare JSON (the 1.5B sometimes with the doubled brace its template shows). The tagged form is
therefore covered by hand-written cases in ``test_toolcalls_handmade.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextdelta.local_model.toolcalls import parse_completion
from contextdelta.worlds import ProtectionMode, get_world

OUTPUTS = Path(__file__).parent / "fixtures" / "outputs"


def _tool_names(world: str) -> set[str]:
    return {tool["function"]["name"] for tool in get_world(world).tool_schemas(ProtectionMode.FRESHNESS_CONTRACT)}


def _parse(relative: str, world: str) -> Any:
    return parse_completion((OUTPUTS / relative).read_text(encoding="utf-8"), _tool_names(world))


def _calls(parsed: Any) -> list[tuple[str, Any, str]]:
    return [(c.name, json.loads(c.arguments), c.form) for c in parsed.tool_calls]


def test_every_recorded_output_is_parsed_without_error() -> None:
    files = sorted(OUTPUTS.rglob("*.txt"))
    assert len(files) >= 12
    for path in files:
        parse_completion(path.read_text(encoding="utf-8"), _tool_names("order") | _tool_names("config"))


@pytest.mark.parametrize("model", ["0.5b", "1.5b"])
def test_a_fenced_pretty_printed_call(model: str) -> None:
    parsed = _parse(f"{model}/cfg-staging-access.unprotected.step1.txt", "config")
    assert _calls(parsed) == [
        ("set_config", {"environment": "staging", "key": "fraud.score_threshold", "value": 0.78}, "fenced")
    ]
    assert parsed.content is None


def test_a_fenced_call_whose_arguments_keep_the_model_s_mistakes() -> None:
    """The 0.5B invents a reason and omits expected_version: passed on as written, for the agent to reject."""
    parsed = _parse("0.5b/order-desk-cancel.freshness_contract.step1.txt", "order")
    assert _calls(parsed) == [("cancel_order", {"order_id": "B-2210", "reason": "Shipped"}, "fenced")]


def test_a_bare_call_on_one_line() -> None:
    parsed = _parse("0.5b/order-desk-cancel.unprotected.step2.txt", "order")
    assert _calls(parsed) == [("cancel_order", {"order_id": "B-2210", "reason": "Shipped"}, "bare")]
    assert parsed.content is None


def test_a_bare_call_followed_by_an_imagined_tool_result() -> None:
    """The 0.5B repeats its call and then writes the error it expects back: the error is text, not a call."""
    parsed = _parse("0.5b/cal-arch-review-move.unprotected.step2.txt", "calendar")
    assert [(name, form) for name, _, form in _calls(parsed)] == [("move_event", "bare")]  # an unknown tool, kept
    assert parsed.content is not None and parsed.content.startswith('{"error":{"allowed_tools":')


def test_several_bare_calls_including_repeats_are_all_kept_in_order() -> None:
    parsed = _parse("1.5b/cfg-staging-access.unprotected.step2.txt", "config")
    assert [(name, args.get("environment")) for name, args, _ in _calls(parsed)] == [
        ("set_config", "prod"),
        ("rollout_flag", "staging"),
        ("rollout_flag", "prod"),
        ("list_configs", "staging"),
        ("list_configs", "prod"),
    ]


def test_doubled_opening_braces_copied_from_the_1_5b_template() -> None:
    """The 1.5B GGUF's template shows the call format as {{"name": ...}} and the model copies it."""
    parsed = _parse("1.5b/order-desk-cancel.freshness_contract.step1.txt", "order")
    calls = _calls(parsed)
    names = [name for name, _, _ in calls]
    assert names == ["cancel_order", "add_order_note", "update_shipping_address", "issue_refund"]
    refund = {"order_id": "B-2198", "amount_cents": 14900, "reason": "Late shipping", "expected_version": 1}
    assert calls[3][1] == refund


def test_a_completion_cut_by_the_token_limit_keeps_its_complete_calls() -> None:
    """384 tokens of the same call over and over, cut mid-call: every complete call is returned, repeats too."""
    parsed = _parse("0.5b/cfg-staging-access.unprotected.step2.txt", "config")
    calls = _calls(parsed)
    assert len(calls) == 11 and {name for name, _, _ in calls} == {"set_config"}
    assert [args["environment"] for _, args, _ in calls[:4]] == ["staging", "prod", "staging", "prod"]
    assert parsed.content == '{"name": "'  # the cut-off tail stays text


def test_unexpected_argument_members_are_passed_through() -> None:
    parsed = _parse("0.5b/cfg-staging-access.freshness_contract.step2.txt", "config")
    name, arguments, _ = _calls(parsed)[0]
    assert name == "set_config"
    assert arguments["read_tool"] == "get_config"  # not a parameter of set_config: the agent rejects it


def test_a_plain_final_answer() -> None:
    parsed = _parse("1.5b/order-desk-cancel.unprotected.step2.txt", "order")
    assert parsed.tool_calls == []
    assert parsed.content is not None and parsed.content.startswith("I have successfully cancelled the order B-2210")


def test_degenerate_output_is_text_not_calls() -> None:
    parsed = _parse("1.5b/order-desk-cancel.freshness_contract.step2.txt", "order")
    assert parsed.tool_calls == []
    assert parsed.content is not None and set(parsed.content) <= {"{", "\n"}


def test_a_fenced_call_between_explanations_keeps_both_texts() -> None:
    parsed = _parse("1.5b/question-calendar-2.step2.txt", "calendar")
    assert _calls(parsed) == [
        ("find_free_slots", {"room_id": "atlas-4f", "day": "2026-03-10", "duration_minutes": 60}, "fenced")
    ]
    assert parsed.content is not None
    assert parsed.content.startswith("To find free slots in a room on one day")
    assert parsed.content.endswith("which are from 08:00 to 19:00.")
    assert "```" not in parsed.content


@pytest.mark.parametrize("model", ["0.5b", "1.5b"])
def test_a_plain_question_gets_one_fenced_call(model: str) -> None:
    parsed = _parse(f"{model}/question-order-1.step1.txt", "order")
    assert _calls(parsed) == [("get_order", {"order_id": "C-3090"}, "fenced")]


def test_null_and_invented_arguments_are_kept_for_the_agent_to_judge() -> None:
    parsed = _parse("0.5b/question-calendar-2.step1.txt", "calendar")
    assert _calls(parsed) == [("list_rooms", {"min_capacity": None, "type": "object"}, "fenced")]


def test_a_demo_step_cut_at_160_tokens_in_its_fourth_call() -> None:
    parsed = _parse("episodes/0.5b-demo-order-step2.txt", "order")
    calls = _calls(parsed)
    assert [name for name, _, _ in calls] == ["issue_refund", "cancel_order", "update_shipping_address"]
    assert calls[0][1] == {"order_id": "G-7301", "amount_cents": 300, "reason": "Refund for three task chairs"}
    assert parsed.content == '{"name": "add_order'  # the call it was writing when the limit hit stays text


def test_a_demo_step_that_imagines_its_own_error_result() -> None:
    parsed = _parse("episodes/0.5b-demo-order-step3.txt", "order")
    assert [name for name, _, _ in _calls(parsed)] == ["update_shipping_address"]
    assert parsed.content is not None and parsed.content.startswith('{"error":{"code":"invalid_arguments"')
