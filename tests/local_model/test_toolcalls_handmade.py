"""The tool-call parser on hand-written text: each form, several calls, malformed calls, and plain answers."""

from __future__ import annotations

import json

import pytest

from contextdelta.local_model.toolcalls import ParsedToolCall, parse_completion

TOOLS = {"get_order", "cancel_order", "refund_order"}


def _calls(text: str) -> list[tuple[str, str, str]]:
    return [(c.name, c.arguments, c.form) for c in parse_completion(text, TOOLS).tool_calls]


def test_a_tagged_call() -> None:
    text = '<tool_call>\n{"name": "get_order", "arguments": {"order_id": "B-2210"}}\n</tool_call>'
    parsed = parse_completion(text, TOOLS)
    assert parsed.tool_calls == [ParsedToolCall("get_order", '{"order_id": "B-2210"}', "tagged")]
    assert parsed.content is None


def test_several_tagged_calls_keep_their_order_and_repeats() -> None:
    text = (
        "Let me look at both orders.\n"
        '<tool_call>\n{"name": "get_order", "arguments": {"order_id": "B-1"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_order", "arguments": {"order_id": "B-1"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_order", "arguments": {"order_id": "B-2"}}\n</tool_call>'
    )
    parsed = parse_completion(text, TOOLS)
    assert [json.loads(c.arguments)["order_id"] for c in parsed.tool_calls] == ["B-1", "B-1", "B-2"]
    assert parsed.content == "Let me look at both orders."


def test_a_tag_left_open_at_the_end_still_counts() -> None:
    assert _calls('<tool_call>\n{"name": "get_order", "arguments": {"order_id": "B-1"}}') == [
        ("get_order", '{"order_id": "B-1"}', "tagged")
    ]


def test_a_fenced_call_and_a_fenced_list() -> None:
    assert _calls('```json\n{"name": "get_order", "arguments": {"order_id": "B-1"}}\n```') == [
        ("get_order", '{"order_id": "B-1"}', "fenced")
    ]
    listed = (
        '```\n[{"name": "get_order", "arguments": {"order_id": "B-1"}}, {"name": "cancel_order", "arguments": {}}]\n```'
    )
    assert [c[0] for c in _calls(listed)] == ["get_order", "cancel_order"]


def test_bare_calls_written_into_the_text() -> None:
    text = (
        'I will check it.\n{"name": "get_order", "arguments": {"order_id": "B-1"}}\n'
        '{"name": "refund_order", "arguments": {"order_id": "B-1", "amount_cents": 1490}}'
    )
    parsed = parse_completion(text, TOOLS)
    assert [c.name for c in parsed.tool_calls] == ["get_order", "refund_order"]
    assert parsed.content == "I will check it."
    assert all(c.form == "bare" for c in parsed.tool_calls)


def test_openai_shaped_objects_and_string_arguments_are_unwrapped_not_rewritten() -> None:
    text = '{"type": "function", "function": {"name": "get_order", "arguments": "{\\"order_id\\": \\"B-1\\"}"}}'
    assert _calls(text) == [("get_order", '{"order_id": "B-1"}', "bare")]


def test_parameters_is_accepted_for_arguments() -> None:
    assert _calls('<tool_call>{"name": "get_order", "parameters": {"order_id": "B-1"}}</tool_call>') == [
        ("get_order", '{"order_id": "B-1"}', "tagged")
    ]


def test_non_json_arguments_are_passed_through_as_written() -> None:
    text = '<tool_call>\n{"name": "cancel_order", "arguments": {"order_id": B-2210, "reason": "moving"}}\n</tool_call>'
    assert _calls(text) == [("cancel_order", '{"order_id": B-2210, "reason": "moving"}', "tagged")]


def test_a_call_missing_its_closing_brace_keeps_its_arguments() -> None:
    text = '<tool_call>\n{"name": "get_order", "arguments": {"order_id": "B-1"}\n</tool_call>'
    assert _calls(text) == [("get_order", '{"order_id": "B-1"}', "tagged")]


def test_string_arguments_that_are_not_json_stay_a_string() -> None:
    assert _calls('<tool_call>{"name": "get_order", "arguments": "order B-1"}</tool_call>') == [
        ("get_order", "order B-1", "tagged")
    ]


def test_unknown_tools_are_returned_for_the_agent_to_reject() -> None:
    assert _calls('<tool_call>{"name": "delete_everything", "arguments": {}}</tool_call>') == [
        ("delete_everything", "{}", "tagged")
    ]


def test_a_name_only_object_is_a_call_only_for_a_known_tool() -> None:
    assert _calls('{"name": "get_order"}') == [("get_order", "{}", "bare")]
    parsed = parse_completion('{"name": "Jonas Weber", "email": "jonas.weber@posteo.de"}', TOOLS)
    assert parsed.tool_calls == [] and parsed.content is not None


def test_a_tag_without_a_recoverable_name_is_left_as_text() -> None:
    text = "<tool_call>\nget_order(B-1)\n</tool_call>"
    parsed = parse_completion(text, TOOLS)
    assert parsed.tool_calls == []
    assert parsed.content == text


@pytest.mark.parametrize(
    "answer",
    [
        "I cancelled order B-2210 and refunded the express fee of €14.90.",
        'Here is the data: {"order_id": "B-1", "status": "shipped"}',
        '```json\n{"status": "done"}\n```',
        "",
    ],
)
def test_plain_answers_have_no_calls(answer: str) -> None:
    parsed = parse_completion(answer, TOOLS)
    assert parsed.tool_calls == []
    assert parsed.content == (answer.strip() or None)
