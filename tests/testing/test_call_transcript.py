"""Reading requests as the scripted policies do: call ids, embedded JSON, resource views."""

from __future__ import annotations

from contextdelta.canonical import canonical_json
from contextdelta.testing import CallId, Phase, Transcript
from contextdelta.testing.transcript import nonce_of, text_of
from contextdelta.worlds.views import json_values_in, resource_views

VIEW_1 = {"resource": "order/order/A-1", "version": 1, "status": "paid"}
VIEW_2 = {"resource": "order/order/A-1", "version": 2, "status": "refunded"}


def test_call_ids_round_trip_even_with_underscores_in_the_policy() -> None:
    call = CallId("context_trusting", 12, Phase.REREAD, "ab12cd34")
    assert call.render() == "call_context_trusting_12_reread_ab12cd34"
    assert CallId.parse(call.render()) == call


def test_foreign_ids_are_not_scripted_ids() -> None:
    for text in ("call_abc", "toolu_01", "call_oracle_x_main_1", "call_oracle_1_later_ab", ""):
        assert CallId.parse(text) is None


def test_nonce_is_a_deterministic_fingerprint() -> None:
    messages = [{"role": "user", "content": "x"}]
    assert nonce_of(messages) == nonce_of([{"content": "x", "role": "user"}])
    assert nonce_of(messages) != nonce_of([{"role": "user", "content": "y"}])
    assert len(nonce_of(messages)) == 8


def test_json_values_are_found_inside_prose() -> None:
    text = f"Digest [v1] follows: {canonical_json(VIEW_1)} and then {{not json}} and [1, 2]."
    assert list(json_values_in(text)) == [VIEW_1, [1, 2]]
    assert list(json_values_in(canonical_json({"x": [VIEW_1]}))) == [{"x": [VIEW_1]}]


def test_resource_views_are_found_at_any_depth() -> None:
    value = {"orders": [VIEW_1, {"nested": VIEW_2}], "version": 3}
    assert list(resource_views(value)) == [VIEW_1, VIEW_2]
    assert list(resource_views({"resource": "x", "version": True})) == []


def test_text_of_content_parts() -> None:
    assert text_of([{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]) == "a\nb"
    assert text_of(None) == ""


def _call(call_id: str, name: str, arguments: str) -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_latest_version_from_tool_results_or_anywhere() -> None:
    transcript = Transcript(
        [
            {"role": "system", "content": "s"},
            {"role": "user", "content": f"digest: {canonical_json(VIEW_2)}"},
            {"role": "assistant", "content": None, "tool_calls": [_call("c1", "get_order", '{"order_id":"A-1"}')]},
            {"role": "tool", "tool_call_id": "c1", "content": canonical_json({"order": VIEW_1})},
        ]
    )
    assert transcript.latest_version("order/order/A-1", tool_results_only=True) == 1
    assert transcript.latest_version("order/order/A-1", tool_results_only=False) == 1  # the tool result is later
    assert transcript.latest_version("order/order/B-2", tool_results_only=False) is None
    only_digest = Transcript(transcript.messages[:2])
    assert only_digest.latest_version("order/order/A-1", tool_results_only=False) == 2
    assert only_digest.latest_version("order/order/A-1", tool_results_only=True) is None


def test_last_own_call_is_taken_from_the_last_assistant_message_with_tool_calls() -> None:
    mine = CallId("oracle", 3, Phase.MAIN, "n").render()
    transcript = Transcript(
        [
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": None, "tool_calls": [_call(mine, "get_order", "{}")]},
            {"role": "tool", "tool_call_id": mine, "content": '{"error": {"code": "version_conflict"}}'},
        ]
    )
    last = transcript.last_own_call("oracle")
    assert last is not None and last.call_id == CallId("oracle", 3, Phase.MAIN, "n")
    assert last.result == {"error": {"code": "version_conflict"}}
    assert transcript.last_own_call("unsafe") is None
    assert Transcript([{"role": "user", "content": "u"}]).last_own_call("oracle") is None


def test_successful_call_visible_asks_the_caller_whether_a_calls_arguments_are_the_same_and_skips_errors() -> None:
    transcript = Transcript(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    _call("a", "add_order_note", '{"order_id":"A-1","text":"t","expected_version":4}'),
                    _call("b", "issue_refund", '{"order_id":"A-1"}'),
                ],
            },
            {"role": "tool", "tool_call_id": "a", "content": canonical_json({"order": VIEW_2})},
            {"role": "tool", "tool_call_id": "b", "content": '{"error":{"code":"already_refunded"}}'},
        ]
    )
    assert transcript.successful_call_visible("add_order_note", lambda a: a.get("text") == "t")
    assert not transcript.successful_call_visible("add_order_note", lambda a: a.get("text") == "u")
    assert not transcript.successful_call_visible("issue_refund", lambda a: True)
