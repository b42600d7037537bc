"""Text of ``contextdelta attribute``: each failed episode's failure mode and cause chain.

The classification itself is :func:`contextdelta.attribution.attribute_episode`, the classifier the failure
atlas uses; this module only lays its answer out for a terminal.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from rich.text import Text

from contextdelta._words import plural
from contextdelta.attribution import MODE_PRECEDENCE, ActionRef, Attribution, ObservationRef, attribute_episode
from contextdelta.replay._render import printable, version_text
from contextdelta.rundir import EpisodeRecord

RULE_WIDTH = 100


def _action(action: ActionRef) -> str:
    flags = f"; {', '.join(action.flags)}" if action.flags else ""
    versions = []
    if action.expected_version is not None:
        versions.append(f"expected v{action.expected_version}")
    if action.version_at_execution is not None:
        versions.append(f"at execution v{action.version_at_execution}")
    version_text = f", {', '.join(versions)}" if versions else ""
    return (
        f"step {action.step} call #{action.seq} {action.tool} on {action.resource or '-'} "
        f"({action.outcome}{version_text}{flags})"
    )


def _observation(observation: ObservationRef) -> str:
    where = (
        f"step {observation.step}, call #{observation.seq} {observation.tool}"
        if observation.seq is not None
        else ("an unmatched claim")
    )
    return f"{observation.resource} version {observation.version} ({where}, {observation.kind}, via {observation.via})"


def _yes(value: bool | None) -> str:
    return "n/a" if value is None else ("yes" if value else "no")


def render_attribution(attribution: Attribution) -> Text:
    """One failed episode: mode, decisive action, the observation it relied on, the mutation, the chain. Values
    from the run directory (an endpoint's error, a model's tool arguments) go through `printable`."""
    text = Text()
    title = f"── {printable(attribution.run_id)} "
    text.append(title + "─" * max(0, RULE_WIDTH - len(title)) + "\n", style="cyan")

    def line(label: str, value: str, style: str | None = None) -> None:
        text.append(f"{label:<22}", style="bold cyan")
        text.append(printable(value) + "\n", style=style)

    line("failure mode", attribution.mode.value, "bold red")
    line(
        "condition",
        f"task {attribution.task_id} · hazard {attribution.hazard} · strategy {attribution.strategy} · "
        f"mode {attribution.protection_mode} · repeat {attribution.repeat} · termination {attribution.termination}",
    )
    if attribution.failed_trial:
        line("verdict", "none: a failed trial (its graders' findings on the partial trajectory are not counted)")
    elif attribution.failed_graders:
        line("failed graders", ", ".join(attribution.failed_graders))
    if attribution.action is not None:
        line("decisive action", _action(attribution.action), "yellow")
    if attribution.relied_on is not None:
        line("relied on", _observation(attribution.relied_on))
    if attribution.latest_observation is not None:
        line("latest observation", _observation(attribution.latest_observation))
    if attribution.mutation is not None:
        m = attribution.mutation
        where = f"after call #{m.after_seq}" if m.after_seq is not None else f"before step {m.step}"
        line(
            "made stale by",
            f"hidden mutation {m.mutation_id} by {m.actor} ({where}): {m.resource} "
            f"{version_text(m.version_before)} → {version_text(m.version_after)}",
            "magenta",
        )
    if attribution.own_write is not None:
        line("own write", _action(attribution.own_write))
    if attribution.action is not None:
        line(
            "strategy removed",
            f"fresher observation: {_yes(attribution.fresher_observation_dropped)} · own write: "
            f"{_yes(attribution.own_write_dropped)} · summary contradicted it: "
            f"{_yes(attribution.summary_contradicted)}",
        )
        line(
            "change visible",
            f"ever: {_yes(attribution.change_ever_visible)} · at the action: "
            f"{_yes(attribution.change_visible_at_action)}",
        )
    if attribution.context is not None:
        c = attribution.context
        line(
            "context at action",
            f"step {c.step}: {c.sent_messages} messages sent of {c.canonical_messages} in the "
            f"history; removed steps {', '.join(map(str, c.removed_steps)) or 'none'}; "
            f"inserted {', '.join(map(str, c.inserted)) or 'none'}"
            + (f"; summary/digest stated v{c.summary_claim_version}" if c.summary_claim_version is not None else ""),
        )
    if attribution.chain:
        text.append("cause chain\n", style="bold cyan")
        for number, link in enumerate(attribution.chain, 1):
            text.append(f"  {number}. {printable(link)}\n")
    text.append(f"{'in short':<22}", style="bold cyan")
    text.append(printable(attribution.explanation) + "\n")
    return text


def attribute_records(records: Sequence[EpisodeRecord]) -> list[Attribution]:
    """The attribution of every failed episode, in run-id order (successes have none)."""
    found = (attribute_episode(r) for r in sorted(records, key=lambda r: r.run_id))
    return [a for a in found if a is not None]


def render_attribution_report(records: Sequence[EpisodeRecord]) -> Text:
    """Every failed episode's attribution, then the count per failure mode."""
    attributions = attribute_records(records)
    text = Text()
    for attribution in attributions:
        text.append_text(render_attribution(attribution))
        text.append("\n")
    counts = Counter(a.mode for a in attributions)
    successes = len(records) - len(attributions)
    controls = sum(r.control is not None for r in records)
    among = (
        f" ({plural(controls, 'control episode')} among them, which failure_atlas.md leaves out)" if controls else ""
    )
    text.append(
        f"{plural(len(records), 'episode')}{among}: {successes} without a failure, {len(attributions)} failed\n",
        style="bold",
    )
    for mode in MODE_PRECEDENCE:
        if counts[mode]:
            text.append(f"  {mode.value:<36}{counts[mode]}\n")
    return text


def attributions_json(records: Sequence[EpisodeRecord]) -> list[dict[str, Any]]:
    """Every failed episode's attribution as JSON values (``attribute --format json``)."""
    return [a.model_dump(mode="json") for a in attribute_records(records)]
