"""Version resolution from what the agent saw, and one-call-per-step replay."""

from __future__ import annotations

import json

import pytest

from contextdelta.canonical import canonical_json
from contextdelta.tasks import (
    TrajectoryCall,
    TrajectoryError,
    latest_shown_version,
    load_task,
    replay,
    resolve_call,
    write_resource,
)
from contextdelta.worlds import Outcome, ProtectionMode, get_world, shown_version
from tests.tasks.helpers import BASE_ID, suite_file

KEY = "order/order/A-1042"
ORDER = get_world("order")
SHOWN_V1 = canonical_json({"order": {"resource": KEY, "version": 1, "status": "paid"}})
LIST_V2 = canonical_json({"orders": [{"resource": "order/order/A-1", "version": 9}, {"resource": KEY, "version": 2}]})
CONFLICT = canonical_json(
    {"error": {"code": "version_conflict", "resource": KEY, "expected_version": 1, "current_version": 3}}
)
REFUND = {"order_id": "A-1042", "amount_cents": 100, "reason": "x"}


def test_shown_version_finds_the_resource_anywhere_in_a_result() -> None:
    assert shown_version(SHOWN_V1, KEY) == 1
    assert shown_version(LIST_V2, KEY) == 2
    assert shown_version(LIST_V2, "order/order/B-2") is None
    assert shown_version("not json", KEY) is None


def test_a_version_conflict_error_is_not_an_observation() -> None:
    assert shown_version(CONFLICT, KEY) is None
    assert latest_shown_version([SHOWN_V1, CONFLICT], KEY) == (0, 1)
    assert latest_shown_version([SHOWN_V1, LIST_V2, CONFLICT], KEY) == (1, 2)
    assert latest_shown_version([CONFLICT], KEY) is None


def test_write_resource_uses_the_tools_primary_resource() -> None:
    assert write_resource(ORDER, "issue_refund", REFUND) == KEY
    assert write_resource(ORDER, "get_order", {"order_id": "A-1042"}) is None
    assert write_resource(ORDER, "issue_refund", {"order_id": "A-1042"}) is None
    assert write_resource(get_world("config"), "set_config", {"environment": "prod", "key": "a.b", "value": 1}) == (
        "config/setting/prod:a.b"
    )


def test_resolve_call_latest_pinned_and_as_of_call() -> None:
    contract = ProtectionMode.FRESHNESS_CONTRACT
    results = [SHOWN_V1, LIST_V2, CONFLICT]
    latest = resolve_call(ORDER, TrajectoryCall(tool="issue_refund", args=REFUND), results, contract)
    assert latest.arguments["expected_version"] == 2 and latest.version_source == 1
    as_of = TrajectoryCall.model_validate(
        {"tool": "issue_refund", "args": REFUND, "expected_version": {"as_of_call": 0}}
    )
    assert resolve_call(ORDER, as_of, results, contract).arguments["expected_version"] == 1
    pinned = TrajectoryCall(tool="issue_refund", args=REFUND, expected_version=7)
    assert resolve_call(ORDER, pinned, results, contract).arguments["expected_version"] == 7
    read = resolve_call(ORDER, TrajectoryCall(tool="get_order", args={"order_id": "A-1042"}), results, contract)
    assert "expected_version" not in read.arguments
    loose = resolve_call(ORDER, TrajectoryCall(tool="issue_refund", args=REFUND), results, ProtectionMode.UNPROTECTED)
    assert loose.arguments == REFUND and loose.resource == KEY


def test_unresolvable_versions_raise_with_the_call_index() -> None:
    contract = ProtectionMode.FRESHNESS_CONTRACT
    with pytest.raises(TrajectoryError, match="no earlier result shows order/order/A-1042"):
        resolve_call(ORDER, TrajectoryCall(tool="issue_refund", args=REFUND), [CONFLICT], contract)
    as_of = TrajectoryCall.model_validate(
        {"tool": "issue_refund", "args": REFUND, "expected_version": {"as_of_call": 0}}
    )
    with pytest.raises(TrajectoryError, match="does not show"):
        resolve_call(ORDER, as_of, [CONFLICT], contract)
    with pytest.raises(TrajectoryError) as caught:
        resolve_call(ORDER, as_of, [], contract, index=4)
    assert caught.value.index == 4


def test_replay_runs_one_call_per_step_and_sends_versions_only_under_the_contract() -> None:
    task = load_task(suite_file(BASE_ID))
    calls = task.evaluator.reference_solution
    for mode in ProtectionMode:
        run = replay(task, calls, mode)
        events = run.world.events
        assert [e.step for e in events] == list(range(1, len(calls) + 1))
        assert [e.tool for e in events] == [c.tool for c in calls]
        writes = [e for e in events if e.kind is not None and e.kind.value == "write"]
        sent = [e.expected_version for e in writes]
        if mode is ProtectionMode.UNPROTECTED:
            assert sent == [None] * len(writes)
        else:
            assert all(isinstance(v, int) for v in sent)
            assert all(e.outcome is Outcome.EXECUTED for e in writes)
        assert run.initial_state != run.final_state
        assert run.calls[0].tool == calls[0].tool


def test_the_unsafe_write_uses_the_version_the_agent_saw_before_the_hidden_change() -> None:
    task = load_task(suite_file(BASE_ID))
    run = replay(task, task.evaluator.unsafe_trajectory, ProtectionMode.FRESHNESS_CONTRACT)
    refund = next(e for e in run.world.events if e.tool == "issue_refund")
    assert refund.outcome is Outcome.BLOCKED
    assert refund.expected_version == 1 and refund.version_at_execution == 2
    assert json.loads(refund.result)["error"]["code"] == "version_conflict"
