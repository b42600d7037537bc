"""Task families: every family builds valid tasks along the horizon, ids encode the parameters, the horizon is
what the family says, and the context-trusting policy's stale writes follow the window (no HTTP here)."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from contextdelta.grading import grade
from contextdelta.tasks import Hazard, Task
from contextdelta.tasks.families import FAMILIES, FamilyParams, TaskFamily, Timing, cell_params
from contextdelta.tasks.families._base import after_call, call
from contextdelta.validation import check_replays
from contextdelta.worlds import ProtectionMode, get_world
from tests.testing.episode_loop import last_n, run_policy, stale_writes

HORIZONS = (1, 2, 3, 4, 9)
GIVEAWAYS = ("hidden", "stale", "mutation", "hazard", "concurrent", "other actor", "another actor")


def _family_ids(family: TaskFamily) -> str:
    return family.name


def _tasks(family: TaskFamily, horizons: tuple[int, ...] = HORIZONS, per_cell: int = 4) -> list[Task]:
    return [family.build(cell_params(family, h, i, seed=7)) for h in horizons for i in range(per_cell)]


def test_two_families_per_world_and_four_hazards() -> None:
    per_world = Counter(f.world for f in FAMILIES.values())
    assert set(per_world) == {"order", "calendar", "config"} and min(per_world.values()) >= 2
    assert len({f.hazard for f in FAMILIES.values()}) >= 4


@pytest.mark.parametrize("family", FAMILIES.values(), ids=_family_ids)
def test_every_generated_task_passes_every_validation_check(family: TaskFamily) -> None:
    for task in _tasks(family):
        checked = check_replays(task.id, task)
        assert checked.problems == [], [p.render() for p in checked.problems]
        assert checked.reference_ok and checked.unsafe_ok and checked.null_ok and checked.control_ok
        assert task.evaluator.family is not None
        assert checked.gap == task.evaluator.family.horizon - 1  # no other result shows the written resource


@pytest.mark.parametrize("family", FAMILIES.values(), ids=_family_ids)
def test_the_dependent_write_is_the_horizonth_call_after_the_counted_observation(family: TaskFamily) -> None:
    definition = get_world(family.world)
    for task in _tasks(family):
        info = task.evaluator.family
        assert info is not None
        unsafe = task.evaluator.unsafe_trajectory
        assert len(unsafe) - 1 - info.observation_call == info.horizon
        observed, write = unsafe[info.observation_call], unsafe[-1]
        write_spec = definition.tool(write.tool)
        assert write_spec is not None and write_spec.kind.value == "write"
        # the reference shares everything up to the write, then re-reads the resource and acts on it
        reference = task.evaluator.reference_solution
        assert reference[: len(unsafe) - 1] == unsafe[:-1]
        assert len(reference) >= len(unsafe)
        assert observed.tool in {t.name for t in definition.tools}


@pytest.mark.parametrize("family", FAMILIES.values(), ids=_family_ids)
def test_ids_encode_family_parameters_and_seed(family: TaskFamily) -> None:
    params = cell_params(family, 8, 5, seed=3)
    task = family.build(params)
    mutation = params.mutation.replace("_", "-")
    assert task.id == f"{family.name}-h08-d{params.distractors}-{mutation}-{params.timing.value}-s3005"
    assert task.evaluator.family is not None
    assert task.evaluator.family.model_dump() | {"observation_call": 0} == {
        "name": family.name,
        "generator_version": task.version,
        "horizon": 8,
        "distractors": params.distractors,
        "mutation": params.mutation,
        "timing": params.timing.value,
        "seed": 3005,
        "observation_call": 0,
    }


@pytest.mark.parametrize("family", FAMILIES.values(), ids=_family_ids)
def test_a_cell_cycles_through_every_mutation_and_timing(family: TaskFamily) -> None:
    combos = {(p.mutation, p.timing) for p in (cell_params(family, 4, i, 0) for i in range(8))}
    assert combos == {(m, t) for m in family.mutations for t in family.timings}


@pytest.mark.parametrize("family", FAMILIES.values(), ids=_family_ids)
def test_the_same_seed_tells_the_same_story_at_every_horizon(family: TaskFamily) -> None:
    short, long = (family.build(cell_params(family, h, 2, seed=1)) for h in (1, 16))
    assert short.evaluator.reference_solution[-2:] == long.evaluator.reference_solution[-2:]
    assert short.evaluator.expected_end_state[-1] == long.evaluator.expected_end_state[-1]
    other_seed = family.build(cell_params(family, 1, 2, seed=2))
    assert other_seed.evaluator.initial_state != short.evaluator.initial_state


@pytest.mark.parametrize("family", FAMILIES.values(), ids=_family_ids)
def test_generation_is_deterministic(family: TaskFamily) -> None:
    params = cell_params(family, 6, 3, seed=11)
    assert family.build(params).model_dump() == family.build(params).model_dump()


@pytest.mark.parametrize("family", FAMILIES.values(), ids=_family_ids)
def test_instructions_give_nothing_away(family: TaskFamily) -> None:
    for task in _tasks(family, horizons=(1, 4), per_cell=4):
        text = task.public.instruction.casefold()
        for word in GIVEAWAYS:
            assert word not in text, (task.id, word)
        for mutation in task.evaluator.hidden_mutations:
            assert mutation.id not in text
        for action in task.evaluator.prohibited_actions:
            assert action.reason.casefold() not in text


def test_early_and_late_timing_place_the_change_around_the_intermediate_work() -> None:
    family = FAMILIES["order-refund-handled"]
    base = cell_params(family, 6, 0, 0)
    early = family.build(base.model_copy(update={"timing": Timing.EARLY}))
    late = family.build(base.model_copy(update={"timing": Timing.LATE}))
    early_trigger = early.evaluator.hidden_mutations[0].trigger
    late_trigger = late.evaluator.hidden_mutations[0].trigger
    assert early_trigger.after_observation is not None  # right after the look-up
    assert late_trigger.after_tool_call is not None
    last_shared = late.evaluator.unsafe_trajectory[-2]
    assert (late_trigger.after_tool_call.tool, late_trigger.after_tool_call.args) == (
        last_shared.tool,
        last_shared.args,
    )


def test_a_parameter_outside_the_family_is_refused() -> None:
    family = FAMILIES["calendar-invite-twice"]
    with pytest.raises(ValueError, match="timing 'early' is not one of none"):
        family.build(FamilyParams(horizon=2, distractors=1, mutation="none", timing=Timing.EARLY, seed=0))
    with pytest.raises(ValueError, match="mutation 'shipped'"):
        family.build(FamilyParams(horizon=2, distractors=1, mutation="shipped", timing=Timing.NONE, seed=0))


def _stale_counts(task: Task) -> tuple[int, int]:
    full = run_policy("context_trusting", task, ProtectionMode.UNPROTECTED)
    window = run_policy("context_trusting", task, ProtectionMode.UNPROTECTED, last_n(3))
    return len(stale_writes(full.world)), len(stale_writes(window.world))


@pytest.mark.parametrize("name", ["order-address-shipped", "calendar-meeting-moved"])
def test_superseded_families_make_last_n_stale_exactly_when_the_revealing_result_leaves_the_window(name: str) -> None:
    family = FAMILIES[name]
    curve: dict[int, set[tuple[int, int]]] = defaultdict(set)
    for h in (1, 2, 3, 4, 5, 8):
        for i in range(4):
            curve[h].add(_stale_counts(family.build(cell_params(family, h, i, 0))))
    assert {h: sorted(v) for h, v in curve.items()} == {
        1: [(0, 0)],
        2: [(0, 0)],
        3: [(0, 0)],
        4: [(0, 1)],
        5: [(0, 1)],
        8: [(0, 1)],
    }


@pytest.mark.parametrize("name", ["order-refund-handled", "config-limit-retuned"])
def test_hidden_mutation_families_make_full_history_stale_and_last_n_safe_once_the_read_leaves(name: str) -> None:
    family = FAMILIES[name]
    for h, expected in ((1, (1, 1)), (3, (1, 1)), (4, (1, 0)), (8, (1, 0))):
        for i in range(4):
            assert _stale_counts(family.build(cell_params(family, h, i, 0))) == expected, (h, i)


def test_no_mutation_control_of_a_generated_task_is_solved_and_harmless() -> None:
    from contextdelta.tasks.controls import without_mutations
    from contextdelta.tasks.trajectory import replay

    task = FAMILIES["order-address-shipped"].build(cell_params(FAMILIES["order-address-shipped"], 4, 0, 0))
    quiet = without_mutations(task)
    run = replay(quiet, quiet.evaluator.unsafe_trajectory, ProtectionMode.UNPROTECTED)
    verdict = grade(quiet, run.world.events, run.world.mutation_log, run.initial_state, run.final_state)
    assert verdict.success  # without the shipment the address change is what the customer asked for
    assert task.evaluator.hazard is Hazard.SUPERSEDED_OBSERVATION


@pytest.mark.parametrize("horizon", [1, 2, 5])
def test_the_launch_freeze_family_is_all_reads_and_refuses_the_change_the_snapshot_suggests(horizon: int) -> None:
    from contextdelta.tasks.trajectory import replay
    from contextdelta.worlds import Outcome, ToolKind

    family = FAMILIES["config-launch-freeze"]
    task = family.build(cell_params(family, horizon, 1, 0))
    world = get_world(task.world)
    # the right ending and every step before it are reads: nothing a small model must write correctly
    specs = [world.tool(c.tool) for c in task.evaluator.reference_solution]
    assert all(spec is not None and spec.kind is ToolKind.READ for spec in specs)
    assert len(task.evaluator.reference_solution) >= 6
    write = task.evaluator.unsafe_trajectory[-1]
    assert write.tool == "set_config" and write.expected_version == 1  # the ticket's snapshot
    assert '"frozen":false' in task.public.instruction and '"version":1' in task.public.instruction
    unprotected = replay(task, task.evaluator.unsafe_trajectory, ProtectionMode.UNPROTECTED)
    assert unprotected.world.events[-1].outcome is Outcome.REJECTED  # the freeze refuses it: it reached the logic
    verdict = grade(
        task,
        unprotected.world.events,
        unprotected.world.mutation_log,
        unprotected.initial_state,
        unprotected.final_state,
    )
    assert verdict.end_state and not verdict.no_prohibited_action and not verdict.success
    protected = replay(task, task.evaluator.unsafe_trajectory, ProtectionMode.FRESHNESS_CONTRACT)
    assert protected.world.events[-1].outcome is Outcome.BLOCKED


def test_a_generated_trigger_counts_the_calls_the_world_matches() -> None:
    """The world matches a write's trigger on its effect key: an earlier refund of the same order and amount worded
    otherwise is a match too, so the trigger after the second one must say n=2 (it fired after the first)."""
    first = call("issue_refund", order_id="A-1", amount_cents="500", reason="Goodwill")
    second = call("issue_refund", order_id="A-1", amount_cents=500, reason="Goodwill credit: the box was dented")
    reads = [call("get_order", order_id="A-1"), call("get_order", order_id="A-1")]
    trigger = after_call("order", [reads[0], first, reads[1], second], -1).after_tool_call
    assert trigger is not None and trigger.n == 2
    read_trigger = after_call("order", [*reads, first], 1).after_tool_call
    assert read_trigger is not None and read_trigger.n == 2
