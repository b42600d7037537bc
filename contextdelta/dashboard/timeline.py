"""The Episode page's timeline of one recorded episode, as plain data (no Streamlit here).

For each step: the messages sent next to the full canonical history at that point (what the context strategy
removed and what it inserted marked), the model's reply, the tool calls in order with their results and the
versions at every write (the version the agent last observed vs the version current when the write ran), and
the hidden mutations interleaved where they happened: before the model call, or right after the tool call that
triggered them. The same facts as ``contextdelta replay`` (whose message helpers it reuses), laid out for a page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from contextdelta.agent import EXTERNAL_PREFIX, StepRecord
from contextdelta.attribution import Attribution
from contextdelta.canonical import canonical_json
from contextdelta.context import PINNED
from contextdelta.grading import DetailKind, EventFlags, GraderDetail, GraderName, describe
from contextdelta.replay import message_content, message_summary, version_text
from contextdelta.rundir import EpisodeRecord
from contextdelta.worlds import MutationEvent, Outcome, ToolEvent, ToolKind

MessageStatus = Literal["pinned", "kept", "removed", "inserted"]
"""How a message fared at a step: ``pinned`` (system prompt or instruction, always sent), ``kept`` (sent
verbatim), ``removed`` (in the history, not sent), ``inserted`` (written by the strategy: summary or digest)."""


@dataclass(frozen=True)
class MessageView:
    """One message in the sent column or the history column of a step."""

    index: int
    role: str
    status: MessageStatus
    origin_step: int | None
    summary: str
    text: str
    history_index: int | None = None


@dataclass(frozen=True)
class CallView:
    """One agent tool call, its result, and the versions the evaluator recorded around it."""

    seq: int
    tool: str
    kind: str | None
    resource: str | None
    arguments: str
    result: str
    outcome: str
    error_code: str | None
    observed_version: int | None
    observed_seq: int | None
    version_at_execution: int | None
    expected_version: int | None
    flags: tuple[str, ...]

    @property
    def is_write(self) -> bool:
        return self.kind == ToolKind.WRITE.value

    @property
    def behind(self) -> bool:
        """A write whose resource was newer when it ran than the version the agent last observed (or never saw)."""
        if not self.is_write or self.version_at_execution is None:
            return False
        return self.observed_version is None or self.observed_version < self.version_at_execution


@dataclass(frozen=True)
class MutationView:
    """One hidden mutation: another actor's write, invisible to the agent."""

    mutation_id: str
    actor: str
    trigger: str
    step: int
    after_seq: int | None
    changes: tuple[tuple[str, int | None, int | None], ...]
    outcome: str

    @property
    def where(self) -> str:
        return f"after call #{self.after_seq}" if self.after_seq is not None else f"before step {self.step}"

    @property
    def text(self) -> str:
        """``mutation-id by actor (after call #3, after_tool_call): world/kind/id v1 -> v2``."""
        changes = ", ".join(f"{r} {version_text(a)} -> {version_text(b)}" for r, a, b in self.changes)
        outcome = "" if self.outcome == Outcome.EXECUTED.value else f" [{self.outcome}]"
        return f"{self.mutation_id} by {self.actor} ({self.where}, {self.trigger}): {changes}{outcome}"


@dataclass(frozen=True)
class TimelineItem:
    """A tool call or a hidden mutation, in the order they happened within a step."""

    kind: Literal["call", "mutation"]
    call: CallView | None = None
    mutation: MutationView | None = None


@dataclass(frozen=True)
class StepView:
    """Everything about one step."""

    step: int
    sent: tuple[MessageView, ...]
    history: tuple[MessageView, ...]
    removed: int
    inserted: int
    newly_removed: tuple[int, ...]
    mutations_before: tuple[MutationView, ...]
    reply: str
    items: tuple[TimelineItem, ...]
    prompt_tokens: int
    summary_calls: tuple[str, ...]
    note: str | None
    error: str | None
    decisive: bool
    context_known: bool = True
    """False for an external agent's step: it managed its own context, so what its model saw is unknown (``sent``
    is empty, ``removed`` and ``inserted`` 0, and nothing is known to be left out)."""

    @property
    def mutations(self) -> tuple[MutationView, ...]:
        """Every hidden mutation of the step, in order."""
        return self.mutations_before + tuple(i.mutation for i in self.items if i.mutation is not None)

    @property
    def calls(self) -> tuple[CallView, ...]:
        return tuple(i.call for i in self.items if i.call is not None)

    @property
    def flagged(self) -> bool:
        """A call of this step counts against a grader, or was blocked, rejected, forbidden or invalid."""
        return any(c.flags for c in self.calls)


@dataclass(frozen=True)
class DetailView:
    """One reason a grader failed, laid out in columns from the verdict's structured details."""

    grader: str
    call: str | None
    """``#seq step k tool`` of the call counted against the grader; None for a predicate on the final state."""
    resource: str | None
    expected: str | None
    """A failed predicate: ``field op value``."""
    actual: str | None
    """A failed predicate: the value in the final state (``missing`` when absent)."""
    versions: str | None
    """A stale write: the version the agent last saw and the version it ran at."""
    related: str | None
    """The other facts: the call it repeats, the block it followed, the changes it missed, the rule it broke."""
    text: str
    """The same detail in the graders' words."""


def _detail(d: GraderDetail) -> DetailView:
    kind = d.kind
    related = {
        DetailKind.UNCHANGED_WRITTEN: f"wrote {', '.join(d.resources)} (must stay unchanged)",
        DetailKind.DUPLICATE_WRITE: f"repeats #{d.repeats_seq}",
        DetailKind.MISSED_REFRESH: f"missed {', '.join(d.mutation_ids)}; last observed "
        + (f"at #{d.observation_seq}" if d.observation_seq is not None else "never"),
        DetailKind.UNRECOVERED_CONFLICT: f"retry after the block at #{d.blocked_seq}",
        DetailKind.PROHIBITED_CALL: f"{d.outcome}: {d.prohibited_reason}",
        DetailKind.FORBIDDEN_CALL: "outside the principal's scope",
    }.get(kind)
    predicate = kind is DetailKind.PREDICATE_FAILED
    return DetailView(
        grader=d.grader.value,
        call=f"#{d.seq} step {d.step} {d.tool}" if d.seq is not None else None,
        resource=d.resource,
        expected=f"{d.field} {d.op} {canonical_json(d.expected)}" if predicate else None,
        actual=("missing" if d.actual_missing else canonical_json(d.actual)) if predicate else None,
        versions=f"saw v{d.version_seen}, ran at v{d.version_at_execution}" if kind is DetailKind.STALE_WRITE else None,
        related=related,
        text=describe(d),
    )


@dataclass(frozen=True)
class EpisodeTimeline:
    """The whole episode: header facts, the verdict, the attribution of a failure, and the steps."""

    run_id: str
    run_group_id: str
    task: str
    world: str
    hazard: str
    strategy: str
    protection_mode: str
    repeat: int
    model: str
    success: bool
    failed_trial: bool
    termination: str
    graders: tuple[tuple[str, bool | None], ...]
    details: tuple[DetailView, ...]
    final_answer: str | None
    error: str | None
    attribution: Attribution | None
    steps: tuple[StepView, ...] = field(default_factory=tuple)
    control: str | None = None
    """The control condition (``--controls``, e.g. no_mutation) of a control episode; None in the main matrix."""

    @property
    def mutations(self) -> tuple[MutationView, ...]:
        return tuple(m for s in self.steps for m in s.mutations)


def _mutation(m: MutationEvent) -> MutationView:
    return MutationView(
        mutation_id=m.mutation_id,
        actor=m.actor,
        trigger=m.trigger,
        step=m.step,
        after_seq=m.after_seq,
        changes=tuple((r, m.versions_before.get(r), m.versions_after.get(r)) for r in m.resources),
        outcome=m.outcome.value,
    )


def _flags(event: ToolEvent, flags: EventFlags | None) -> tuple[str, ...]:
    words = [name for name in ("stale", "duplicate", "prohibited") if flags is not None and getattr(flags, name)]
    if event.outcome in (Outcome.BLOCKED, Outcome.FORBIDDEN, Outcome.REJECTED, Outcome.INVALID):
        words.append(event.outcome.value)
    return tuple(words)


def _call(name: str, arguments: str, result: str, event: ToolEvent, flags: EventFlags | None) -> CallView:
    return CallView(
        seq=event.seq,
        tool=name,
        kind=event.kind.value if event.kind else None,
        resource=event.resource,
        arguments=arguments,
        result=result,
        outcome=event.outcome.value,
        error_code=event.error_code,
        observed_version=event.observed_version,
        observed_seq=event.observed_seq,
        version_at_execution=event.version_at_execution,
        expected_version=event.expected_version,
        flags=_flags(event, flags),
    )


def _items(step: StepRecord, flags: dict[int, EventFlags]) -> tuple[TimelineItem, ...]:
    """Calls in order, each followed by the hidden mutations it triggered; unmatched mutations go last."""
    after: dict[int | None, list[MutationEvent]] = {}
    for m in step.evaluator.mutations_after_calls:
        after.setdefault(m.after_seq, []).append(m)
    items: list[TimelineItem] = []
    events = step.evaluator.tool_events
    for position, event in enumerate(events):
        call = step.tool_calls[position] if position < len(step.tool_calls) else None
        name = call.name if call is not None else event.tool
        arguments = call.arguments if call is not None else str(event.arguments)
        result = call.result if call is not None else event.result
        items.append(TimelineItem("call", call=_call(name, arguments, result, event, flags.get(event.seq))))
        items += [TimelineItem("mutation", mutation=_mutation(m)) for m in after.pop(event.seq, [])]
    for rest in after.values():
        items += [TimelineItem("mutation", mutation=_mutation(m)) for m in rest]
    return tuple(items)


def _reply(step: StepRecord) -> str:
    response = step.response
    if response is None:
        return f"no response: {step.error or 'unknown error'}"
    if response.tool_calls:
        calls = ", ".join(f"{c.name}({c.arguments})" for c in response.tool_calls)
        return f"calls {calls}" + (f" and says: {response.content}" if response.content else "")
    return f"answers: {response.content or '(empty)'}"


def _step(
    step: StepRecord,
    history: list[dict[str, object]],
    origin: list[int],
    flags: dict[int, EventFlags],
    previous_removed: set[int],
    decisive_step: int | None,
    context_known: bool = True,
) -> StepView:
    context = step.context
    removed = set(context.removed)
    inserted = set(context.inserted)
    pinned = PINNED

    def status_of(index: int) -> MessageStatus:
        if index < pinned:
            return "pinned"
        return "removed" if index in removed else "kept"

    history_view = tuple(
        MessageView(
            index=i,
            role=str(history[i].get("role", "?")),
            status=status_of(i),
            origin_step=origin[i] if i < len(origin) else None,
            summary=message_summary(history[i], False),
            text=message_content(history[i]) or message_summary(history[i], True),
        )
        for i in range(min(context.canonical_message_count, len(history)))
    )
    kept = iter(i for i in range(context.canonical_message_count) if i not in removed)
    sent: list[MessageView] = []
    for index, message in enumerate(step.messages):
        if index in inserted:
            sent.append(
                MessageView(
                    index=index,
                    role=str(message.get("role", "?")),
                    status="inserted",
                    origin_step=None,
                    summary=message_summary(message, False),
                    text=message_content(message) or "",
                )
            )
            continue
        source = next(kept, None)
        sent.append(
            MessageView(
                index=index,
                role=str(message.get("role", "?")),
                status="pinned" if source is not None and source < pinned else "kept",
                origin_step=origin[source] if source is not None and source < len(origin) else None,
                summary=message_summary(message, False),
                text=message_content(message) or message_summary(message, True),
                history_index=source,
            )
        )
    return StepView(
        step=step.step,
        sent=tuple(sent),
        history=history_view,
        removed=len(removed),
        inserted=len(inserted),
        newly_removed=tuple(sorted(removed - previous_removed)),
        mutations_before=tuple(_mutation(m) for m in step.evaluator.mutations_before_step),
        reply=_reply(step),
        items=_items(step, flags),
        prompt_tokens=step.harness_prompt_tokens,
        summary_calls=tuple(
            f"folded steps {', '.join(map(str, c.new_steps))} into the summary (covers "
            f"{', '.join(map(str, c.covers_steps))})"
            for c in context.summary_calls
        ),
        note=step.note,
        error=step.error,
        decisive=step.step == decisive_step,
        context_known=context_known,
    )


def episode_timeline(record: EpisodeRecord, attribution: Attribution | None = None) -> EpisodeTimeline:
    """The timeline of one episode; ``attribution`` (its failure's cause chain) marks the decisive step."""
    trace, verdict = record.trace, record.verdict
    history = trace.canonical_history()
    origin = record.trace.canonical_steps()
    flags = {f.seq: f for f in verdict.event_flags}
    decisive = attribution.action.step if attribution is not None and attribution.action is not None else None
    known = not record.strategy.startswith(EXTERNAL_PREFIX)  # an external agent's context is its own, unrecorded
    steps: list[StepView] = []
    previous: set[int] = set()
    for step in trace.steps:
        steps.append(_step(step, history, origin, flags, previous, decisive, known))
        previous = set(step.context.removed)
    return EpisodeTimeline(
        run_id=record.run_id,
        run_group_id=record.run_group_id,
        task=f"{record.task_id} v{record.task_version}",
        world=record.world,
        hazard=record.hazard,
        strategy=record.strategy,
        protection_mode=record.protection_mode,
        repeat=record.repeat,
        model=trace.model,
        success=verdict.success and not record.failed,
        failed_trial=record.failed,
        termination=trace.termination.value,
        graders=tuple((g.value, None if record.failed else verdict.grader(g)) for g in GraderName),
        details=() if record.failed else tuple(_detail(d) for d in verdict.details_for()),
        final_answer=trace.final_answer,
        error=trace.error,
        attribution=attribution,
        steps=tuple(steps),
        control=record.control,
    )
