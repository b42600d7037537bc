"""The failure-mode classifier: a pure function from a recorded episode to its attribution.

The decisive action and its mode are chosen in the order of `MODE_PRECEDENCE`. The stale-state analysis of one
write W on resource R at step s compares three versions of R:

- ``v_exec``: R's version when W ran (recorded in W's event);
- ``v_full``: the freshest version any tool result showed before step s (the full canonical history);
- ``v_view``: the freshest version in the messages sent at step s (verbatim tool results, or a claim in an
  inserted summary/digest); 1 (the start version) when the context showed none.

Then, in this order:

1. ``v_full < v_exec``: a change after the last observation was never shown before the step: ``never_refreshed``
   (when that change was the agent's own write, whether that write was in the context decides between
   ``ignored_visible_change`` and ``context_dropped_own_write``).
2. ``v_view < v_full``: the history had a fresher observation the context lacked. ``summary_distorted_state``
   when an inserted summary/digest stated an older version of R than the last observation it replaced;
   otherwise ``context_dropped_own_write`` when the first fresher observation was the agent's own write, else
   ``context_dropped_fresh_observation``.
3. The context had the freshest version: ``ignored_visible_change`` when another actor's change of R (or a
   version conflict) lay between the agent's first observation of R and that freshest one; no stale-state
   cause otherwise.

A duplicate first checks the write it repeats (E): when neither E's call nor its result was sent at step s, no
inserted message carried it and the sent view of R predates it, the mode is ``context_dropped_own_write`` (or
``summary_distorted_state`` when an inserted message stated E failed); when E was visible and the version
analysis finds no other cause, ``ignored_visible_change``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from contextdelta.agent import EpisodeTrace
from contextdelta.attribution._index import (
    OBSERVATION_CONFLICT,
    OBSERVATION_OWN_WRITE,
    Change,
    Claim,
    EpisodeIndex,
    Observation,
    message_text,
    position_of,
    resource_id,
)
from contextdelta.attribution._model import (
    MODE_DESCRIPTIONS,
    ActionRef,
    Attribution,
    ContextAtAction,
    FailureMode,
    MutationRef,
    ObservationRef,
    ObservationVia,
)
from contextdelta.grading import REACHED, DetailKind, Verdict
from contextdelta.grading import harmful_actions as grading_harmful_actions
from contextdelta.rundir import FAILED_TERMINATIONS, EpisodeRecord
from contextdelta.worlds import Outcome, ToolEvent, ToolKind

START_VERSION = 1
_EXCERPT_LIMIT = 900


def harmful_actions(record: EpisodeRecord) -> list[ToolEvent]:
    """The episode's harmful actions (`contextdelta.grading.harmful_actions` of its events and verdict flags)."""
    return grading_harmful_actions(record.trace.tool_events(), record.verdict.event_flags)


@dataclass
class _Cause:
    """The stale-state analysis of one action."""

    mode: FailureMode | None = None
    relied_on: ObservationRef | None = None
    latest: ObservationRef | None = None
    mutation: MutationRef | None = None
    own_write: ToolEvent | None = None
    fresher_dropped: bool = False
    own_write_dropped: bool = False
    summary_contradicted: bool = False
    change_ever_visible: bool | None = None
    change_visible_now: bool | None = None
    claim: Claim | None = None
    chain: list[str] = field(default_factory=list)


def _mutation_ref(change: Change | None, resource: str) -> MutationRef | None:
    if change is None or change.mutation is None:
        return None
    m = change.mutation
    return MutationRef(
        mutation_id=m.mutation_id,
        actor=m.actor,
        step=m.step,
        after_seq=m.after_seq,
        trigger=m.trigger,
        resource=resource,
        version_before=change.version_before,
        version_after=change.version_after,
    )


def _action_ref(index: EpisodeIndex, event: ToolEvent, flags: Iterable[str] = ()) -> ActionRef:
    record = index.records.get(event.seq)
    raw = (
        record.arguments
        if record is not None
        else (event.arguments if isinstance(event.arguments, str) else str(event.arguments))
    )
    return ActionRef(
        step=event.step,
        seq=event.seq,
        tool=event.tool,
        resource=event.resource,
        outcome=event.outcome.value,
        arguments=raw,
        version_at_execution=event.version_at_execution,
        expected_version=event.expected_version,
        flags=sorted(set(flags)),
    )


def _ref(o: Observation, via: ObservationVia) -> ObservationRef:
    return ObservationRef(
        resource=o.resource, version=o.version, step=o.step, seq=o.seq, tool=o.tool, kind=o.kind, via=via
    )


def _describe_observation(o: Observation) -> str:
    what = {OBSERVATION_OWN_WRITE: "the agent's own write", OBSERVATION_CONFLICT: "a version conflict"}.get(
        o.kind, "a read"
    )
    return f"step {o.step} call {o.seq} {o.tool} ({what}) showed {o.resource} at version {o.version}"


def _describe_change(change: Change, resource: str) -> str:
    if change.mutation is not None:
        m = change.mutation
        where = f"after call {m.after_seq}" if m.after_seq is not None else f"before step {m.step}"
        return (
            f"hidden mutation {m.mutation_id} by {m.actor} ({where}) changed {resource} "
            f"from version {change.version_before} to {change.version_after}"
        )
    assert change.own_write is not None
    e = change.own_write
    return (
        f"the agent's own write at step {e.step} call {e.seq} ({e.tool}) changed {resource} to version "
        f"{change.version_after}"
    )


def _own_write_visible(index: EpisodeIndex, step: int, write: ToolEvent) -> bool:
    return (
        index.sent(step, index.call_message.get(write.seq))
        or index.sent(step, index.result_message.get(write.seq))
        or index.write_claim(step, write) not in (None, "error")
    )


def _visibility(index: EpisodeIndex, before: Sequence[Observation], change: Change, step: int) -> tuple[bool, bool]:
    """(ever shown before the step, shown at the step) for the state after ``change``."""
    after = [o for o in before if o.seq > change.position]
    ever = any(index.ever_sent(o.message, step) for o in after)
    now = any(index.sent(step, o.message) for o in after)
    return ever, now


def _analyze(index: EpisodeIndex, action: ToolEvent, original: ToolEvent | None) -> _Cause:
    """The stale-state analysis of ``action`` (see the module docstring); ``original`` is the executed write a
    duplicate repeats."""
    cause = _Cause()
    resource, step = action.resource, action.step
    if resource is None:
        if original is not None and not _own_write_visible(index, step, original):
            cause.mode, cause.own_write, cause.own_write_dropped = FailureMode.CONTEXT_DROPPED_OWN_WRITE, original, True
        elif original is not None:
            cause.mode, cause.own_write = FailureMode.IGNORED_VISIBLE_CHANGE, original
        return cause
    before = index.observations_before(resource, action)
    verbatim = [o for o in before if index.sent(step, o.message)]
    claim = index.claim(step, resource)
    cause.claim = claim
    latest = before[-1] if before else None
    seen = verbatim[-1] if verbatim else None
    if claim is not None and (seen is None or claim.version > seen.version):
        matched = next((o for o in reversed(before) if o.version == claim.version), None)
        cause.relied_on = (
            _ref(matched, ObservationVia.INSERTED)
            if matched is not None
            else ObservationRef(
                resource=resource,
                version=claim.version,
                step=None,
                seq=None,
                tool=None,
                kind="claim",
                via=ObservationVia.INSERTED,
            )
        )
        view_position = position_of(matched) if matched is not None else -math.inf
    elif seen is not None:
        cause.relied_on = _ref(seen, ObservationVia.TOOL_RESULT)
        view_position = position_of(seen)
    else:
        view_position = -math.inf
    if latest is not None:
        if index.sent(step, latest.message):
            via = ObservationVia.TOOL_RESULT
        elif claim is not None and claim.version == latest.version:
            via = ObservationVia.INSERTED
        else:
            via = ObservationVia.NOT_SENT
        cause.latest = _ref(latest, via)
    v_view = cause.relied_on.version if cause.relied_on is not None else START_VERSION
    v_full = latest.version if latest is not None else START_VERSION
    v_exec = action.version_at_execution
    cause.fresher_dropped = any(o.version > v_view and not index.sent(step, o.message) for o in before)
    inserted = bool(index.inserted_texts(step))
    if cause.relied_on is not None:
        cause.chain.append(
            f"at step {step} the freshest view of {resource} in the messages sent was version {v_view} "
            f"({'a summary/digest claim' if cause.relied_on.via is ObservationVia.INSERTED else 'a tool result'})"
        )
    else:
        cause.chain.append(f"at step {step} no message sent showed {resource}")

    if original is not None:
        cause.own_write = original
        original_after = next(
            (o.version for o in index.observations if o.seq == original.seq and o.resource == resource), None
        )
        effect_seen = original_after is not None and v_view >= original_after
        if not _own_write_visible(index, step, original) and not effect_seen:
            cause.own_write_dropped = True
            cause.chain.append(
                f"the agent's own write at step {original.step} call {original.seq} ({original.tool}) was not in "
                f"the messages sent at step {step}"
            )
            if index.write_claim(step, original) == "error":
                cause.summary_contradicted = True
                cause.chain.append("an inserted summary/digest stated that write as failed")
                cause.mode = FailureMode.SUMMARY_DISTORTED_STATE
            elif inserted and claim is not None and original_after is not None and claim.version < original_after:
                cause.summary_contradicted = True
                cause.chain.append(
                    f"an inserted summary/digest stated {resource} at version {claim.version}, older than the "
                    f"version {original_after} the agent's write produced"
                )
                cause.mode = FailureMode.SUMMARY_DISTORTED_STATE
            else:
                cause.mode = FailureMode.CONTEXT_DROPPED_OWN_WRITE
            own = Change(original.seq - 0.5, original.version_at_execution, original_after, own_write=original)
            cause.change_ever_visible, cause.change_visible_now = _visibility(index, before, own, step)
            cause.change_ever_visible = cause.change_ever_visible or index.ever_sent(
                index.result_message.get(original.seq), step
            )
            return cause

    if v_exec is not None and v_full < v_exec:
        change = index.first_change_after(resource, position_of(latest), action.seq)
        if change is not None:
            cause.chain.append(_describe_change(change, resource))
            cause.mutation = _mutation_ref(change, resource)
            cause.change_ever_visible, cause.change_visible_now = False, False
            if change.own_write is not None:
                cause.own_write = change.own_write
                if _own_write_visible(index, step, change.own_write):
                    cause.change_ever_visible = cause.change_visible_now = True
                    cause.mode = FailureMode.IGNORED_VISIBLE_CHANGE
                else:
                    cause.own_write_dropped = True
                    cause.change_ever_visible = index.ever_sent(index.call_message.get(change.own_write.seq), step)
                    cause.mode = FailureMode.CONTEXT_DROPPED_OWN_WRITE
            else:
                cause.chain.append(f"no tool result before step {step} showed {resource} after that change")
                cause.mode = FailureMode.NEVER_REFRESHED
            return cause

    if v_view < v_full:
        fresh = next(o for o in before if o.version > v_view)
        change = index.first_change_after(resource, view_position, action.seq)
        # the first hidden mutation after the view (the first change may be the agent's own write)
        hidden = next(
            (c for c in index.changes(resource, action.seq) if c.mutation is not None and c.position > view_position),
            None,
        )
        cause.mutation = _mutation_ref(hidden, resource)
        if change is not None:
            cause.chain.append(_describe_change(change, resource))
            cause.change_ever_visible, cause.change_visible_now = _visibility(index, before, change, step)
        cause.chain.append(_describe_observation(fresh) + f", but it was not in the messages sent at step {step}")
        assert latest is not None  # v_full > v_view >= 1 needs an observation
        if inserted and claim is not None and claim.version < v_full and not index.sent(step, latest.message):
            cause.summary_contradicted = True
            cause.chain.append(
                f"an inserted summary/digest stated {resource} at version {claim.version}, older than the last "
                f"observation it replaced (version {v_full})"
            )
            cause.mode = FailureMode.SUMMARY_DISTORTED_STATE
        elif fresh.kind == OBSERVATION_OWN_WRITE:
            cause.own_write = index.events.get(fresh.seq)
            cause.own_write_dropped = True
            cause.mode = FailureMode.CONTEXT_DROPPED_OWN_WRITE
        else:
            cause.mode = FailureMode.CONTEXT_DROPPED_FRESH_OBSERVATION
        return cause

    first = before[0] if before else None
    if first is not None and latest is not None:
        seen_changes = [
            c
            for c in index.changes(resource, action.seq)
            if c.mutation is not None and first.seq < c.position < latest.seq
        ]
        conflicts = [o for o in before if o.kind == OBSERVATION_CONFLICT and index.sent(step, o.message)]
        if seen_changes or conflicts:
            change = seen_changes[0] if seen_changes else None
            if change is not None:
                cause.chain.append(_describe_change(change, resource))
                cause.mutation = _mutation_ref(change, resource)
            cause.chain.append(_describe_observation(latest) + f", and it was in the messages sent at step {step}")
            cause.change_ever_visible = cause.change_visible_now = True
            cause.mode = FailureMode.IGNORED_VISIBLE_CHANGE
            return cause
    if original is not None:
        cause.chain.append(
            f"the agent's own write at step {original.step} call {original.seq} ({original.tool}) was visible "
            f"at step {step}"
        )
        cause.change_ever_visible = cause.change_visible_now = True
        cause.mode = FailureMode.IGNORED_VISIBLE_CHANGE
    return cause


def _end_state_targets(verdict: Verdict) -> tuple[set[int], set[str]]:
    """From the end_state details: seqs of writes to must-stay-unchanged resources, and the resources of
    failing expected predicates."""
    seqs = {d.seq for d in verdict.details_for(DetailKind.UNCHANGED_WRITTEN) if d.seq is not None}
    resources = {d.resource for d in verdict.details_for(DetailKind.PREDICATE_FAILED) if d.resource is not None}
    return seqs, resources


def _candidates(record: EpisodeRecord) -> dict[int, set[str]]:
    """Agent actions that count against a grader, with the reasons they count (by seq)."""
    verdict = record.verdict
    events = record.trace.tool_events()
    flags = {f.seq: f for f in verdict.event_flags}
    found: dict[int, set[str]] = {}

    def add(seq: int, why: str) -> None:
        found.setdefault(seq, set()).add(why)

    for event in harmful_actions(record):
        flag = flags[event.seq]
        for name, on in (("stale", flag.stale), ("duplicate", flag.duplicate), ("prohibited", flag.prohibited)):
            if on:
                add(event.seq, name)
    for detail in verdict.details_for(DetailKind.MISSED_REFRESH, DetailKind.UNRECOVERED_CONFLICT):
        if detail.seq is not None:
            add(detail.seq, detail.grader.value)
    if not verdict.end_state:
        seqs, resources = _end_state_targets(verdict)
        for event in events:
            if event.actor != "agent" or event.kind is not ToolKind.WRITE or event.outcome not in REACHED:
                continue
            if event.seq in seqs or resources.intersection({event.resource, *event.resources_written}):
                add(event.seq, "end_state")
    return found


def _duplicate_original(verdict: Verdict, events: Sequence[ToolEvent], action: ToolEvent) -> ToolEvent | None:
    """The executed write the verdict says ``action`` repeats (its duplicate detail's ``repeats_seq``): the
    grader's own answer, so a record graded by an earlier duplicate rule names the call it was graded against."""
    repeats = next(
        (d.repeats_seq for d in verdict.details_for(DetailKind.DUPLICATE_WRITE) if d.seq == action.seq), None
    )
    return next((e for e in events if repeats is not None and e.seq == repeats), None)


def _snippet(text: str, needles: Sequence[str], width: int = 320) -> str:
    flat = " ".join(text.split())
    at = next((flat.find(n) for n in needles if n and flat.find(n) >= 0), -1)
    start = max(0, at - width // 3) if at >= 0 else 0
    piece = flat[start : start + width]
    return ("…" if start > 0 else "") + piece + ("…" if start + width < len(flat) else "")


def context_excerpt(trace: EpisodeTrace, step: int, resource: str | None) -> str:
    """A short excerpt of the messages sent at ``step``: what the strategy did, what inserted messages said,
    and the last sent tool result that mentions ``resource``."""
    return _excerpt(EpisodeIndex(trace), step, resource)


def _excerpt(index: EpisodeIndex, step: int, resource: str | None) -> str:
    record = index.steps.get(step)
    if record is None:
        return f"(step {step} not recorded)"
    ctx = record.context
    removed_steps = sorted({index.message_step[i] for i in ctx.removed if i in index.message_step})
    sent, history = len(record.messages), ctx.canonical_message_count
    head = f"[step {step}: {sent} messages sent from a canonical history of {history}"
    if ctx.removed:
        head += f"; {len(ctx.removed)} removed (steps {_ranges(removed_steps)})"
    if ctx.inserted:
        head += f"; {len(ctx.inserted)} written by {index.trace.strategy.name}"
    lines = [head + "]"]
    needles = [resource, resource_id(resource)] if resource else []
    for i in ctx.inserted:
        if 0 <= i < len(record.messages):
            lines.append("inserted: " + _snippet(message_text(record.messages[i]), needles))
    last_tool = None
    for message in record.messages:
        if message.get("role") == "tool" and resource and resource_id(resource) in message_text(message):
            last_tool = message
    if last_tool is not None:
        seq = next((s for s, r in index.records.items() if r.call_id == last_tool.get("tool_call_id")), None)
        where = f"step {index.events[seq].step} call {seq} {index.events[seq].tool}" if seq is not None else "?"
        lines.append(f"tool result ({where}): " + _snippet(message_text(last_tool), needles))
    elif resource:
        lines.append(f"(no tool result sent at this step mentions {resource})")
    text = "\n".join(lines)
    return text if len(text) <= _EXCERPT_LIMIT else text[: _EXCERPT_LIMIT - 1] + "…"


def _ranges(values: Sequence[int]) -> str:
    parts: list[str] = []
    for v in values:
        if parts and parts[-1].split("-")[-1] == str(v - 1):
            parts[-1] = f"{parts[-1].split('-')[0]}-{v}"
        else:
            parts.append(str(v))
    return ", ".join(parts) or "none"


def _context(index: EpisodeIndex, trace: EpisodeTrace, action: ToolEvent, claim: Claim | None) -> ContextAtAction:
    record = index.steps[action.step]
    ctx = record.context
    return ContextAtAction(
        step=action.step,
        strategy=trace.strategy.name,
        canonical_messages=ctx.canonical_message_count,
        sent_messages=len(record.messages),
        removed=list(ctx.removed),
        removed_steps=sorted({index.message_step[i] for i in ctx.removed if i in index.message_step}),
        inserted=list(ctx.inserted),
        summary_claim_version=claim.version if claim is not None else None,
        excerpt=_excerpt(index, action.step, action.resource),
    )


def attribute_episode(record: EpisodeRecord) -> Attribution | None:
    """The failure mode and cause chain of one episode; None when it succeeded.

    Pure: reads only ``record`` (its verdict and trace), so the atlas, ``attribute`` and the dashboard agree.
    """
    if record.verdict.success and not record.failed:
        return None
    trace = record.trace
    index = EpisodeIndex(trace)
    events = trace.tool_events()
    harmful = [e.seq for e in harmful_actions(record)]
    candidates = _candidates(record)
    chosen: ToolEvent | None = None
    cause = _Cause()
    failed_trial = record.failed or trace.termination in FAILED_TERMINATIONS
    forbidden = [e for e in events if e.actor == "agent" and e.outcome is Outcome.FORBIDDEN]
    if failed_trial:
        mode = FailureMode.PROVIDER_ERROR
        note = f"the episode ended with {trace.termination.value}" + (f": {trace.error}" if trace.error else "")
        cause.chain.append(note)
    elif forbidden:
        chosen = forbidden[0]
        cause = _analyze(index, chosen, None)
        candidates.setdefault(chosen.seq, set()).add("forbidden")
        mode = FailureMode.UNAUTHORIZED_WRITE
    else:
        mode = FailureMode.END_STATE_MISS
        for seq in sorted(candidates):
            event = index.events[seq]
            original = _duplicate_original(record.verdict, events, event) if "duplicate" in candidates[seq] else None
            analysis = _analyze(index, event, original)
            if analysis.mode is not None:
                chosen, cause, mode = event, analysis, analysis.mode
                break
        if chosen is None:
            if not candidates:
                # Nothing counted against a grader: show the first write the freshness contract blocked, if
                # any (the change was caught; the agent did not finish the task afterwards).
                blocked = [e for e in events if e.actor == "agent" and e.outcome is Outcome.BLOCKED]
                if blocked:
                    candidates[blocked[0].seq] = {"blocked"}
            if candidates:
                chosen = index.events[min(candidates)]
                cause = _analyze(index, chosen, None)
                cause.mode = None
            if trace.termination.value == FailureMode.MAX_STEPS.value:
                mode = FailureMode.MAX_STEPS
    action = _action_ref(index, chosen, candidates.get(chosen.seq, ())) if chosen is not None else None
    chain = list(cause.chain)
    if chosen is not None:
        chain.append(
            f"step {chosen.step} call {chosen.seq} {chosen.tool}"
            + (f" on {chosen.resource}" if chosen.resource else "")
            + f" ({chosen.outcome.value}"
            + (f" at version {chosen.version_at_execution}" if chosen.version_at_execution is not None else "")
            + (f"; {', '.join(sorted(candidates.get(chosen.seq, ())))}" if candidates.get(chosen.seq) else "")
            + ")"
        )
    if mode is FailureMode.MAX_STEPS:
        chain.append(f"the step limit ({trace.max_steps}) ended the episode")
    if mode is FailureMode.END_STATE_MISS and chosen is None:
        chain.append("no agent action counted against a grader: a required action never happened")
    if trace.external is not None and mode is not None:
        # the harness saw the agent's calls and the results it returned, never what its model was sent
        chain.append(
            f"external agent {trace.external.agent}: what its model saw is unknown; 'shown' and 'visible' here mean "
            "returned to the agent in a tool result"
        )
    return Attribution(
        run_group_id=record.run_group_id,
        run_id=record.run_id,
        task_id=record.task_id,
        hazard=record.hazard,
        strategy=record.strategy,
        protection_mode=record.protection_mode,
        repeat=record.repeat,
        termination=trace.termination.value,
        failed_trial=failed_trial,
        mode=mode,
        failed_graders=[] if failed_trial else [g.value for g in record.verdict.failed_graders],  # no verdict
        action=action,
        relied_on=cause.relied_on,
        latest_observation=cause.latest,
        mutation=cause.mutation,
        own_write=_action_ref(index, cause.own_write) if cause.own_write is not None else None,
        fresher_observation_dropped=cause.fresher_dropped,
        own_write_dropped=cause.own_write_dropped,
        summary_contradicted=cause.summary_contradicted,
        change_ever_visible=cause.change_ever_visible,
        change_visible_at_action=cause.change_visible_now,
        context=_context(index, trace, chosen, cause.claim)
        if chosen is not None and chosen.step in index.steps
        else None,
        harmful_action_seqs=harmful,
        chain=chain,
        explanation=MODE_DESCRIPTIONS[mode],
    )


def attribute_run(records: Iterable[EpisodeRecord]) -> list[Attribution]:
    """The attribution of every failed episode, sorted by run id."""
    found = (attribute_episode(r) for r in sorted(records, key=lambda r: r.run_id))
    return [a for a in found if a is not None]
