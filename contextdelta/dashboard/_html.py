"""HTML fragments of the Episode page's timeline (pure string building; every text is escaped, control characters
included).

Inline styles only, so the fragments look the same wherever ``st.html`` puts them. Colours: removed history in
red and struck through, strategy-written messages in violet, hidden mutations in amber, flagged writes in red.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

from contextdelta._words import plural
from contextdelta.dashboard._text import visible
from contextdelta.dashboard.timeline import CallView, MessageView, MutationView, StepView, TimelineItem

_BOX = (
    "font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; line-height: 1.35; "
    "overflow-wrap: anywhere;"
)
_MESSAGE = {
    "pinned": "border-left: 3px solid #9aa5b1; background: #f4f6f8; color: #1f2933;",
    "kept": "border-left: 3px solid #3e7cb1; background: #f5f9fc; color: #1f2933;",
    "removed": "border-left: 3px solid #c62828; background: #fdecea; color: #8e1b1b; text-decoration: line-through;",
    "inserted": "border-left: 3px solid #7b3fe4; background: #f1eafd; color: #3b1a78;",
}
_TAG = {
    "pinned": ("pinned", "#52606d"),
    "kept": ("sent", "#2b5f8a"),
    "removed": ("removed", "#c62828"),
    "inserted": ("written by the strategy", "#7b3fe4"),
}
_MUTATION = (
    "border-left: 4px solid #d69e00; background: #fff6da; color: #5c4300; padding: 6px 10px; margin: 6px 0; "
    "border-radius: 3px;"
)
_CELL = "padding: 3px 6px; border-bottom: 1px solid #e4e7eb; vertical-align: top; text-align: left;"
_COLUMNS = "<colgroup>" + "".join(f'<col style="width: {w}%;">' for w in (4, 34, 6, 20, 13, 8, 15)) + "</colgroup>"


def _escape(text: str) -> str:
    """Text as HTML: tags escaped, and control characters and bidirectional overrides (which a model or a file may
    write) shown as escapes rather than passed to the page."""
    return escape(visible(text))


_BAD = "color: #b00020; font-weight: 600;"
_OK = "color: #1b7f3b; font-weight: 600;"


def _badge(text: str, colour: str) -> str:
    return (
        f'<span style="background: {colour}; color: #fff; border-radius: 3px; padding: 0 5px; font-size: 11px; '
        f'margin-right: 4px;">{_escape(text)}</span>'
    )


def message(view: MessageView, *, column: str) -> str:
    """One message as a collapsible line: tag, index, role, origin step and a preview; the full text inside."""
    tag, colour = _TAG[view.status]
    where = f"[{view.index}]"
    if column == "sent" and view.history_index is not None and view.history_index != view.index:
        where += f" = history [{view.history_index}]"
    origin = f" · step {view.origin_step}" if view.origin_step else ""
    style = _MESSAGE[view.status]
    return (
        f'<details style="{style} padding: 2px 6px; margin: 2px 0;" data-status="{view.status}">'
        f'<summary style="cursor: pointer; white-space: nowrap; overflow: hidden; text-overflow: ellipsis;">'
        f"{_badge(tag, colour)}<b>{_escape(where)} {_escape(view.role)}</b>"
        f"{_escape(origin)}: {_escape(view.summary)}</summary>"
        f'<div style="white-space: pre-wrap; word-break: break-word; padding: 4px 0;">{_escape(view.text)}</div>'
        "</details>"
    )


def messages(views: Iterable[MessageView], *, column: str) -> str:
    """A column of messages."""
    return f'<div style="{_BOX}">' + "".join(message(v, column=column) for v in views) + "</div>"


def mutation(view: MutationView) -> str:
    """A hidden mutation banner."""
    return (
        f'<div style="{_BOX} {_MUTATION}" data-mutation="{_escape(view.mutation_id)}">'
        f"<b>hidden mutation</b> (not shown to the agent) {_escape(view.text)}</div>"
    )


def reply(text: str, limit: int = 400) -> str:
    """The model's reply at a step (tool calls or final answer), shortened to ``limit`` characters."""
    shown = text if len(text) <= limit else text[:limit] + f"… (+{len(text) - limit} chars)"
    return f'<div style="{_BOX} padding: 4px 0;"><b>model</b> {_escape(shown)}</div>'


def _version(value: int | None) -> str:
    return "never seen" if value is None else f"v{value}"


def _call_row(call: CallView) -> str:
    flags = " ".join(_badge(f, "#b00020") for f in call.flags)
    kind = call.kind or "unknown"
    if call.is_write:
        seen = _version(call.observed_version) + (f" (#{call.observed_seq})" if call.observed_seq is not None else "")
        current = _version(call.version_at_execution)
        versions = f'<span style="{_BAD if call.behind else _OK}">{_escape(seen)} vs {_escape(current)}</span>'
        expected = "-" if call.expected_version is None else f"v{call.expected_version}"
    else:
        versions = _escape(_version(call.version_at_execution)) if call.version_at_execution is not None else "-"
        expected = "-"
    weight = "font-weight: 600;" if call.is_write else ""
    return (
        f'<tr data-seq="{call.seq}">'
        f'<td style="{_CELL}">#{call.seq}</td>'
        f'<td style="{_CELL} {weight}">{_escape(call.tool)}<br><span style="color: #52606d;">'
        f"{_escape(call.arguments)}</span></td>"
        f'<td style="{_CELL}">{_escape(kind)}</td>'
        f'<td style="{_CELL}">{_escape(call.resource or "-")}</td>'
        f'<td style="{_CELL}">{versions}</td>'
        f'<td style="{_CELL}">{_escape(expected)}</td>'
        f'<td style="{_CELL}">{_escape(call.outcome)}'
        + (f" ({_escape(call.error_code)})" if call.error_code else "")
        + f" {flags}</td></tr>"
        f'<tr><td style="{_CELL}"></td><td colspan="6" style="{_CELL} color: #323f4b;">'
        f'<details><summary style="cursor: pointer;">result</summary>'
        f'<div style="white-space: pre-wrap; word-break: break-word;">{_escape(call.result)}</div></details></td></tr>'
    )


def items(entries: Iterable[TimelineItem]) -> str:
    """The step's tool calls with their versions and results, hidden mutations interleaved where they fired."""
    head = "".join(
        f'<th style="{_CELL}">{h}</th>'
        for h in ("#", "tool call", "kind", "resource", "agent saw vs current", "expected", "outcome")
    )
    rows = []
    for entry in entries:
        if entry.call is not None:
            rows.append(_call_row(entry.call))
        elif entry.mutation is not None:
            rows.append(f'<tr><td colspan="7" style="padding: 0;">{mutation(entry.mutation)}</td></tr>')
    if not rows:
        return f'<div style="{_BOX} color: #52606d;">no tool call</div>'
    return (
        f'<table style="{_BOX} border-collapse: collapse; width: 100%; table-layout: fixed;">{_COLUMNS}'
        f"<thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def step_title(step: StepView) -> str:
    """The expander label of a step (plain text)."""
    parts = [f"Step {step.step}"]
    if not step.context_known:
        parts.append("context unknown (external agent)")
    elif step.removed or step.inserted:
        parts.append(f"{step.removed} removed, {step.inserted} inserted")
    else:
        parts.append("full history sent")
    if step.mutations:
        parts.append(plural(len(step.mutations), "hidden mutation"))
    writes = [c for c in step.calls if c.is_write]
    if writes:
        parts.append(plural(len(writes), "write"))
    flagged = sorted({f for c in step.calls for f in c.flags})
    if flagged:
        parts.append(", ".join(flagged).upper())
    if step.decisive:
        parts.append("DECISIVE ACTION")
    return " · ".join(parts)


def legend() -> str:
    """What the colours mean."""
    return (
        f'<div style="{_BOX}">'
        + "".join(_badge(tag, colour) for tag, colour in _TAG.values())
        + _badge("hidden mutation", "#d69e00")
        + _badge("stale / duplicate / prohibited / blocked", "#b00020")
        + ' <span style="color: #52606d;">"agent saw vs current": at each write, the version the agent last observed '
        "vs the version when the write ran (red when the agent was behind).</span></div>"
    )
