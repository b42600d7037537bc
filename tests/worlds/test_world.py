"""The world engine: schemas, authorization, the freshness contract, hidden mutations, determinism."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextdelta.canonical import canonical_json, content_hash
from contextdelta.tasks import load_task
from contextdelta.worlds import WORLDS, Outcome, ProtectionMode, Scope, ToolContext, ToolKind, World
from tests.worlds.helpers import error_code, make_world, read, write

A1001 = "order/order/A-1001"
SHIP_A1001 = {"resource": A1001, "fields": {"status": "shipped"}}


# ---- schemas ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("world_name", sorted(WORLDS))
def test_schema_derivation_per_mode(world_name: str) -> None:
    definition = WORLDS[world_name]
    for spec in definition.tools:
        plain = spec.openai_schema(ProtectionMode.UNPROTECTED)["function"]["parameters"]
        contract = spec.openai_schema(ProtectionMode.FRESHNESS_CONTRACT)["function"]["parameters"]
        assert "expected_version" not in plain["properties"]
        if spec.kind is ToolKind.WRITE:
            assert contract["properties"]["expected_version"]["type"] == "integer"
            assert "expected_version" in contract["required"]
        else:
            assert contract == plain
        assert plain["additionalProperties"] is False
        assert "$defs" not in json.dumps(contract)


def test_each_world_has_two_reads_and_three_writes() -> None:
    for definition in WORLDS.values():
        kinds = [t.kind for t in definition.tools]
        assert kinds.count(ToolKind.READ) >= 2 and kinds.count(ToolKind.WRITE) >= 3


# ---- bad input -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments", "code"),
    [
        ("refund_everything", "{}", "unknown_tool"),
        ("get_order", '{"order_id": ', "malformed_arguments"),
        ("get_order", '["A-1001"]', "malformed_arguments"),
        ("get_order", "{}", "invalid_arguments"),
        ("get_order", '{"order_id": 1001}', "invalid_arguments"),
        ("issue_refund", '{"order_id": "A-1001", "amount_cents": "ten", "reason": "x"}', "invalid_arguments"),
        ("issue_refund", '{"order_id": "A-1001", "amount_cents": -5, "reason": "x"}', "invalid_arguments"),
        (
            "issue_refund",
            '{"order_id": "A-1001", "amount_cents": 5, "reason": "x", "force": true}',
            "invalid_arguments",
        ),
        ("get_order", '{"order_id": "Z-9"}', "unknown_resource"),
        ("cancel_order", '{"order_id": "Z-9", "reason": "x"}', "unknown_resource"),
    ],
)
def test_bad_calls_are_invalid_json_errors_and_change_nothing(tool: str, arguments: str, code: str) -> None:
    world = make_world("order")
    before = world.state_hash()
    result = world.call(tool, arguments)
    body = json.loads(result.content)
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    assert result.event.outcome is Outcome.INVALID
    assert world.state_hash() == before == result.event.state_after


@pytest.mark.parametrize(
    ("arguments", "kind"),
    [("0", "a number"), ("[]", "an array"), ("false", "a boolean"), ('""', "a string"), ("null", "null")],
)
def test_arguments_that_are_json_but_not_an_object_are_malformed_never_empty(arguments: str, kind: str) -> None:
    """``null`` or ``[]`` taken for ``{}`` would run a call the model never validly made (here: a tool whose
    parameters all have defaults would run)."""
    world = make_world("order")
    result = world.call("list_orders", arguments)
    error = json.loads(result.content)["error"]
    assert (result.event.outcome, error["code"]) == (Outcome.INVALID, "malformed_arguments")
    assert error["message"].startswith(f"The arguments must be a JSON object, not {kind} ({arguments})")
    assert result.event.arguments == arguments


@pytest.mark.parametrize(
    "arguments",
    [
        '{"order_id": "A-1001\\ud800"}',  # the escape in the argument text: a surrogate once decoded
        '{"order_id": "A-1001\\udc00\\ud800"}',  # low before high: no pair
        '{"order_id": "A-1001\ud800"}',  # the surrogate itself in the text
        {"order_id": "A-1001\ud800"},  # arguments given as a mapping (an MCP client's)
        {"order_id\ud800": "A-1001"},
    ],
    ids=["escaped", "reversed-pair", "in-text", "mapping-value", "mapping-key"],
)
def test_arguments_holding_an_unpaired_surrogate_are_malformed_and_recorded_encodable(arguments: Any) -> None:
    world = make_world("order")
    before = world.state_hash()
    result = world.call("get_order", arguments, call_id="c1")
    error = json.loads(result.content)["error"]
    assert (result.event.outcome, error["code"]) == (Outcome.INVALID, "malformed_arguments")
    assert "unpaired UTF-16 surrogate" in error["message"]
    assert world.state_hash() == before
    content_hash(result.event.model_dump(mode="json"))  # hashing encodes UTF-8: a surrogate would fail here


@pytest.mark.parametrize(
    "value",
    ["NaN", "Infinity", "-Infinity", "1e400", float("nan"), float("inf")],
    ids=["nan", "infinity", "minus-infinity", "overflow", "mapping-nan", "mapping-inf"],
)
def test_a_number_json_cannot_hold_is_malformed_and_never_reaches_the_state(value: str | float) -> None:
    # a number-typed setting took NaN, and the world could then no longer hash its state: call() raised
    world = make_world("config")
    before = world.state_hash()
    if isinstance(value, float):
        arguments: Any = {"environment": "prod", "key": "search.timeout_ms", "value": value}
    else:
        arguments = '{"environment": "prod", "key": "search.timeout_ms", "value": ' + value + "}"
    result = world.call("set_config", arguments)
    error = json.loads(result.content)["error"]
    assert (result.event.outcome, error["code"]) == (Outcome.INVALID, "malformed_arguments")
    assert "NaN, Infinity or a number too large" in error["message"]
    assert world.state_hash() == before
    fine = world.call("set_config", '{"environment": "prod", "key": "search.timeout_ms", "value": 2.5e2}')
    assert fine.event.outcome is Outcome.EXECUTED


def test_a_surrogate_pair_written_as_escapes_is_its_character() -> None:
    result = make_world("order").call("get_order", '{"order_id": "A-1001\\ud83d\\ude00"}')
    assert error_code(result) == "unknown_resource"  # parsed fine: the id just does not exist


def test_a_tool_name_holding_a_surrogate_is_an_unknown_tool_recorded_encodable() -> None:
    result = make_world("order").call("get_order\ud800", "{}")
    assert error_code(result) == "unknown_tool" and result.event.tool == "get_order\ufffd"
    content_hash(result.event.model_dump(mode="json"))


def test_arguments_nested_too_deeply_are_malformed() -> None:
    for depth in (200_000, 300):
        text = '{"order_id": ' + "[" * depth + "]" * depth + "}"
        result = make_world("order").call("get_order", text)
        error = json.loads(result.content)["error"]
        assert error["code"] == "malformed_arguments", depth
        assert "nested more than 200 levels deep" in error["message"], depth


def test_arguments_holding_a_number_too_long_to_read_are_malformed_not_a_tool_failure() -> None:
    """Valid JSON with an integer past Python's digit limit: the model's malformed arguments, never "the tool failed
    unexpectedly" (a tool_error, which says the harness broke)."""
    world = make_world("order")
    before = world.state_hash()
    result = world.call("get_order", '{"order_id": ' + "1" * 5000 + "}", call_id="c1")
    error = json.loads(result.content)["error"]
    assert (result.event.outcome, error["code"]) == (Outcome.INVALID, "malformed_arguments"), error
    assert "a number too long to read (an integer of more than 4,300 digits)" in error["message"]
    assert world.state_hash() == before
    content_hash(result.event.model_dump(mode="json"))


def test_invalid_arguments_say_what_is_allowed() -> None:
    body = json.loads(make_world("order").call("issue_refund", {"order_id": "A-1001"}).content)["error"]
    assert {p["field"] for p in body["problems"]} == {"amount_cents", "reason"}
    assert "amount_cents" in body["parameters"]
    unknown = json.loads(make_world("order").call("refund", {}).content)["error"]
    assert "issue_refund" in unknown["allowed_tools"]


def test_contract_requires_expected_version() -> None:
    world = make_world("order", ProtectionMode.FRESHNESS_CONTRACT)
    result = world.call("add_order_note", {"order_id": "A-1001", "text": "hi"})
    assert (result.event.outcome, error_code(result)) == (Outcome.INVALID, "invalid_arguments")


# ---- authorization ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("world_name", "scope", "tool", "resource", "args"),
    [
        (
            "order",
            Scope(limits={"issue_refund.amount_cents": 5000}),
            "issue_refund",
            A1001,
            {"order_id": "A-1001", "amount_cents": 5001, "reason": "goodwill"},
        ),
        (
            "order",
            Scope(write_tools=["add_order_note"]),
            "cancel_order",
            "order/order/A-1003",
            {"order_id": "A-1003", "reason": "x"},
        ),
        (
            "calendar",
            Scope(resources=["calendar/event/*"]),
            "create_event",
            "calendar/room/atlas",
            {
                "room_id": "atlas",
                "title": "t",
                "start": "2026-12-02T14:00",
                "end": "2026-12-02T15:00",
                "organizer": "ana@corp.example",
            },
        ),
        (
            "config",
            Scope(resources=["config/*/staging:*"]),
            "set_config",
            "config/setting/prod:payments.retry_limit",
            {"environment": "prod", "key": "payments.retry_limit", "value": 4},
        ),
    ],
)
def test_writes_outside_scope_are_forbidden_in_both_modes(
    mode: ProtectionMode, world_name: str, scope: Scope, tool: str, resource: str, args: dict[str, Any]
) -> None:
    world = make_world(world_name, mode, scope=scope)
    before = world.state_hash()
    result = write(world, tool, resource, **args)
    assert (result.event.outcome, error_code(result)) == (Outcome.FORBIDDEN, "forbidden")
    assert world.state_hash() == before


def test_scope_allows_writes_inside_it() -> None:
    world = make_world("config", scope=Scope(resources=["config/*/staging:*"]))
    result = world.call("set_config", {"environment": "staging", "key": "payments.retry_limit", "value": 2})
    assert result.event.outcome is Outcome.EXECUTED


def test_forbidden_comes_before_the_version_check() -> None:
    world = make_world("order", ProtectionMode.FRESHNESS_CONTRACT, scope=Scope(write_tools=[]))
    result = world.call("add_order_note", {"order_id": "A-1001", "text": "x", "expected_version": 99})
    assert result.event.outcome is Outcome.FORBIDDEN


# ---- the freshness contract ------------------------------------------------------------------------------


def _stale_address_change(mode: ProtectionMode) -> tuple[World, Any]:
    world = make_world(
        "order",
        mode,
        mutations=[
            {
                "id": "warehouse-ships",
                "actor": "warehouse",
                "trigger": {"after_tool_call": {"tool": "get_order"}},
                "set": SHIP_A1001,
            }
        ],
    )
    world.begin_step(1)
    read(world, "get_order", order_id="A-1001")
    world.begin_step(2)
    args = {"order_id": "A-1001", "amount_cents": 1000, "reason": "late delivery"}
    if mode is ProtectionMode.FRESHNESS_CONTRACT:
        args["expected_version"] = 1  # what the agent saw
    return world, world.call("issue_refund", args)


def test_stale_write_executes_unprotected() -> None:
    world, result = _stale_address_change(ProtectionMode.UNPROTECTED)
    assert result.event.outcome is Outcome.EXECUTED
    assert (result.event.observed_version, result.event.version_at_execution) == (1, 2)
    assert world.version(A1001) == 3


def test_stale_write_is_blocked_under_the_contract() -> None:
    world, result = _stale_address_change(ProtectionMode.FRESHNESS_CONTRACT)
    assert result.event.outcome is Outcome.BLOCKED
    assert result.event.state_before == result.event.state_after
    assert world.version(A1001) == 2
    error = json.loads(result.content)["error"]
    assert error == {
        "code": "version_conflict",
        "resource": A1001,
        "expected_version": 1,
        "current_version": 2,
        "read_tool": "get_order",
        "message": error["message"],
    }
    assert "shipped" not in result.content  # the new state is not revealed
    assert world.observed_version(A1001) == 1  # a conflict error is not an observation


def test_blocked_runs_before_business_logic() -> None:
    """A stale write that would also violate a guard is blocked, not rejected."""
    world = make_world("order", ProtectionMode.FRESHNESS_CONTRACT)
    result = world.call("issue_refund", {"order_id": "A-1004", "amount_cents": 1, "reason": "x", "expected_version": 7})
    assert result.event.outcome is Outcome.BLOCKED


# ---- hidden mutations ------------------------------------------------------------------------------------


def test_after_tool_call_fires_on_the_nth_matching_call_only() -> None:
    world = make_world(
        "order",
        mutations=[
            {
                "id": "ship",
                "actor": "warehouse",
                "trigger": {"after_tool_call": {"tool": "get_order", "n": 2, "args": {"order_id": "A-1001"}}},
                "set": SHIP_A1001,
            }
        ],
    )
    world.call("get_order", {"order_id": "A-1002"})  # other args: no match
    world.call("get_order", {"order_id": 1001})  # invalid: does not count
    first = world.call("get_order", {"order_id": "A-1001"})
    assert first.mutations == [] and world.version(A1001) == 1
    second = world.call("get_order", {"order_id": "A-1001"})
    assert [m.mutation_id for m in second.mutations] == ["ship"]
    assert json.loads(second.content)["order"]["status"] == "paid"  # the result predates the mutation
    third = world.call("get_order", {"order_id": "A-1001"})
    assert third.mutations == [] and json.loads(third.content)["order"]["status"] == "shipped"
    log = world.mutation_log
    assert len(log) == 1 and log[0].after_seq == second.event.seq
    assert (log[0].versions_before, log[0].versions_after) == ({A1001: 1}, {A1001: 2})


def test_after_tool_call_compares_arguments_as_the_tool_reads_them() -> None:
    # the trigger declares 2500 cents; the agent sends "2500" (the world refunds 2500), then 2500.0
    trigger = {"tool": "issue_refund", "n": 2, "args": {"order_id": "A-1001", "amount_cents": 2500}}
    world = make_world(
        "order",
        mutations=[{"id": "ship", "actor": "warehouse", "trigger": {"after_tool_call": trigger}, "set": SHIP_A1001}],
    )
    first = world.call("issue_refund", {"order_id": "A-1001", "amount_cents": "2500", "reason": "Damaged"})
    assert first.event.outcome is Outcome.EXECUTED and first.mutations == []
    assert first.event.validated_arguments == {"order_id": "A-1001", "amount_cents": 2500, "reason": "Damaged"}
    second = world.call("issue_refund", {"order_id": "A-1001", "amount_cents": 2500.0, "reason": "Damaged"})
    assert [m.mutation_id for m in second.mutations] == ["ship"]


@pytest.mark.parametrize("mode", list(ProtectionMode))
def test_a_boolean_is_not_a_number_for_a_tool(mode: ProtectionMode) -> None:
    # pydantic's lax mode read true as 1: `amount_cents: true` refunded a cent, `expected_version: true` pinned 1
    world = make_world("order", mode=mode)
    pinned = {"expected_version": True} if mode is ProtectionMode.FRESHNESS_CONTRACT else {}
    sent = world.call("issue_refund", {"order_id": "A-1001", "amount_cents": True, "reason": "Damaged", **pinned})
    assert sent.event.outcome is Outcome.INVALID and error_code(sent) == "invalid_arguments"
    assert "true is a boolean" in sent.content
    assert world.state() == make_world("order", mode=mode).state()
    # a boolean parameter still takes one, and a string of digits is still a number
    listed = make_world("calendar", mode=mode).call("list_events", {"include_cancelled": True})
    assert listed.event.outcome is Outcome.EXECUTED
    digits = world.call("issue_refund", {"order_id": "A-1001", "amount_cents": "100", "reason": "Damaged"})
    assert digits.event.validated_arguments is None or digits.event.validated_arguments["amount_cents"] == 100


def _retitled_after(trigger: dict[str, Any]) -> World:
    """A calendar world whose hidden mutation retitles evt-1 after a call matching ``trigger``."""
    retitle = {"resource": "calendar/event/evt-1", "fields": {"title": "Moved"}}
    mutation = {"id": "retitle", "actor": "ana", "trigger": {"after_tool_call": trigger}, "set": retitle}
    return make_world("calendar", mutations=[mutation])


def test_after_tool_call_reads_declared_values_as_the_tool_does() -> None:
    # declared "30" and a date; called with 30 and that date as a midnight datetime: one call as the tool reads it
    trigger = {
        "tool": "find_free_slots",
        "args": {"room_id": "borealis", "day": "2026-12-03", "duration_minutes": "30"},
    }
    world = _retitled_after(trigger)
    same_day = world.call(
        "find_free_slots", {"room_id": "borealis", "day": "2026-12-03T00:00:00", "duration_minutes": 30}
    )
    assert same_day.event.outcome is Outcome.EXECUTED
    assert [m.mutation_id for m in same_day.mutations] == ["retitle"]


def test_emails_the_tools_match_case_insensitively_are_one_argument_in_any_case() -> None:
    trigger = {"tool": "list_events", "args": {"attendee": "Ben@Corp.Example"}}
    world = _retitled_after(trigger)
    listed = world.call("list_events", {"attendee": "BEN@corp.example"})  # the world lists ben's events
    assert json.loads(listed.content)["count"] == 1
    assert listed.event.validated_arguments is not None
    assert listed.event.validated_arguments["attendee"] == "ben@corp.example"
    assert [m.mutation_id for m in listed.mutations] == ["retitle"]
    uninvite = world.call("update_attendees", {"event_id": "evt-1", "remove": ["Ben@corp.example"]})
    assert uninvite.event.validated_arguments == {"event_id": "evt-1", "add": [], "remove": ["ben@corp.example"]}
    orders = make_world("order").call("list_orders", {"customer_email": "Maya.Chen@Example.com"})
    assert orders.event.validated_arguments == {"customer_email": "maya.chen@example.com", "status": None}


def test_the_event_records_the_arguments_as_validated_only_for_calls_that_validated() -> None:
    world = make_world("calendar")
    listed = world.call("list_events", {"day": "2026-12-02"})
    assert listed.event.validated_arguments == {
        "day": "2026-12-02",
        "room_id": None,
        "attendee": None,
        "include_cancelled": False,
    }
    assert listed.event.arguments == {"day": "2026-12-02"}  # as given, beside them
    padded = world.call("get_event", {"event_id": "evt-1 "})  # ids are exact: no such event
    extra = world.call("get_event", {"event_id": "evt-1", "verbose": True})
    assert [padded.event.error_code, extra.event.error_code] == ["unknown_resource", "invalid_arguments"]
    assert extra.event.validated_arguments is None
    assert extra.event.interpreted_arguments() == {"event_id": "evt-1", "verbose": True}


def test_after_observation_fires_after_first_sight_even_in_a_list() -> None:
    world = make_world(
        "order",
        mutations=[
            {
                "id": "ship",
                "actor": "warehouse",
                "trigger": {"after_observation": {"resource": A1001}},
                "set": SHIP_A1001,
            }
        ],
    )
    none = world.call("list_orders", {"status": "shipped"})
    assert none.mutations == []
    listed = world.call("list_orders", {})
    assert [m.mutation_id for m in listed.mutations] == ["ship"]
    again = world.call("get_order", {"order_id": "A-1001"})
    assert again.mutations == [] and world.version(A1001) == 2


def test_before_step_fires_when_the_step_begins() -> None:
    world = make_world(
        "config",
        mutations=[
            {
                "id": "freeze",
                "actor": "release-manager",
                "trigger": {"before_step": {"step": 3}},
                "set": {
                    "resource": "config/setting/prod:payments.retry_limit",
                    "fields": {"frozen": True, "freeze_reason": "release 42"},
                },
            }
        ],
    )
    assert world.begin_step(1) == [] and world.begin_step(2) == []
    applied = world.begin_step(3)
    assert [(m.mutation_id, m.step, m.after_seq, m.trigger) for m in applied] == [("freeze", 3, None, "before_step")]
    assert world.begin_step(4) == []


def test_actor_tool_mutation_runs_business_logic_and_bumps_versions() -> None:
    world = make_world(
        "calendar",
        ProtectionMode.FRESHNESS_CONTRACT,
        mutations=[
            {
                "id": "sales-books-atlas",
                "actor": "sales-ops",
                "trigger": {"after_tool_call": {"tool": "find_free_slots"}},
                "tool": {
                    "name": "create_event",
                    "args": {
                        "room_id": "atlas",
                        "title": "Customer call",
                        "start": "2026-12-02T14:00",
                        "end": "2026-12-02T15:00",
                        "organizer": "sam@corp.example",
                    },
                },
            }
        ],
    )
    slots = world.call("find_free_slots", {"room_id": "atlas", "day": "2026-12-02", "duration_minutes": 60})
    assert slots.mutations[0].resources == ["calendar/event/evt-3", "calendar/room/atlas"]
    assert slots.mutations[0].versions_after == {"calendar/event/evt-3": 1, "calendar/room/atlas": 2}
    stale = world.call(
        "create_event",
        {
            "room_id": "atlas",
            "title": "Design review",
            "start": "2026-12-02T14:00",
            "end": "2026-12-02T15:00",
            "organizer": "ana@corp.example",
            "expected_version": 1,
        },
    )
    assert stale.event.outcome is Outcome.BLOCKED


def test_the_state_hash_kept_per_resource_is_the_hash_of_the_whole_state_after_every_change() -> None:
    world = make_world("order")
    calls: list[tuple[str, dict[str, Any]]] = [
        ("get_order", {"order_id": "A-1001"}),
        ("issue_refund", {"order_id": "A-1001", "amount_cents": 500, "reason": "broken"}),
        ("issue_refund", {"order_id": "A-1001", "amount_cents": 700, "reason": "again"}),
        ("cancel_order", {"order_id": "Z-9", "reason": "x"}),
    ]
    hashes = [world.state_hash()]
    for tool, arguments in calls:
        result = world.call(tool, arguments)
        assert result.event.state_after == world.state_hash() == content_hash(world.state())
        hashes.append(world.state_hash())
    assert len(set(hashes)) == 3  # the two refunds changed the state; the read and the bad call did not


def test_a_mutation_refused_by_a_guard_is_logged_and_changes_nothing() -> None:
    world = make_world(
        "order",
        mutations=[
            {
                "id": "double-refund",
                "actor": "billing",
                "trigger": {"before_step": {"step": 1}},
                "tool": {"name": "issue_refund", "args": {"order_id": "A-1004", "amount_cents": 100, "reason": "dup"}},
            }
        ],
    )
    before = world.state_hash()
    [event] = world.begin_step(1)
    assert (event.outcome, event.error_code) == (Outcome.REJECTED, "already_refunded")
    assert world.state_hash() == before


def test_versions_increment_on_agent_and_actor_writes() -> None:
    world = make_world(
        "order",
        mutations=[
            {
                "id": "note",
                "actor": "billing",
                "trigger": {"after_tool_call": {"tool": "add_order_note"}},
                "tool": {"name": "add_order_note", "args": {"order_id": "A-1001", "text": "chargeback opened"}},
            }
        ],
    )
    assert world.version(A1001) == 1
    world.call("add_order_note", {"order_id": "A-1001", "text": "called customer"})
    assert world.version(A1001) == 3  # agent write, then the billing actor's
    authors = [n["author"] for n in world.state()[A1001]["fields"]["notes"]]
    assert authors == ["agent", "billing"]


# ---- determinism ----------------------------------------------------------------------------------------

SEQUENCES: dict[str, list[tuple[str, Any]]] = {
    "order": [
        ("get_order", {"order_id": "A-1001"}),
        ("issue_refund", '{"order_id":"A-1001","amount_cents":900,"reason":"late"}'),
        ("cancel_order", {"order_id": "A-1002", "reason": "x"}),
        ("nope", "{"),
        ("list_orders", {}),
    ],
    "calendar": [
        ("list_events", {}),
        (
            "create_event",
            {
                "room_id": "borealis",
                "title": "1:1",
                "start": "2026-12-04T09:00",
                "end": "2026-12-04T09:30",
                "organizer": "ana@corp.example",
            },
        ),
        ("cancel_event", {"event_id": "evt-1", "reason": "offsite"}),
        ("get_room", {"room_id": "atlas"}),
    ],
    "config": [
        ("list_flags", {"environment": "prod"}),
        ("rollout_flag", {"environment": "prod", "flag": "new_checkout", "percentage": 50}),
        ("set_config", {"environment": "prod", "key": "billing.currency", "value": "EUR"}),
        ("delete_config", {"environment": "staging", "key": "payments.retry_limit"}),
    ],
}


MUTATIONS: dict[str, list[dict[str, Any]]] = {
    "order": [
        {"id": "ship", "actor": "warehouse", "trigger": {"after_tool_call": {"tool": "get_order"}}, "set": SHIP_A1001}
    ],
    "calendar": [
        {
            "id": "move",
            "actor": "ana",
            "trigger": {"before_step": {"step": 2}},
            "tool": {
                "name": "reschedule_event",
                "args": {"event_id": "evt-1", "start": "2026-12-02T12:00", "end": "2026-12-02T13:00"},
            },
        }
    ],
    "config": [
        {
            "id": "bump",
            "actor": "checkout-team",
            "trigger": {"after_observation": {"resource": "config/flag/prod:new_checkout"}},
            "tool": {"name": "rollout_flag", "args": {"environment": "prod", "flag": "new_checkout", "percentage": 25}},
        }
    ],
}


@pytest.mark.parametrize("world_name", sorted(SEQUENCES))
def test_same_sequence_gives_byte_identical_logs(world_name: str) -> None:
    def run() -> tuple[str, str, str]:
        world = make_world(world_name, mutations=MUTATIONS[world_name])
        for step, (tool, args) in enumerate(SEQUENCES[world_name], start=1):
            world.begin_step(step)
            world.call(tool, args, call_id=f"call_{step}")
        assert [m.outcome for m in world.mutation_log] == [Outcome.EXECUTED]
        events = canonical_json([e.model_dump(mode="json") for e in world.events])
        mutations = canonical_json([m.model_dump(mode="json") for m in world.mutation_log])
        return events, mutations, world.state_hash()

    first, second = run(), run()
    assert first == second
    assert len(first[0]) > 100


STALE_SCENARIOS: dict[str, tuple[dict[str, Any], tuple[str, dict[str, Any]], tuple[str, dict[str, Any]], str]] = {
    "order": (
        {"id": "ship", "actor": "warehouse", "trigger": {"after_tool_call": {"tool": "get_order"}}, "set": SHIP_A1001},
        ("get_order", {"order_id": "A-1001"}),
        ("add_order_note", {"order_id": "A-1001", "text": "customer asked to hold"}),
        A1001,
    ),
    "calendar": (
        {
            "id": "move",
            "actor": "ana",
            "trigger": {"after_tool_call": {"tool": "get_event"}},
            "tool": {"name": "update_attendees", "args": {"event_id": "evt-1", "add": ["dee@corp.example"]}},
        },
        ("get_event", {"event_id": "evt-1"}),
        ("update_attendees", {"event_id": "evt-1", "remove": ["ben@corp.example"]}),
        "calendar/event/evt-1",
    ),
    "config": (
        {
            "id": "bump",
            "actor": "payments-oncall",
            "trigger": {"after_tool_call": {"tool": "get_config"}},
            "tool": {"name": "set_config", "args": {"environment": "prod", "key": "payments.retry_limit", "value": 7}},
        },
        ("get_config", {"environment": "prod", "key": "payments.retry_limit"}),
        ("set_config", {"environment": "prod", "key": "payments.retry_limit", "value": 4}),
        "config/setting/prod:payments.retry_limit",
    ),
}


@pytest.mark.parametrize("world_name", sorted(STALE_SCENARIOS))
def test_stale_write_per_world_executes_unprotected_and_is_blocked_under_the_contract(world_name: str) -> None:
    mutation, (read_tool, read_args), (write_tool, write_args), key = STALE_SCENARIOS[world_name]
    outcomes = {}
    for mode in ProtectionMode:
        world = make_world(world_name, mode, mutations=[mutation])
        world.begin_step(1)
        seen = json.loads(world.call(read_tool, read_args).content)
        observed = next(v["version"] for v in seen.values() if isinstance(v, dict) and v.get("resource") == key)
        assert world.version(key) == observed + 1  # the other actor wrote after the read
        world.begin_step(2)
        args = dict(write_args)
        if mode is ProtectionMode.FRESHNESS_CONTRACT:
            args["expected_version"] = observed
        before = world.state_hash()
        result = world.call(write_tool, args)
        assert (result.event.observed_version, result.event.version_at_execution) == (observed, observed + 1)
        outcomes[mode] = result.event.outcome
        if mode is ProtectionMode.FRESHNESS_CONTRACT:
            assert world.state_hash() == before
    assert outcomes == {
        ProtectionMode.UNPROTECTED: Outcome.EXECUTED,
        ProtectionMode.FRESHNESS_CONTRACT: Outcome.BLOCKED,
    }


TASK_FILES = sorted((Path(__file__).resolve().parents[2] / "tasks").glob("**/*.yaml"))


@pytest.mark.parametrize("world_name", sorted(WORLDS))
def test_a_tool_gets_a_private_copy_equal_to_every_resource_of_every_task(world_name: str) -> None:
    """ToolContext.get copies by dumping and validating again: equal for every resource the tasks hold, sharing
    nothing (a tool that changes its copy changes nothing stored)."""
    tasks = [load_task(path) for path in TASK_FILES if path.parent.name == world_name]
    assert tasks
    for task in tasks:
        world = task.build_world(ProtectionMode.UNPROTECTED)
        stored = {key: model for key, (_, model) in world._resources.items()}
        context = ToolContext(
            world=world_name, models=WORLDS[world_name].kinds, stored=world._resources, clock=None, actor="t"
        )
        for key, model in stored.items():
            resource_id = key.split("/", 2)[2]
            copy = context.get(type(model), resource_id)
            assert copy == model and copy is not model
            for name, value in model:
                if isinstance(value, list | dict) and value:
                    assert getattr(copy, name) is not value
