"""``failure_atlas.md``: failed episodes grouped by failure mode (SPEC section 9), with their cause chains."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from contextdelta.attribution import MODE_DESCRIPTIONS, MODE_PRECEDENCE, Attribution, ObservationRef
from contextdelta.report._format import fence, plural, table
from contextdelta.report._models import ConditionKey
from contextdelta.rundir import RunManifest


def _observation(o: ObservationRef | None) -> str:
    if o is None:
        return "none: no message sent at that step showed the resource"
    where = f"step {o.step}, call {o.seq} ({o.tool})" if o.step is not None else "a summary/digest claim"
    return f"{o.resource} version {o.version}, entered at {where}; kind {o.kind}; at the decisive step: {o.via.value}"


def render_episode(a: Attribution) -> list[str]:
    """One failed episode's entry in the atlas (Markdown lines)."""
    lines = [
        f"### {a.run_id}",
        "",
        f"- run group: `{a.run_group_id}`; task `{a.task_id}` ({a.hazard}); strategy `{a.strategy}`; "
        f"mode `{a.protection_mode}`; repeat {a.repeat}",
        f"- termination: {a.termination}"
        + (
            " (failed trial: no verdict)"
            if a.failed_trial
            else f"; failed graders: {', '.join(a.failed_graders) or 'none'}"
        ),
    ]
    if a.action is not None:
        x = a.action
        lines.append(
            f"- harmful/decisive action: step {x.step}, call {x.seq} `{x.tool}`"
            + (f" on `{x.resource}`" if x.resource else "")
            + f", {x.outcome}"
            + (f" at version {x.version_at_execution}" if x.version_at_execution is not None else "")
            + (f" (expected_version {x.expected_version})" if x.expected_version is not None else "")
            + (f"; counts as: {', '.join(x.flags)}" if x.flags else "")
        )
        lines.append(f"- relied-on observation: {_observation(a.relied_on)}")
        if a.latest_observation is not None and a.latest_observation != a.relied_on:
            lines.append(f"- freshest observation in the full history: {_observation(a.latest_observation)}")
        if a.mutation is not None:
            m = a.mutation
            where = f"after call {m.after_seq}" if m.after_seq is not None else f"before step {m.step}"
            lines.append(
                f"- hidden mutation that made it stale: `{m.mutation_id}` by {m.actor} (step {m.step}, {where}, "
                f"{m.trigger}): {m.resource} version {m.version_before} -> {m.version_after}"
            )
        else:
            lines.append("- hidden mutation that made it stale: none")
        if a.own_write is not None:
            w = a.own_write
            lines.append(f"- the agent's own write involved: step {w.step}, call {w.seq} `{w.tool}` ({w.outcome})")
        lines.append(
            f"- fresher observation dropped: {_yes(a.fresher_observation_dropped)}; own write dropped: "
            f"{_yes(a.own_write_dropped)}; summary contradicted: {_yes(a.summary_contradicted)}; change ever "
            f"visible: {_yes(a.change_ever_visible)}; visible at the action: {_yes(a.change_visible_at_action)}"
        )
    else:
        lines.append("- harmful/decisive action: none")
    lines.append("- cause chain:")
    lines.extend(f"  {i}. {step}" for i, step in enumerate(a.chain, start=1))
    if a.context is not None:
        lines += ["", f"Context the model saw at step {a.context.step}:", "", *fence(a.context.excerpt)]
    return [*lines, ""]


def _yes(value: bool | None) -> str:
    return "n/a" if value is None else ("yes" if value else "no")


def render_failure_atlas(
    manifest: RunManifest, finished: int, attributions: Sequence[Attribution], shard: str | None = None
) -> str:
    """The whole ``failure_atlas.md``; ``shard``: the report's shard warning, a banner under the title."""
    keys = [ConditionKey(strategy=s, protection_mode=m) for s in manifest.strategies for m in manifest.protection_modes]
    counts = Counter((a.mode, a.strategy, a.protection_mode) for a in attributions)
    lines = [
        f"# Failure atlas: {manifest.run_group_id}",
        "",
        *([f"**{shard[:1].upper()}{shard[1:]}**", ""] if shard else []),
        f"{plural(len(attributions), 'failed episode')} of {finished} finished"
        + (
            f" in the main matrix ({manifest.counts.planned} planned, control episodes included: they never enter "
            "the atlas; "
            if manifest.controls
            else f" ({manifest.counts.planned} planned; "
        )
        + f"run status {manifest.status.value}). Every failed episode has exactly one failure mode, decided in this "
        "order: "
        + ", ".join(f"`{m.value}`" for m in MODE_PRECEDENCE)
        + ". The decisive action is the first action (in call order) that counts against a grader and has a "
        "stale-state cause; see `contextdelta.attribution` for the rules.",
        "",
        "## Counts per strategy and protection mode",
        "",
    ]
    header = ["failure mode", *(f"{k.strategy} / {k.protection_mode}" for k in keys), "total"]
    rows = [
        [
            f"`{mode.value}`",
            *(counts[(mode, k.strategy, k.protection_mode)] for k in keys),
            sum(n for (m, _, _), n in counts.items() if m is mode),
        ]
        for mode in MODE_PRECEDENCE
    ]
    rows.append(
        [
            "all failures",
            *(sum(n for (_, s, p), n in counts.items() if (s, p) == (k.strategy, k.protection_mode)) for k in keys),
            len(attributions),
        ]
    )
    lines += table(header, rows)
    lines.append("")
    for mode in MODE_PRECEDENCE:
        mine = [a for a in attributions if a.mode is mode]
        lines += [f"## {mode.value} ({len(mine)})", "", MODE_DESCRIPTIONS[mode], ""]
        if not mine:
            lines += ["No episode.", ""]
            continue
        for a in mine:
            lines += render_episode(a)
    return "\n".join(lines).rstrip("\n") + "\n"
