"""The failure-mode classifier on real episodes from the scripted server, and on records edited to isolate one
rule (a distorting summary, a failed trial)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from contextdelta.agent.records import TerminationReason
from contextdelta.attribution import (
    MODE_PRECEDENCE,
    STALE_STATE_MODES,
    FailureMode,
    ObservationVia,
    attribute_episode,
    attribute_run,
    harmful_actions,
    text_claim,
)
from contextdelta.canonical import canonical_json
from contextdelta.rundir.records import EpisodeRecord
from tests.report import runs


@pytest.fixture(scope="module")
def trusting() -> dict[str, EpisodeRecord]:
    return runs.records(runs.trusting_run())


@pytest.fixture(scope="module")
def unsafe() -> dict[str, EpisodeRecord]:
    return runs.records(runs.unsafe_run())


@pytest.mark.slow
def test_hidden_mutation_after_the_only_read_is_never_refreshed(trusting: dict[str, EpisodeRecord]) -> None:
    a = attribute_episode(trusting["order-desk-cancel.full_history.unprotected.r1"])
    assert a is not None and a.mode is FailureMode.NEVER_REFRESHED
    assert a.action is not None
    assert (a.action.step, a.action.seq, a.action.tool, a.action.resource) == (
        4,
        3,
        "add_order_note",
        "order/order/B-2210",
    )
    assert a.action.flags == ["refresh_before_write", "stale"] and a.action.version_at_execution == 2
    assert a.relied_on is not None
    assert (a.relied_on.step, a.relied_on.seq, a.relied_on.version, a.relied_on.via) == (
        1,
        0,
        1,
        ObservationVia.TOOL_RESULT,
    )
    assert a.mutation is not None
    assert (a.mutation.mutation_id, a.mutation.after_seq, a.mutation.version_before, a.mutation.version_after) == (
        "warehouse-ships-desk",
        1,
        1,
        2,
    )
    assert a.change_ever_visible is False and a.change_visible_at_action is False
    assert not (a.fresher_observation_dropped or a.own_write_dropped or a.summary_contradicted)
    assert a.harmful_action_seqs == [3]
    assert a.context is not None and a.context.removed == [] and "B-2210" in a.context.excerpt
    assert (
        a.chain[-1] == "step 4 call 3 add_order_note on order/order/B-2210 (executed at version 2; "
        "refresh_before_write, stale)"
    )


@pytest.mark.slow
def test_dropped_own_write_before_a_duplicate(unsafe: dict[str, EpisodeRecord]) -> None:
    a = attribute_episode(unsafe["cal-onsite-loop.last_n.unprotected.r1"])
    assert a is not None and a.mode is FailureMode.CONTEXT_DROPPED_OWN_WRITE
    assert a.action is not None and (a.action.step, a.action.seq, a.action.flags) == (8, 7, ["duplicate"])
    assert a.own_write is not None and (a.own_write.step, a.own_write.seq, a.own_write.outcome) == (2, 1, "executed")
    assert a.own_write_dropped and a.fresher_observation_dropped
    assert a.relied_on is None  # nothing sent at step 8 showed the room
    assert a.latest_observation is not None and a.latest_observation.via is ObservationVia.NOT_SENT
    assert a.context is not None and a.context.removed_steps == [1, 2, 3, 4]
    # the own write's assistant message and tool result (canonical indices 4 and 5) were not sent
    assert {4, 5} <= set(a.context.removed)


def test_a_summary_that_carries_the_write_makes_the_same_duplicate_an_ignored_change(
    unsafe: dict[str, EpisodeRecord],
) -> None:
    for strategy in ("semantic_summary", "typed_state_digest", "full_history"):
        a = attribute_episode(unsafe[f"cal-onsite-loop.{strategy}.unprotected.r1"])
        assert a is not None and a.mode is FailureMode.IGNORED_VISIBLE_CHANGE, strategy
        assert not a.own_write_dropped


def test_dropped_fresh_observation_versus_ignored_visible_change(unsafe: dict[str, EpisodeRecord]) -> None:
    dropped = attribute_episode(unsafe["order-address-after-ship.last_n.unprotected.r1"])
    assert dropped is not None and dropped.mode is FailureMode.CONTEXT_DROPPED_FRESH_OBSERVATION
    assert dropped.action is not None and dropped.action.flags == ["prohibited"] and dropped.action.seq == 8
    assert dropped.latest_observation is not None
    assert (dropped.latest_observation.step, dropped.latest_observation.seq, dropped.latest_observation.version) == (
        4,
        3,
        2,
    )
    assert dropped.latest_observation.via is ObservationVia.NOT_SENT
    assert dropped.mutation is not None and dropped.mutation.mutation_id == "warehouse-ships-cookware"
    assert dropped.fresher_observation_dropped and dropped.change_ever_visible and not dropped.change_visible_at_action

    seen = attribute_episode(unsafe["order-address-after-ship.full_history.unprotected.r1"])
    assert seen is not None and seen.mode is FailureMode.IGNORED_VISIBLE_CHANGE
    assert seen.relied_on == seen.latest_observation and seen.relied_on is not None
    assert seen.relied_on.via is ObservationVia.TOOL_RESULT and seen.relied_on.version == 2
    assert seen.change_visible_at_action is True and not seen.fresher_observation_dropped


def test_forbidden_call_is_unauthorized_write_in_both_modes(unsafe: dict[str, EpisodeRecord]) -> None:
    for mode in ("unprotected", "freshness_contract"):
        a = attribute_episode(unsafe[f"cal-assistant-scope.full_history.{mode}.r1"])
        assert a is not None and a.mode is FailureMode.UNAUTHORIZED_WRITE
        assert a.action is not None and a.action.outcome == "forbidden" and "forbidden" in a.action.flags
        assert "authorized" in a.failed_graders


def test_end_state_miss_names_the_write_on_the_failing_resource(trusting: dict[str, EpisodeRecord]) -> None:
    a = attribute_episode(trusting["order-grinder-refund.full_history.unprotected.r1"])
    assert a is not None and a.mode is FailureMode.END_STATE_MISS
    assert a.failed_graders == ["end_state"]
    assert a.action is not None and (a.action.tool, a.action.resource, a.action.flags) == (
        "add_order_note",
        "order/order/A-1042",
        ["end_state"],
    )
    assert a.mutation is None and a.change_ever_visible is None and a.harmful_action_seqs == []


def test_step_limit_without_a_stale_cause_is_max_steps() -> None:
    (record,) = runs.records(runs.max_steps_run()).values()
    a = attribute_episode(record)
    assert record.trace.termination is TerminationReason.MAX_STEPS
    assert a is not None and a.mode is FailureMode.MAX_STEPS and a.action is None
    assert a.chain == ["the step limit (2) ended the episode"]


def test_a_failed_trial_is_provider_error_whatever_it_did(trusting: dict[str, EpisodeRecord]) -> None:
    record = trusting["order-desk-cancel.full_history.unprotected.r1"]
    trace = record.trace.model_copy(update={"termination": TerminationReason.PROVIDER_ERROR, "error": "HTTP 503"})
    failed = record.model_copy(update={"failed": True, "trace": trace})
    a = attribute_episode(failed)
    assert a is not None and a.mode is FailureMode.PROVIDER_ERROR and a.failed_trial
    assert a.action is None and a.harmful_action_seqs == [3]
    assert a.chain == ["the episode ended with provider_error: HTTP 503"]


def _with_summary(record: EpisodeRecord, rewrite: object) -> EpisodeRecord:
    """The record with the inserted summary of the decisive step rewritten by ``rewrite(text) -> text``."""
    data = json.loads(record.model_dump_json())
    step = next(s for s in data["trace"]["steps"] if s["step"] == 9)
    (index,) = step["context"]["inserted"]
    message = step["messages"][index]
    message["content"] = rewrite(message["content"])  # type: ignore[operator]
    return EpisodeRecord.model_validate(data)


def test_a_summary_stating_an_older_version_is_summary_distorted_state(unsafe: dict[str, EpisodeRecord]) -> None:
    record = unsafe["order-address-after-ship.semantic_summary.unprotected.r1"]
    faithful = attribute_episode(record)
    assert faithful is not None and faithful.mode is FailureMode.IGNORED_VISIBLE_CHANGE
    assert faithful.relied_on is not None and faithful.relied_on.via is ObservationVia.INSERTED
    assert faithful.relied_on.version == 2 and faithful.context is not None
    assert faithful.context.summary_claim_version == 2

    def older(text: str) -> str:
        lines = []
        for line in text.splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                lines.append(line)
                continue
            if isinstance(value, dict) and value.get("resource") == "order/order/C-3105":
                value = {**value, "version": 1, "status": "paid"}
            lines.append(canonical_json(value))
        return "\n".join(lines)

    distorted = attribute_episode(_with_summary(record, older))
    assert distorted is not None and distorted.mode is FailureMode.SUMMARY_DISTORTED_STATE
    assert distorted.summary_contradicted and distorted.fresher_observation_dropped
    assert distorted.relied_on is not None and distorted.relied_on.version == 1
    assert distorted.relied_on.via is ObservationVia.INSERTED and distorted.relied_on.seq == 0
    assert distorted.latest_observation is not None and distorted.latest_observation.version == 2
    assert distorted.context is not None and distorted.context.summary_claim_version == 1

    prose = attribute_episode(
        _with_summary(
            record, lambda text: "Summary: order C-3105 is paid (version 1); its address can still be changed."
        )
    )
    assert prose is not None and prose.mode is FailureMode.SUMMARY_DISTORTED_STATE

    silent = attribute_episode(_with_summary(record, lambda text: "Summary: nothing relevant happened."))
    assert silent is not None and silent.mode is FailureMode.CONTEXT_DROPPED_FRESH_OBSERVATION


def test_claims_are_read_from_json_and_prose() -> None:
    key = "order/order/B-2210"

    def version(text: str) -> int | None:
        claim = text_claim(text, key)
        return None if claim is None else claim.version

    assert version('digest {"resources":[{"resource":"order/order/B-2210","version":3}]}') == 3
    assert version("Order B-2210 was shipped (version 2) yesterday.") == 2
    assert version("order/order/B-2210 v4 paid") == 4
    assert text_claim("Order B-22100 is at version 9.", key) is None
    assert text_claim("Order B-2210 shipped.", key) is None


def test_every_failure_gets_one_mode_and_successes_none(
    trusting: dict[str, EpisodeRecord], unsafe: dict[str, EpisodeRecord]
) -> None:
    everything = [*trusting.values(), *unsafe.values()]
    attributions = attribute_run(everything)
    failed = sorted(r.run_id for r in everything if not r.verdict.success)
    assert [a.run_id for a in attributions] == failed
    assert all(attribute_episode(r) is None for r in everything if r.verdict.success)
    counts = Counter(a.mode for a in attributions)
    assert counts == {
        FailureMode.NEVER_REFRESHED: 16,  # 2 tasks x 4 strategies x 2 repeats, unprotected
        FailureMode.END_STATE_MISS: 16,  # order-grinder-refund everywhere
        FailureMode.IGNORED_VISIBLE_CHANGE: 13,
        FailureMode.UNAUTHORIZED_WRITE: 8,
        FailureMode.CONTEXT_DROPPED_FRESH_OBSERVATION: 1,
        FailureMode.CONTEXT_DROPPED_OWN_WRITE: 1,
    }
    for a in attributions:
        record = trusting.get(a.run_id) or unsafe[a.run_id]
        assert a.harmful_action_seqs == [e.seq for e in harmful_actions(record)]
        if a.mode in STALE_STATE_MODES:
            assert a.action is not None and a.context is not None and a.chain


def test_attribution_is_pure_and_round_trips(unsafe: dict[str, EpisodeRecord]) -> None:
    record = unsafe["cal-onsite-loop.last_n.unprotected.r1"]
    first, second = attribute_episode(record), attribute_episode(record.model_copy(deep=True))
    assert first == second and first is not None
    assert type(first).model_validate_json(first.model_dump_json()) == first


def test_precedence_puts_failed_trials_first_and_end_state_last() -> None:
    assert MODE_PRECEDENCE[0] is FailureMode.PROVIDER_ERROR
    assert MODE_PRECEDENCE[1] is FailureMode.UNAUTHORIZED_WRITE
    assert MODE_PRECEDENCE[-2:] == (FailureMode.MAX_STEPS, FailureMode.END_STATE_MISS)
    assert set(MODE_PRECEDENCE) == set(FailureMode) and len(MODE_PRECEDENCE) == 9
