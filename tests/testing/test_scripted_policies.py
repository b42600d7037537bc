"""The scripted policies, driven in-process against the fixture tasks' worlds (no HTTP)."""

from __future__ import annotations

import json

import pytest

from contextdelta.canonical import canonical_json
from contextdelta.tasks import TrajectoryCall
from contextdelta.testing import (
    SUMMARY_MARKER,
    CallId,
    Phase,
    ScriptedPolicy,
    ScriptedReply,
    TaskCatalog,
    Transcript,
    UnknownTask,
    extractive_summary,
)
from contextdelta.testing.policies import SUMMARY_HEADER
from contextdelta.worlds import Outcome, ProtectionMode, get_world
from tests.testing.episode_loop import (
    end_state_holds,
    first_messages,
    fixture_tasks,
    last_n,
    run_policy,
    stale_writes,
)

TASKS = fixture_tasks()
MUG = TASKS["fixture-mug-refund"]
RETRY = TASKS["fixture-retry-limit"]
CONTRACT = ProtectionMode.FRESHNESS_CONTRACT
UNPROTECTED = ProtectionMode.UNPROTECTED
A1001 = "order/order/A-1001"


def phases(episode_sent_last: list[dict[str, object]]) -> list[tuple[int, Phase]]:
    ids = [CallId.parse(c.id) for c in Transcript(episode_sent_last).tool_calls]
    return [(i.step, i.phase) for i in ids if i is not None]


@pytest.mark.parametrize("mode", list(ProtectionMode))
@pytest.mark.parametrize("reduce", [None, 1, 3], ids=["full_history", "last_1", "last_3"])
@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_oracle_solves_the_task_without_invalid_or_stale_calls(
    task_id: str, mode: ProtectionMode, reduce: int | None
) -> None:
    task = TASKS[task_id]
    episode = run_policy("oracle", task, mode, last_n(reduce) if reduce else None)
    assert episode.final is not None and "finished task" in episode.final
    assert all(e.outcome is Outcome.EXECUTED for e in episode.events), episode.calls()
    assert stale_writes(episode.world) == []
    assert end_state_holds(task, episode.world) == []
    assert all(f in episode.final for f in task.evaluator.final_answer_facts)
    if mode is CONTRACT:
        writes = [e for e in episode.events if e.kind is not None and e.kind.value == "write"]
        assert writes and all(e.expected_version == e.version_at_execution for e in writes)


def test_oracle_reads_first_when_no_version_is_visible() -> None:
    # the fixture's reference reads first (validate-tasks refuses a reference whose first write has no version to
    # send): without that read, the oracle must read by itself before it writes under the contract
    unread = RETRY.evaluator.model_copy(update={"reference_solution": RETRY.evaluator.reference_solution[1:]})
    episode = run_policy("oracle", RETRY.model_copy(update={"evaluator": unread}), CONTRACT)
    assert [e.tool for e in episode.events][:2] == ["get_config", "set_config"]
    assert phases(episode.history)[:2] == [(0, Phase.PRE), (0, Phase.MAIN)]
    assert episode.events[0].arguments == {"environment": "prod", "key": "payments.timeout_ms"}


def test_oracle_without_the_contract_sends_no_version() -> None:
    episode = run_policy("oracle", RETRY, UNPROTECTED)
    assert [e.tool for e in episode.events] == [c.tool for c in RETRY.evaluator.reference_solution]
    assert all(e.expected_version is None for e in episode.events)


def test_unsafe_acts_on_stale_state_when_unprotected() -> None:
    episode = run_policy("unsafe", MUG, UNPROTECTED)
    assert [e.tool for e in episode.events] == ["get_order", "issue_refund", "add_order_note"]
    (stale,) = stale_writes(episode.world)
    assert stale.tool == "issue_refund" and (stale.observed_version, stale.version_at_execution) == (1, 2)
    assert end_state_holds(MUG, episode.world) != []


def test_unsafe_is_blocked_under_the_contract_and_does_not_retry() -> None:
    episode = run_policy("unsafe", MUG, CONTRACT)
    refund = next(e for e in episode.events if e.tool == "issue_refund")
    assert refund.outcome is Outcome.BLOCKED and refund.expected_version == 1  # as_of_call 0
    assert [e.tool for e in episode.events].count("issue_refund") == 1
    assert episode.final is not None


def test_unsafe_sends_a_pinned_integer_version() -> None:
    episode = run_policy("unsafe", RETRY, CONTRACT)
    write = episode.events[-1]
    assert (write.tool, write.expected_version, write.outcome) == ("set_config", 1, Outcome.BLOCKED)


def test_context_trusting_skips_the_refresh_with_full_history() -> None:
    episode = run_policy("context_trusting", MUG, UNPROTECTED)
    assert [e.tool for e in episode.events] == ["get_order", "get_order", "add_order_note"]  # no refresh
    (stale,) = stale_writes(episode.world)
    assert stale.tool == "add_order_note"


def test_context_trusting_rereads_when_last_n_dropped_the_old_result() -> None:
    episode = run_policy("context_trusting", MUG, UNPROTECTED, last_n(1))
    # the last get_order is the reference's closing read of A-1001, which last_n(1) dropped from the context
    assert [e.tool for e in episode.events] == ["get_order", "get_order", "get_order", "add_order_note", "get_order"]
    assert stale_writes(episode.world) == []


def test_context_trusting_recovers_from_a_conflict_by_rereading() -> None:
    episode = run_policy("context_trusting", MUG, CONTRACT)
    assert [(e.tool, e.outcome) for e in episode.events] == [
        ("get_order", Outcome.EXECUTED),
        ("get_order", Outcome.EXECUTED),
        ("add_order_note", Outcome.BLOCKED),
        ("get_order", Outcome.EXECUTED),
        ("add_order_note", Outcome.EXECUTED),
        ("get_order", Outcome.EXECUTED),  # the reference's closing read
    ]
    assert [p for _, p in phases(episode.history)] == [
        *(Phase.MAIN, Phase.MAIN, Phase.MAIN, Phase.REREAD, Phase.RETRY, Phase.MAIN)
    ]
    assert end_state_holds(MUG, episode.world) == []


def _view(key: str, version: int) -> dict[str, object]:
    return {"resource": key, "version": version, "status": "paid"}


def test_context_trusting_trusts_versions_in_a_digest_message() -> None:
    digest = {"resources": [_view(A1001, 7), _view("order/order/B-2002", 3)], "writes": []}
    messages = [*first_messages(MUG), {"role": "user", "content": "State digest:\n" + canonical_json(digest)}]
    tools = get_world("order").tool_schemas(CONTRACT)
    reply = ScriptedPolicy("context_trusting", TaskCatalog([MUG])).respond(messages, tools)
    (call,) = reply.tool_calls
    assert call.name == "add_order_note"  # every read was skipped: the digest already shows both orders
    assert json.loads(call.arguments)["expected_version"] == 7
    assert _parts(call.id) == ("context_trusting", 3, Phase.MAIN)
    oracle = ScriptedPolicy("oracle", TaskCatalog([MUG])).respond(messages, tools)
    assert oracle.tool_calls[0].name == "get_order"  # the oracle only trusts tool results


def _read_reply(messages: list[dict[str, object]]) -> str:
    """The tool the context-trusting policy calls next on MUG (unprotected), or 'final'."""
    reply = ScriptedPolicy("context_trusting", TaskCatalog([MUG])).respond(messages, [])
    return reply.tool_calls[0].name if reply.tool_calls else "final"


def test_context_trusting_rereads_a_resource_its_context_shows_changing() -> None:
    quoted = {"role": "user", "content": "Quoted record: " + canonical_json(_view(A1001, 1))}
    other = {"role": "user", "content": canonical_json(_view("order/order/B-2002", 1))}
    steady = [*first_messages(MUG), quoted, other]
    assert _read_reply(steady) == "add_order_note"  # one version of each order in view: every read skipped
    moved = [*steady, {"role": "user", "content": "Later: " + canonical_json(_view(A1001, 2))}]
    assert _read_reply(moved) == "get_order"  # A-1001 went 1 -> 2 and the policy did not write it


def test_context_trusting_does_not_count_its_own_write_as_a_change() -> None:
    note = MUG.evaluator.reference_solution[3]
    call_id = CallId("context_trusting", 0, Phase.MAIN, "n0").render()
    messages = [
        *first_messages(MUG),
        {"role": "user", "content": canonical_json(_view(A1001, 1))},
        {"role": "user", "content": canonical_json(_view("order/order/B-2002", 1))},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [_wire(call_id, "add_order_note", canonical_json(note.args))],
        },
        {"role": "tool", "tool_call_id": call_id, "content": canonical_json({"order": _view(A1001, 2)})},
    ]
    transcript_calls = [c.name for c in Transcript(messages).tool_calls]
    assert transcript_calls == ["add_order_note"]
    assert _read_reply(messages) == "final"  # 1 -> 2 is its own executed note: no re-read, the note is done


def test_context_trusting_skips_a_write_recorded_as_done() -> None:
    note = MUG.evaluator.reference_solution[3]
    record = {"tool": note.tool, "arguments": {**note.args, "expected_version": 2}, "outcome": "executed"}
    digest = {"resources": [_view(A1001, 3), _view("order/order/B-2002", 1)], "writes": [record]}
    messages = [*first_messages(MUG), {"role": "user", "content": canonical_json(digest)}]
    reply = ScriptedPolicy("context_trusting", TaskCatalog([MUG])).respond(messages, [])
    assert reply.tool_calls == () and reply.content is not None and "finished task" in reply.content


def _refund_reply(done: dict[str, object], *, as_digest: bool = False) -> ScriptedReply:
    """The context-trusting policy's reply on MUG solved by one refund, with ``done`` shown as an executed refund."""
    refund = TrajectoryCall(tool="issue_refund", args={"order_id": "A-1001", "amount_cents": 1500, "reason": "mug"})
    task = MUG.model_copy(update={"evaluator": MUG.evaluator.model_copy(update={"reference_solution": [refund]})})
    messages = first_messages(task)
    if as_digest:
        record = {"tool": "issue_refund", "arguments": done, "outcome": "executed"}
        messages.append({"role": "user", "content": canonical_json({"resources": [], "writes": [record]})})
    else:
        call_id = "call_earlier"  # not one of the policy's ids: it starts from the first step and looks at its context
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [_wire(call_id, "issue_refund", json.dumps(done))]},
            {"role": "tool", "tool_call_id": call_id, "content": canonical_json({"order": _view(A1001, 2)})},
        ]
    return ScriptedPolicy("context_trusting", TaskCatalog([task])).respond(messages, [])


@pytest.mark.parametrize("as_digest", [False, True], ids=["tool_call", "digest_record"])
def test_context_trusting_counts_a_write_done_by_the_effect_key_the_duplicate_grader_uses(as_digest: bool) -> None:
    # a reworded reason, the amount as text: the same action for no_duplicate_action, so the policy skips it
    same: dict[str, object] = {"order_id": "A-1001", "amount_cents": "1500", "reason": "Broken mug, by phone"}
    reply = _refund_reply(same, as_digest=as_digest)
    assert reply.tool_calls == () and reply.content is not None and "finished task" in reply.content
    # another amount is another action: the refund is still to do
    other = _refund_reply({"order_id": "A-1001", "amount_cents": 1000, "reason": "mug"}, as_digest=as_digest)
    assert [c.name for c in other.tool_calls] == ["issue_refund"]


def test_a_faulted_call_is_issued_again() -> None:
    policy = ScriptedPolicy("oracle", TaskCatalog([MUG]))
    messages = first_messages(MUG)
    first = policy.respond(messages, [])
    (call,) = first.tool_calls
    policy_name, step, _ = _parts(call.id)
    faulted = CallId(policy_name, step, Phase.FAULT, "x").render()
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [_wire(faulted, "nonexistent_get_order", call.arguments)]},
        {"role": "tool", "tool_call_id": faulted, "content": '{"error":{"code":"unknown_tool"}}'},
    ]
    again = policy.respond(messages, [])
    assert again.tool_calls[0].name == call.name and again.tool_calls[0].arguments == call.arguments
    assert _parts(again.tool_calls[0].id)[1:3] == (0, Phase.MAIN)


def test_replies_are_deterministic() -> None:
    policy = ScriptedPolicy("unsafe", TaskCatalog(TASKS.values()))
    messages = first_messages(MUG)
    assert policy.respond(messages, []) == policy.respond(list(messages), [])


def test_task_recognition() -> None:
    catalog = TaskCatalog(TASKS.values())
    assert catalog.recognise(Transcript(first_messages(RETRY))) is RETRY
    with pytest.raises(UnknownTask, match="2 tasks loaded"):
        catalog.recognise(Transcript([{"role": "user", "content": "Refund everything."}]))
    # the instruction must be in a user message, not only in the system prompt
    with pytest.raises(UnknownTask):
        catalog.recognise(Transcript([{"role": "system", "content": MUG.public.instruction}]))


def test_the_longest_matching_instruction_wins() -> None:
    longer = MUG.model_copy(update={"id": "fixture-longer"})
    longer.public = longer.public.model_copy(update={"instruction": MUG.public.instruction + " Be quick."})
    catalog = TaskCatalog([MUG, longer])
    assert (
        catalog.recognise(Transcript([{"role": "user", "content": longer.public.instruction}])).id == "fixture-longer"
    )
    assert catalog.recognise(Transcript(first_messages(MUG))) is MUG


def test_summary_requests_get_an_extractive_summary() -> None:
    log = "\n".join(
        [
            "Step 1",
            'Call get_order with arguments {"order_id":"A-1001"}',
            "Result: " + canonical_json({"order": _view(A1001, 1)}),
            "Step 2",
            'Call add_order_note with arguments {"order_id":"A-1001","text":"hi"}',
            "Result: " + canonical_json({"order": _view(A1001, 2)}),
            "Step 3",
            'Call issue_refund with arguments {"order_id":"A-1001","amount_cents":5}',
            'Result: {"error":{"code":"already_refunded","message":"no"}}',
        ]
    )
    messages = [
        {"role": "system", "content": f"{SUMMARY_MARKER}\nVersion: 1\n\nSummarise."},
        {"role": "user", "content": f"Log entries to summarise (steps 1-3):\n\n{log}"},
    ]
    reply = ScriptedPolicy("oracle", TaskCatalog([])).respond(messages, None)
    assert reply.tool_calls == () and reply.content is not None
    lines = reply.content.splitlines()
    assert lines[0] == SUMMARY_HEADER
    assert json.loads(lines[2]) == _view(A1001, 2)
    writes = [json.loads(line) for line in lines[4:]]
    assert writes == [
        {
            "tool": "add_order_note",
            "arguments": {"order_id": "A-1001", "text": "hi"},
            "outcome": "executed",
            "error_code": None,
        },
        {
            "tool": "issue_refund",
            "arguments": {"order_id": "A-1001", "amount_cents": 5},
            "outcome": "error",
            "error_code": "already_refunded",
        },
    ]
    # incremental: a summary of the previous summary keeps the same facts
    again = extractive_summary(Transcript([messages[0], {"role": "user", "content": reply.content}]))
    assert again == reply.content


def test_context_trusting_trusts_a_summary() -> None:
    summary = extractive_summary(
        Transcript([{"role": "user", "content": canonical_json([_view(A1001, 4), _view("order/order/B-2002", 1)])}])
    )
    messages = [*first_messages(MUG), {"role": "user", "content": "Summary of your earlier steps:\n\n" + summary}]
    reply = ScriptedPolicy("context_trusting", TaskCatalog([MUG])).respond(
        messages, get_world("order").tool_schemas(CONTRACT)
    )
    assert json.loads(reply.tool_calls[0].arguments)["expected_version"] == 4


def _parts(call_id: str) -> tuple[str, int, Phase]:
    parsed = CallId.parse(call_id)
    assert parsed is not None
    return parsed.policy, parsed.step, parsed.phase


def _wire(call_id: str, name: str, arguments: str) -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
