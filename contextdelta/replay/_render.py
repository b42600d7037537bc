"""A step-by-step text replay of a recorded episode.

For each step: the hidden mutations applied before the model call, what the model saw (the messages the
context strategy sent, marking the ones it wrote itself, and the canonical-history messages it left out), what
the model replied and called, what each call returned, with the versions at every write (observed by the agent,
at execution, expected), the graders' flags, and the hidden mutations that fired after the calls.

Rendering builds a :class:`rich.text.Text`: styled in a terminal, ``.plain`` when piped or in tests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from rich.text import Text

from contextdelta._words import plural
from contextdelta.agent import CUT_SHORT_REASONS, FailedCallRecord, StepRecord
from contextdelta.grading import EventFlags, GraderName, describe
from contextdelta.rundir import EpisodeRecord
from contextdelta.worlds import MutationEvent, Outcome, ToolEvent, ToolKind

PREVIEW_CHARS = 160
"""Characters of a message or tool result shown when not ``full``."""
RULE_WIDTH = 100

STYLES = {
    "title": "bold",
    "rule": "cyan",
    "label": "bold cyan",
    "dim": "dim",
    "removed": "red",
    "inserted": "magenta",
    "call": "yellow",
    "write": "bold yellow",
    "ok": "green",
    "bad": "bold red",
    "mutation": "bold magenta",
}


_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff\ud800-\udfff]")
"""What a terminal must not be sent as is: control characters (ESC starts a terminal escape: ``]0;title``,
``[2J``), the bidirectional controls that reorder the text after them, and lone UTF-16 surrogates (an edited
``raw_runs.jsonl`` can hold a ``\\ud800`` escape; UTF-8 cannot encode it, so printing it would crash). The
dashboard escapes the same set (``contextdelta.dashboard._text``)."""


def printable(text: str) -> str:
    """Text from a model, an endpoint or a run directory made safe for a terminal: each character of `_HIDDEN`
    written as its escape (``\\x1b``, ``\\u202e``, ``\\ud800``) instead of sent; newlines and tabs kept."""
    return _HIDDEN.sub(
        lambda found: f"\\x{ord(found.group()):02x}" if ord(found.group()) < 0x100 else f"\\u{ord(found.group()):04x}",
        text,
    )


def _one_line(text: str) -> str:
    return " ".join(text.split())


def failed_call_text(failed: FailedCallRecord) -> str:
    """A failed call's attempts on one line: how many, how long in all, and each one's answer and time."""
    took = f" in {failed.elapsed_s:.3f}s" if failed.elapsed_s is not None else ""
    text = f"{failed.call} call: {plural(failed.attempts, 'attempt')}{took}"
    if failed.attempt_failures:
        text += ": " + ", ".join(
            f"#{number} "
            + (f"HTTP {a.status_code} " if a.status_code is not None else "")
            + a.error
            + (f" {a.code}" if a.code else "")
            + f" ({a.elapsed_s:.3f}s)"
            for number, a in enumerate(failed.attempt_failures, 1)
        )
    if failed.refusal is not None:
        text += f"; access refused ({failed.refusal}): no retry gets another answer"
    return text


def _preview(text: str | None, full: bool, limit: int = PREVIEW_CHARS) -> str:
    if text is None:
        return "(no content)"
    flat = text if full else _one_line(text)
    if full or len(flat) <= limit:
        return flat
    return f"{flat[:limit]}… (+{len(flat) - limit} chars)"


def _arguments(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def message_summary(message: dict[str, Any], full: bool) -> str:
    role = message.get("role", "?")
    calls = message.get("tool_calls") or []
    if role == "assistant" and calls:
        rendered = ", ".join(
            f"{c.get('function', {}).get('name')}({_preview(c.get('function', {}).get('arguments'), full, 80)})"
            for c in calls
        )
        text = f"calls {rendered}"
        if message.get("content"):
            text += f" — {_preview(message['content'], full)}"
        return text
    if role == "tool":
        return f"result of {message.get('tool_call_id')}: {_preview(message_content(message), full)}"
    return _preview(message_content(message), full)


def message_content(message: dict[str, Any]) -> str | None:
    content = message.get("content")
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def _steps(values: Sequence[int]) -> str:
    if not values:
        return "none"
    return (
        f"{values[0]}-{values[-1]}"
        if len(values) > 1 and values[-1] - values[0] == len(values) - 1
        else (", ".join(str(v) for v in values))
    )


class _Writer:
    def __init__(self) -> None:
        self.text = Text()

    def line(self, *parts: tuple[str, str | None] | str, indent: int = 0) -> None:
        if indent:
            self.text.append(" " * indent)
        for part in parts:
            if isinstance(part, str):
                self.text.append(printable(part))
            else:
                content, style = part
                self.text.append(printable(content), style=STYLES.get(style, style) if style else None)
        self.text.append("\n")

    def block(self, content: str, style: str | None, indent: int) -> None:
        for raw in content.splitlines() or [""]:
            self.line((raw, style), indent=indent)


def _flag_words(event: ToolEvent, flags: EventFlags | None) -> list[str]:
    words = []
    if flags is not None:
        words += [name.upper() for name in ("stale", "duplicate", "prohibited") if getattr(flags, name)]
    if event.outcome in (Outcome.BLOCKED, Outcome.FORBIDDEN, Outcome.REJECTED, Outcome.INVALID):
        words.append(event.outcome.value.upper())
    return words


def _versions(event: ToolEvent) -> str:
    parts = []
    if event.kind is ToolKind.WRITE:
        seen = "never seen" if event.observed_version is None else f"v{event.observed_version}"
        if event.observed_seq is not None:
            seen += f" (call #{event.observed_seq})"
        parts.append(f"agent last saw {seen}")
        if event.expected_version is not None:
            parts.append(f"expected v{event.expected_version}")
        if event.version_at_execution is not None:
            parts.append(f"at execution v{event.version_at_execution}")
    elif event.version_at_execution is not None:
        parts.append(f"v{event.version_at_execution}")
    return " · ".join(parts)


def version_text(version: int | None) -> str:
    """A resource version as shown: ``v3``, or ``absent`` where the resource did not exist (before a mutation that
    created it, after one that deleted it)."""
    return "absent" if version is None else f"v{version}"


def _mutation_line(w: _Writer, mutation: MutationEvent, indent: int) -> None:
    changes = ", ".join(
        f"{r} {version_text(mutation.versions_before.get(r))} → {version_text(mutation.versions_after.get(r))}"
        for r in mutation.resources
    )
    where = f"after call #{mutation.after_seq}" if mutation.after_seq is not None else f"before step {mutation.step}"
    outcome = "" if mutation.outcome is Outcome.EXECUTED else f" [{mutation.outcome.value}]"
    w.line(
        ("hidden mutation ", "mutation"),
        (f"{mutation.mutation_id} by {mutation.actor} ({where}, {mutation.trigger}): {changes}{outcome}", None),
        indent=indent,
    )


def _describe_indices(indices: Sequence[int], origin: Sequence[int]) -> str:
    """Canonical-history indices as ranges with their steps, e.g. ``[0] system prompt, [4-9] (steps 2-4)``."""
    parts = []
    rest = [i for i in indices if i >= 2]
    if 0 in indices:
        parts.append("[0] system prompt")
    if 1 in indices:
        parts.append("[1] instruction")
    runs: list[list[int]] = []
    for index in rest:
        if runs and index == runs[-1][-1] + 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    for run in runs:
        where = f"[{run[0]}]" if len(run) == 1 else f"[{run[0]}-{run[-1]}]"
        steps = sorted({origin[i] for i in run if i < len(origin)})
        label = "step" if len(steps) == 1 else "steps"
        parts.append(f"{where} ({label} {_steps(steps)})")
    return ", ".join(parts) or "nothing"


def _step(
    w: _Writer,
    record: EpisodeRecord,
    step: StepRecord,
    flags: dict[int, EventFlags],
    full: bool,
    previous_removed: set[int],
) -> None:
    history = record.trace.canonical_history()
    origin = record.trace.canonical_steps()
    context = step.context
    title = f"── step {step.step} "
    w.line((title + "─" * max(0, RULE_WIDTH - len(title)), "rule"))
    for mutation in step.evaluator.mutations_before_step:
        _mutation_line(w, mutation, 2)
    external = record.trace.external
    if external is not None:
        # the harness served tools over MCP: it never saw the agent's model requests
        w.line(
            ("context ", "label"),
            (
                f"unknown: external agent {external.agent} managed its own context (over MCP, {external.transport})",
                None,
            ),
        )
        _step_actions(w, record, step, flags, full)
        return
    removed = set(context.removed)
    kept = [i for i in range(context.canonical_message_count) if i not in removed]
    if not removed and not context.inserted:
        summary = f"{len(step.messages)} messages sent: the full history"
    else:
        summary = (
            f"{len(kept)} of {context.canonical_message_count} history messages sent, {len(removed)} removed, "
            f"{len(context.inserted)} inserted by the strategy"
        )
    w.line(
        ("context ", "label"),
        (summary, None),
        (f"  (sha256 {step.messages_sha256[:12]}, {step.harness_prompt_tokens} tokens)", "dim"),
    )
    if not full:
        w.line(("sent: ", "dim"), (_describe_indices(kept, origin), None), indent=2)
        if removed:
            w.line(("not sent: ", "removed"), (_describe_indices(sorted(removed), origin), None), indent=2)
    newly = sorted(removed - previous_removed) if not full else sorted(removed)
    if newly:
        w.line(("removed at this step:" if not full else "removed from the full history:", "removed"), indent=2)
        for index in newly:
            message = history[index] if index < len(history) else {}
            w.line(
                (
                    f"- [{index}] {message.get('role', '?')} (step {origin[index] if index < len(origin) else '?'}) ",
                    "removed",
                ),
                (message_summary(message, full), "dim"),
                indent=4,
            )
    inserted = set(context.inserted)
    if full:
        w.line(("sent:", "label"), indent=2)
    for index, message in enumerate(step.messages):
        role = message.get("role", "?")
        if index in inserted:
            w.line(
                (f"+ [{index}] {role}, written by the strategy (sent in place of removed history):", "inserted"),
                indent=4 if full else 2,
            )
            w.block(message_content(message) or "", "inserted", 8 if full else 6)
        elif not full:
            continue
        elif role == "system" and full:
            w.line((f"  [{index}] system:", None), indent=4)
            w.block(message_content(message) or "", "dim", 8)
        elif role == "system":
            first = (message_content(message) or "").strip().splitlines()[:1]
            w.line(
                (f"  [{index}] system ", None),
                (
                    f"{_preview(first[0] if first else '', False, 80)} ({len(message_content(message) or '')} chars)",
                    "dim",
                ),
                indent=4,
            )
        else:
            w.line((f"  [{index}] {role} ", None), (message_summary(message, full), "dim"), indent=4)
    for summary_call in step.context.summary_calls:
        usage = summary_call.usage
        tokens = f", {usage.prompt_tokens}+{usage.completion_tokens} tokens" if usage else ""
        w.line(
            ("summary call ", "inserted"),
            (
                f"folded steps {_steps(summary_call.new_steps)} into the summary (now covers "
                f"{_steps(summary_call.covers_steps)}; model {summary_call.model or 'default'}{tokens})",
                "dim",
            ),
            indent=2,
        )
    _step_actions(w, record, step, flags, full)


def _step_actions(
    w: _Writer, record: EpisodeRecord, step: StepRecord, flags: dict[int, EventFlags], full: bool
) -> None:
    """What the model answered at ``step``, each call with its event and result, and what changed behind it."""
    response = step.response
    who = "agent " if record.trace.external is not None else "model "
    if response is None:
        w.line((who, "label"), (f"no response: {step.error or 'unknown error'}", "bad"))
        if step.failed_call is not None:
            w.line((failed_call_text(step.failed_call), "dim"), indent=2)
    else:
        usage = response.usage
        meta = f"  ({response.latency_s:.3f}s"
        meta += f", {usage.prompt_tokens}+{usage.completion_tokens} tokens)" if usage else ", usage not reported)"
        if response.tool_calls:
            names = ", ".join(c.name for c in response.tool_calls)
            w.line((who, "label"), (f"calls {names}", "call"), (meta, "dim"))
            if response.content:
                w.line(("says: ", "dim"), (_preview(response.content, full), None), indent=2)
        else:
            w.line((who, "label"), ("answers: ", None), (_preview(response.content, full), None), (meta, "dim"))
    if step.note:
        w.line(("note: ", "dim"), (step.note, "dim"), indent=2)
    elif response is not None and response.finish_reason in CUT_SHORT_REASONS:  # recorded before steps noted it
        cut = f"reply {CUT_SHORT_REASONS[response.finish_reason]} (finish_reason {response.finish_reason!r})"
        w.line(("note: ", "dim"), (cut, "dim"), indent=2)
    for call, event in zip(step.tool_calls, step.evaluator.tool_events, strict=False):
        kind = event.kind.value if event.kind else "unknown tool"
        style = "write" if event.kind is ToolKind.WRITE else "call"
        words = _flag_words(event, flags.get(event.seq))
        w.line(
            (f"→ #{event.seq} {call.name} ", style),
            (_preview(call.arguments, full, 200), None),
            indent=2,
        )
        details = f"{kind} {event.resource or '-'} · {event.outcome.value}"
        versions = _versions(event)
        if versions:
            details += f" · {versions}"
        if event.error_code:
            details += f" · {event.error_code}"
        w.line((details, "dim"), *([("  " + " ".join(words), "bad")] if words else []), indent=6)
        w.line(("← ", "dim"), (_preview(call.result, full, 240), None), indent=6)
    for mutation in step.evaluator.mutations_after_calls:
        _mutation_line(w, mutation, 2)
    if step.error and response is not None:
        w.line(("error: ", "bad"), (step.error, None), indent=2)


def render_episode(record: EpisodeRecord, *, full: bool = False, superseded: bool = False) -> Text:
    """The replay of one episode (see the module docstring); ``full`` shows every text untruncated; ``superseded``:
    the record is an earlier attempt a ``--retry-failed`` re-run replaced (said so, as it counts nowhere)."""
    w = _Writer()
    trace, verdict = record.trace, record.verdict
    header = f"═══ episode {record.run_id} "
    w.line((header + "═" * max(0, RULE_WIDTH - len(header)), "title"))
    w.line(
        ("task ", "label"),
        (f"{record.task_id} v{record.task_version} · world {record.world} · hazard {record.hazard}", None),
    )
    w.line(
        ("condition ", "label"),
        (
            f"strategy {record.strategy} · mode {record.protection_mode} · repeat {record.repeat} · "
            f"model {trace.model} · run group {record.run_group_id}"
            + (f" · attempt {record.attempt}" if record.attempt > 1 or superseded else ""),
            None,
        ),
    )
    if superseded:
        w.line(("superseded: ", "bad"), ("a later attempt of this episode replaced it; it is counted nowhere", None))
    failed = [] if record.failed else [g.value for g in GraderName if verdict.grader(g) is False]
    outcome = ("SUCCESS", "ok") if verdict.success and not record.failed else ("FAIL", "bad")
    w.line(
        ("result ", "label"),
        outcome,
        (
            f" · termination {trace.termination.value} · {plural(trace.step_count, 'step')}"
            + (f" · failed graders: {', '.join(failed)}" if failed else "")
            + (" · failed trial: no verdict" if record.failed else ""),
            None,
        ),
    )
    for detail in () if record.failed else verdict.details_for():  # a failed trial has no verdict to explain
        w.line(("why: ", "dim"), (describe(detail), None), indent=2)
    if trace.error:
        w.line(("error: ", "bad"), (trace.error, None), indent=2)
    flags = {f.seq: f for f in verdict.event_flags}
    previous_removed: set[int] = set()
    for step in trace.steps:
        _step(w, record, step, flags, full, previous_removed)
        previous_removed = set(step.context.removed)
    w.line(("── end ", "rule"), ("─" * (RULE_WIDTH - 7), "rule"))
    if trace.final_answer is not None:
        last = trace.steps[-1].response if trace.steps else None
        finish = last.finish_reason if last is not None else None
        cut = (
            [(f"  ({CUT_SHORT_REASONS[finish]}, finish_reason {finish!r})", "bad")]
            if finish in CUT_SHORT_REASONS
            else []
        )
        w.line(("final answer: ", "label"), (_preview(trace.final_answer, full, 400), None), *cut)
    w.line(("termination: ", "label"), (trace.termination.value, None))
    return w.text


def render_episodes(records: Iterable[EpisodeRecord], *, full: bool = False) -> Text:
    """Several episodes one after the other, separated by a blank line."""
    text = Text()
    for number, record in enumerate(records):
        if number:
            text.append("\n")
        text.append_text(render_episode(record, full=full))
    return text


class EpisodeNotFound(LookupError):
    """``--run`` names no episode of the run group (the message lists what exists)."""


def select_episodes(records: Sequence[EpisodeRecord], run: str | None) -> list[EpisodeRecord]:
    """Every episode, or the one whose run id is ``run`` (or the only one starting with it)."""
    ordered = sorted(records, key=lambda r: r.run_id)
    if run is None:
        return ordered
    if not run.strip():  # every run id starts with "": a one-episode run group would be "found"
        raise EpisodeNotFound(f"--run {run!r} names no episode: give an episode's run id or a prefix of it")
    exact = [r for r in ordered if r.run_id == run]
    if exact:
        return exact
    prefixed = [r for r in ordered if r.run_id.startswith(run)]
    if len(prefixed) == 1:
        return prefixed
    known = ", ".join(r.run_id for r in (prefixed or ordered)[:12])
    what = "matches several episodes" if prefixed else "matches no episode"
    raise EpisodeNotFound(f"--run {run!r} {what}; e.g. {known}")
