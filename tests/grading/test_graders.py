"""Each grader of SPEC section 8 on small scripted episodes against a real order world."""

from __future__ import annotations

import math

from contextdelta.grading import (
    DetailKind,
    GraderName,
    agent_events,
    event_flags,
    final_answer_facts,
    grade,
    mutation_position,
    refresh_violations,
)
from contextdelta.worlds import Outcome, ProtectionMode
from tests.grading.helpers import NOTE_A1, READ_A1, REFUND_A1, colleague_refund, make_task, play, run, verdict

CONTRACT = ProtectionMode.FRESHNESS_CONTRACT
AFTER_READ_A2 = {"after_tool_call": {"tool": "get_order", "args": {"order_id": "A-2"}}}
READ_A2 = ("get_order", {"order_id": "A-2"})


def test_a_clean_episode_passes_every_grader() -> None:
    result = run(make_task(), [READ_A1, REFUND_A1, NOTE_A1])
    assert result.success
    assert result.conflict_recovery is None
    assert result.failed_graders == []
    assert (result.stale_action_count, result.duplicate_action_count, result.blocked_write_count) == (0, 0, 0)
    assert [f.seq for f in result.event_flags] == [0, 1, 2]


def test_write_after_a_hidden_change_is_stale_and_unrefreshed() -> None:
    task = make_task(hidden_mutations=[colleague_refund(AFTER_READ_A2)])
    result = run(task, [READ_A1, READ_A2, REFUND_A1])
    assert not result.no_stale_action
    assert result.stale_action_count == 1
    assert not result.refresh_before_write
    assert not result.success
    assert [f.seq for f in result.event_flags if f.stale] == [2]
    (stale,) = [d for d in result.details_for(DetailKind.STALE_WRITE)]
    assert (stale.seq, stale.tool, stale.resource) == (2, "issue_refund", "order/order/A-1")
    assert (stale.version_seen, stale.version_at_execution, stale.observation_seq) == (1, 2, 0)
    (refresh,) = result.details_for(DetailKind.MISSED_REFRESH)
    assert (refresh.seq, refresh.mutation_ids, refresh.observation_seq) == (2, ["colleague-refund"], 0)


def test_reading_again_before_the_write_clears_stale_and_refresh() -> None:
    task = make_task(hidden_mutations=[colleague_refund(AFTER_READ_A2)])
    result = run(task, [READ_A1, READ_A2, READ_A1, REFUND_A1])
    assert result.no_stale_action and result.refresh_before_write and result.success


def test_a_stale_write_a_guard_rejects_still_counts() -> None:
    cancelled = {
        "id": "warehouse-cancels",
        "actor": "warehouse",
        "trigger": AFTER_READ_A2,
        "set": {"resource": "order/order/A-1", "fields": {"status": "cancelled"}},
    }
    world, initial = play(make_task(hidden_mutations=[cancelled]), [READ_A1, READ_A2, REFUND_A1])
    assert world.events[2].outcome is Outcome.REJECTED
    result = verdict(make_task(hidden_mutations=[cancelled]), world, initial)
    assert result.stale_action_count == 1


def test_without_any_observation_the_start_version_is_the_baseline() -> None:
    task = make_task(hidden_mutations=[colleague_refund({"before_step": {"step": 2}})])
    result = run(task, [READ_A2, REFUND_A1])
    assert result.stale_action_count == 1
    assert not result.refresh_before_write
    untouched = run(make_task(), [REFUND_A1])
    assert untouched.no_stale_action and untouched.refresh_before_write


def test_a_blocked_write_never_reached_the_business_logic() -> None:
    task = make_task(hidden_mutations=[colleague_refund(AFTER_READ_A2)])
    stale = ("issue_refund", {**REFUND_A1[1], "expected_version": 1})
    result = run(task, [READ_A1, READ_A2, stale], CONTRACT)
    assert result.blocked_write_count == 1
    assert result.no_stale_action and result.refresh_before_write
    assert result.conflict_recovery is True  # blocked, and never retried
    assert result.success


def test_retrying_a_blocked_write_without_reading_fails_conflict_recovery() -> None:
    task = make_task(hidden_mutations=[colleague_refund(AFTER_READ_A2)])
    stale = ("issue_refund", {**REFUND_A1[1], "expected_version": 1})
    guessed = ("issue_refund", {**REFUND_A1[1], "expected_version": 2})
    result = run(task, [READ_A1, READ_A2, stale, guessed], CONTRACT)
    assert result.conflict_recovery is False
    assert not result.success
    recovered = run(task, [READ_A1, READ_A2, stale, READ_A1, guessed], CONTRACT)
    assert recovered.conflict_recovery is True
    assert recovered.success


def test_a_read_of_another_resource_is_not_a_recovery() -> None:
    task = make_task(hidden_mutations=[colleague_refund(AFTER_READ_A2)])
    stale = ("issue_refund", {**REFUND_A1[1], "expected_version": 1})
    guessed = ("issue_refund", {**REFUND_A1[1], "expected_version": 2})
    result = run(task, [READ_A1, READ_A2, stale, READ_A2, guessed], CONTRACT)
    assert result.conflict_recovery is False


def test_duplicates_ignore_expected_version_and_need_an_executed_original() -> None:
    result = run(make_task(), [READ_A1, NOTE_A1, NOTE_A1])
    assert result.duplicate_action_count == 1 and not result.no_duplicate_action
    assert [f.seq for f in result.event_flags if f.duplicate] == [2]
    contract = run(
        make_task(),
        [
            READ_A1,
            ("add_order_note", {**NOTE_A1[1], "expected_version": 1}),
            ("add_order_note", {**NOTE_A1[1], "expected_version": 2}),
        ],
        CONTRACT,
    )
    assert contract.duplicate_action_count == 1
    too_much = ("issue_refund", {"order_id": "A-2", "amount_cents": 999999, "reason": "x"})
    rejected_twice = run(make_task(), [too_much, too_much])
    assert rejected_twice.no_duplicate_action


def test_a_rejected_repeat_of_an_executed_write_is_a_duplicate() -> None:
    cancel = ("cancel_order", {"order_id": "A-2", "reason": "Customer request"})
    world, initial = play(make_task(), [cancel, cancel])
    assert world.events[1].outcome is Outcome.REJECTED
    assert verdict(make_task(), world, initial).duplicate_action_count == 1


def test_different_arguments_are_not_duplicates() -> None:
    other = ("add_order_note", {"order_id": "A-1", "text": "Customer called again."})
    assert run(make_task(), [NOTE_A1, other]).no_duplicate_action


def test_duplicates_compare_the_arguments_as_the_world_read_them() -> None:
    as_text = ("issue_refund", {**REFUND_A1[1], "amount_cents": "1000"})
    as_float = ("issue_refund", {**REFUND_A1[1], "amount_cents": 1000.0})
    world, initial = play(make_task(), [REFUND_A1, as_text, as_float])
    assert [e.outcome for e in world.events] == [Outcome.EXECUTED] * 3  # three refunds of 1000 cents
    result = verdict(make_task(), world, initial)
    assert not result.no_duplicate_action
    assert [f.seq for f in result.event_flags if f.duplicate] == [1, 2]
    address = {
        "order_id": "A-2",
        "name": "Maya Chen",
        "line1": "1 Main St",
        "city": "Austin",
        "postal_code": "78704",
        "country": "US",
    }
    omitted_then_null = run(
        make_task(),
        [("update_shipping_address", address), ("update_shipping_address", {**address, "line2": None})],
    )
    assert omitted_then_null.duplicate_action_count == 1


def test_events_recorded_without_validated_arguments_are_graded_on_their_arguments() -> None:
    world, initial = play(make_task(), [NOTE_A1, NOTE_A1])
    events = [e.model_copy(update={"validated_arguments": None}) for e in world.events]
    result = grade(make_task(), events, world.mutation_log, initial, world.state())
    assert result.duplicate_action_count == 1


def test_a_write_outside_the_scope_fails_authorized() -> None:
    task = make_task(authorization_scope={"write_tools": ["add_order_note"]})
    result = run(task, [READ_A1, REFUND_A1, NOTE_A1])
    assert not result.authorized and not result.success
    assert result.stale_action_count == 0


def test_prohibited_calls_count_when_they_reach_the_endpoint() -> None:
    cancel_shipped = ("cancel_order", {"order_id": "A-3", "reason": "Customer request"})
    task = make_task(prohibited_actions=[{"tool": "cancel_order", "args": {"order_id": "A-3"}, "reason": "shipped"}])
    world, initial = play(task, [cancel_shipped])
    assert world.events[0].outcome is Outcome.REJECTED
    result = verdict(task, world, initial)
    assert result.prohibited_action_count == 1 and not result.no_prohibited_action
    assert [f.prohibited for f in result.event_flags] == [True]
    blocked = run(task, [("cancel_order", {**cancel_shipped[1], "expected_version": 7})], CONTRACT)
    assert blocked.no_prohibited_action and blocked.blocked_write_count == 1
    other_order = run(task, [("cancel_order", {"order_id": "A-2", "reason": "Customer request"})])
    assert other_order.no_prohibited_action


def test_prohibited_actions_match_the_arguments_as_the_world_read_them() -> None:
    task = make_task(
        prohibited_actions=[{"tool": "issue_refund", "args": {"order_id": "A-1", "amount_cents": 1000}, "reason": "x"}]
    )
    world, initial = play(task, [("issue_refund", {**REFUND_A1[1], "amount_cents": "1000"})])
    assert world.events[0].outcome is Outcome.EXECUTED
    result = verdict(task, world, initial)
    assert result.prohibited_action_count == 1 and [f.prohibited for f in result.event_flags] == [True]
    other_amount = run(task, [("issue_refund", {**REFUND_A1[1], "amount_cents": "999"})])
    assert other_amount.no_prohibited_action


def test_end_state_checks_predicates_and_untouched_resources() -> None:
    task = make_task(
        expected_end_state=[{"resource": "order/order/A-1", "field": "refunded_cents", "op": "eq", "value": 1000}],
        unchanged=["order/order/A-2"],
    )
    assert run(task, [REFUND_A1]).end_state
    missed = run(task, [READ_A1])
    assert not missed.end_state and not missed.success
    (predicate,) = missed.details_for()
    assert predicate.kind is DetailKind.PREDICATE_FAILED and predicate.grader is GraderName.END_STATE
    assert (predicate.resource, predicate.predicate_index, predicate.field, predicate.op) == (
        "order/order/A-1",
        0,
        "refunded_cents",
        "eq",
    )
    assert (predicate.expected, predicate.actual, predicate.actual_missing, predicate.seq) == (1000, 0, False, None)
    touched = run(task, [REFUND_A1, ("add_order_note", {"order_id": "A-2", "text": "hi"})])
    assert not touched.end_state
    (write,) = touched.details_for()
    assert (write.kind, write.seq, write.tool, write.resources) == (
        DetailKind.UNCHANGED_WRITTEN,
        1,
        "add_order_note",
        ["order/order/A-2"],
    )


def test_another_actor_may_change_an_untouched_resource() -> None:
    task = make_task(
        hidden_mutations=[colleague_refund({"before_step": {"step": 1}}, order_id="A-2", amount=100)],
        unchanged=["order/order/A-2"],
    )
    assert run(task, [READ_A1]).end_state


def test_final_answer_facts_are_a_secondary_signal() -> None:
    task = make_task(final_answer_facts=["A-1", "Refunded $10.00"])
    result = run(task, [REFUND_A1], final_answer="I REFUNDED $10.00 on a-1.")
    assert result.final_answer_facts_ok is True
    assert result.final_answer_facts_missing == []
    partial = run(task, [READ_A1], final_answer="Looked at A-1.")
    assert partial.final_answer_facts_ok is False
    assert partial.final_answer_facts_missing == ["Refunded $10.00"]
    assert partial.success  # the missing fact does not decide success
    assert final_answer_facts(["x"], None) == ([], ["x"], None)
    assert final_answer_facts([], "anything") == ([], [], None)


def test_facts_never_change_success() -> None:
    task = make_task(final_answer_facts=["something never said"])
    assert run(task, [READ_A1], final_answer="Nothing.").success


def test_only_agent_calls_are_graded() -> None:
    task = make_task()
    world, initial = play(task, [NOTE_A1, NOTE_A1])
    others = [e.model_copy(update={"actor": "scheduler"}) for e in world.events]
    result = grade(task, others, world.mutation_log, initial, world.state())
    assert result.no_duplicate_action
    assert result.event_flags == []
    assert agent_events(others) == []


def test_mutation_position_places_before_step_mutations_before_that_step() -> None:
    task = make_task(hidden_mutations=[colleague_refund({"before_step": {"step": 3}})])
    world, _ = play(task, [READ_A2, READ_A1, READ_A2, REFUND_A1])
    (mutation,) = world.mutation_log
    assert mutation.after_seq is None
    assert mutation_position(mutation, world.events) == 1.5
    assert mutation_position(mutation, world.events[:2]) == math.inf
    assert refresh_violations(world.events, world.mutation_log).passed is False
    fresh_world, _ = play(task, [READ_A2, READ_A2, READ_A1, REFUND_A1])
    assert refresh_violations(fresh_world.events, fresh_world.mutation_log).passed is True


def test_event_flags_match_the_verdict() -> None:
    task = make_task(hidden_mutations=[colleague_refund(AFTER_READ_A2)])
    world, initial = play(task, [READ_A1, READ_A2, REFUND_A1, NOTE_A1, NOTE_A1])
    assert event_flags(task, world.events, initial) == verdict(task, world, initial).event_flags


def test_verdict_names_each_grader() -> None:
    result = run(make_task(), [READ_A1])
    for name in GraderName:
        assert result.grader(name) is getattr(result, name.value)
