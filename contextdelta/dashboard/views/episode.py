"""Episode: the timeline of one episode (and, for a failed trial re-run by ``--retry-failed``, its attempts: any of
them can be shown). Per step, the context the model saw next to the full history (what the
strategy removed or wrote marked), the tool calls and results with the versions at every write, and the hidden
mutations where they happened; the verdict and, for a failure, its cause chain on top."""

from __future__ import annotations

import streamlit as st

from contextdelta.dashboard import _html, _ui
from contextdelta.dashboard._text import code, visible
from contextdelta.dashboard.data import RunLoadError
from contextdelta.dashboard.timeline import episode_timeline

st.title("Episode")
folder, runs = _ui.runs_or_stop()
run = _ui.run_data_or_stop(_ui.select_run(folder, runs))
if not run.episodes:
    st.info(f"Run {code(run.run_group_id)} has no finished episode yet.")
    st.stop()
summary = _ui.select_episode(run.episodes)
attempt: int | None = None
if summary.attempts > 1:
    # a failed trial re-run by --retry-failed: every attempt is in raw_runs.jsonl, the latest is the one counted
    try:
        attempts = _ui.cached_attempts(run.path, summary.run_id)
    except RunLoadError as exc:
        _ui.malformed(run.name, str(exc))
    st.markdown(
        f"**Attempts** ({len(attempts)}): the latest is the episode's record; the earlier ones are failed trials it "
        "superseded (`--retry-failed`), kept as evidence and counted nowhere."
    )
    st.dataframe([a.row() for a in attempts], hide_index=True)
    numbers = [a.attempt for a in attempts]
    attempt = st.selectbox(
        "Show attempt",
        numbers,
        index=len(numbers) - 1,
        format_func=lambda n: f"attempt {n}" + (" (current)" if n == numbers[-1] else " (superseded)"),
        key="cd_attempt",
    )
try:
    record = _ui.cached_episode(run.path, summary.run_id, attempt)
except RunLoadError as exc:
    _ui.malformed(run.name, str(exc))
superseded = record.attempt < summary.attempts
attribution = None if superseded else run.attributions.get(summary.run_id)
timeline = episode_timeline(record, attribution)
if superseded:
    st.warning(
        f"Attempt {record.attempt} of {summary.attempts}: superseded by a later attempt; shown as evidence, counted "
        "nowhere."
    )

st.caption(
    f"Episode {code(timeline.run_id)} of run group {code(timeline.run_group_id)} · task {code(timeline.task)} · "
    f"world {code(timeline.world)} · hazard {code(timeline.hazard)} · strategy {code(timeline.strategy)} · mode "
    f"{code(timeline.protection_mode)} · repeat {timeline.repeat} · model {code(timeline.model)}"
)
if timeline.control:
    st.info(
        f"A control episode ({code(timeline.control)}, `--controls`): the task run again with its hidden mutations "
        "off. Counted apart from the main matrix, in the report's control section."
    )
outcome, steps_col, mutations_col, termination_col = st.columns(4)
outcome.metric("outcome", "success" if timeline.success else ("failed trial" if timeline.failed_trial else "FAIL"))
steps_col.metric("steps", len(timeline.steps))
mutations_col.metric("hidden mutations", len(timeline.mutations))
termination_col.metric("termination", timeline.termination)

st.markdown("**Verdict**")
st.dataframe(
    [
        {
            name: "no verdict" if timeline.failed_trial else "N/A" if passed is None else "pass" if passed else "FAIL"
            for name, passed in timeline.graders
        }
    ],
    hide_index=True,
)
if timeline.details:
    st.dataframe(
        [
            {
                "grader": d.grader,
                "call": d.call,
                "resource": d.resource,
                "expected": d.expected,
                "actual": d.actual,
                "versions": d.versions,
                "why": d.related,
            }
            for d in timeline.details
        ],
        hide_index=True,
    )
attribution = timeline.attribution
if attribution is not None:
    chain = "\n".join(f"{n}. {code(link)}" for n, link in enumerate(attribution.chain, 1))
    st.error(f"**Failure mode `{attribution.mode.value}`**: {code(attribution.explanation)}\n\n{chain}")
if timeline.error:
    st.warning(f"Episode error: {code(timeline.error)}")

st.subheader("Timeline")
st.html(_html.legend())
expand_all = st.toggle("Expand every step", value=False, key="cd_expand_all")
for step in timeline.steps:
    wanted = expand_all or step.decisive or bool(step.mutations) or step.flagged
    with st.expander(_html.step_title(step), expanded=wanted):
        for mutation in step.mutations_before:
            st.html(_html.mutation(mutation))
        sent, history = st.columns(2)
        with sent:
            if step.context_known:
                st.markdown(f"**Context sent** ({len(step.sent)} messages, {step.prompt_tokens} tokens)")
                st.html(_html.messages(step.sent, column="sent"))
            else:
                st.markdown("**Context sent**: unknown")
                st.caption(
                    "An external agent manages its own context: what its model saw is not recorded, only its tool "
                    "calls and the results it got (right)."
                )
        with history:
            if step.context_known:
                st.markdown(
                    f"**Full history** ({len(step.history)} messages; {step.removed} not sent"
                    + (f", {len(step.newly_removed)} newly removed" if step.newly_removed else "")
                    + ")"
                )
            else:
                st.markdown(
                    f"**Recorded history** ({len(step.history)} messages: the task, the tool calls and their results)"
                )
            st.html(_html.messages(step.history, column="history"))
        for line in step.summary_calls:
            st.caption(f"summary call: {code(line)}")
        if step.note:
            st.caption(f"note: {code(step.note)}")
        st.html(_html.reply(step.reply) + _html.items(step.items))
        if step.error:
            st.warning(f"step error: {code(step.error)}")
if timeline.final_answer is not None:
    st.markdown("**Final answer**")
    st.text(visible(timeline.final_answer))
