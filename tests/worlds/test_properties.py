"""Property test: random valid and invalid call sequences never raise and never change state on a failed call."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextdelta.worlds import WORLDS, Outcome, ProtectionMode, ToolKind
from tests.worlds.helpers import STATES, make_world
from tests.worlds.test_world import MUTATIONS, SEQUENCES

IDS = sorted(
    {rid.split(":")[-1] for state in STATES.values() for ids in state.values() for rid in ids}
    | {rid for state in STATES.values() for ids in state.values() for rid in ids}
)
PARAMS = sorted({name for w in WORLDS.values() for t in w.tools for name in t.args.model_fields} | {"expected_version"})

values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=20000),
    st.sampled_from([*IDS, "prod", "staging", "qa", "2026-12-02", "2026-12-02T14:00", "2026-12-02T09:30", "paid"]),
    st.text(max_size=6),
    st.lists(st.sampled_from(["ana@corp.example", "x@y", ""]), max_size=3),
)


def random_call(world_name: str) -> st.SearchStrategy[tuple[str, Any]]:
    names = [t.name for t in WORLDS[world_name].tools] + ["drop_table", ""]
    arguments = st.one_of(
        st.dictionaries(st.sampled_from(PARAMS), values, max_size=6),
        st.text(max_size=12),
        st.sampled_from(["{", "[]", "null", '{"order_id": "A-1001"', "1"]),
    )
    return st.tuples(st.sampled_from(names), arguments)


def sequences(world_name: str) -> st.SearchStrategy[list[tuple[str, Any]]]:
    return st.lists(st.one_of(st.sampled_from(SEQUENCES[world_name]), random_call(world_name)), max_size=25)


def check(world_name: str, mode: ProtectionMode, calls: list[tuple[str, Any]], with_mutations: bool) -> None:
    world = make_world(world_name, mode, mutations=MUTATIONS[world_name] if with_mutations else None)
    for step, (tool, arguments) in enumerate(calls, start=1):
        world.begin_step(step)
        if isinstance(arguments, dict) and mode is ProtectionMode.FRESHNESS_CONTRACT and step % 2:
            arguments = {**arguments, "expected_version": step % 3 + 1}
        versions = {key: entry["version"] for key, entry in world.state().items()}
        result = world.call(tool, arguments)
        event = result.event
        assert isinstance(json.loads(result.content), dict)
        assert event.error_code != "tool_error", result.content
        if event.outcome is not Outcome.EXECUTED:
            assert event.state_before == event.state_after
            assert event.resources_written == []
        elif event.kind is ToolKind.READ:
            assert event.state_before == event.state_after
        else:
            assert event.resources_written
            for key in event.resources_written:
                # the version right after the call: before any hidden mutation that the call triggered
                after_call = next(
                    (m.versions_before[key] for m in result.mutations if key in m.versions_before), world.version(key)
                )
                assert after_call == versions.get(key, 0) + 1


@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    world_name=st.sampled_from(sorted(WORLDS)),
    mode=st.sampled_from(list(ProtectionMode)),
    with_mutations=st.booleans(),
)
def test_random_sequences_never_raise_and_failed_calls_change_nothing(
    data: st.DataObject, world_name: str, mode: ProtectionMode, with_mutations: bool
) -> None:
    check(world_name, mode, data.draw(sequences(world_name)), with_mutations)
