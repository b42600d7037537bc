"""A run directory as an inspect_ai evaluation log (``contextdelta export RUN_ID --format inspect``).

The log is inspect_ai's JSON log format (``EvalLog``, format version 2: what ``inspect eval --log-format json``
writes and ``inspect view`` and ``inspect_ai.log.read_eval_log`` read), built from plain dictionaries so that
inspect_ai is not a dependency of the package (the tests read the log back with it). The mapping:

- one sample per episode: ``id`` = the episode's condition (``task.strategy.mode``, plus the control), ``epoch`` =
  its repeat; ``input`` = the system prompt and the task instruction; ``target`` = the task's expected end state;
- the verdict as scores: ``success`` and each grader (1.0 pass, 0.0 fail; a grader that does not apply is left
  out), with the grader's reasons as the explanation and its structured details as metadata; a failed trial has
  no verdict and is scored on ``success`` alone (0);
- token usage: an episode's model_usage, and the header's sums, only where every call reported its usage
  (``usage_complete``; the header counts the others in ``usage_unreported_episodes``): unknown is never 0;
- metadata: strategy, protection mode, hazard, world, failure mode (the attribution), termination, cost, the
  episode's ids, and the harmful-action indicator, the graders' counts and the attempt (`EPISODE_COLUMNS`);
- ``messages``: the canonical (full) history; each step's model call is a ``model`` event whose ``input`` is the
  context sent at that step (after the strategy; messages the strategy wrote are marked in their metadata), each
  tool call a ``tool`` event, each hidden mutation an ``info`` event (evaluator-only data, labelled so);
- a failed trial carries its error (inspect shows it as an errored sample); an episode the step limit ended, a
  ``custom`` sample limit;
- an external agent's episode has no messages and no model events: its model's context is unknown, and the sample
  says so in its metadata (``context: unknown``) instead of inventing one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from contextdelta.agent import EpisodeTrace, StepRecord, TerminationReason
from contextdelta.attribution import Attribution, attribute_run
from contextdelta.canonical import canonical_json
from contextdelta.grading import GraderName, describe
from contextdelta.providers import Usage
from contextdelta.replay import message_content
from contextdelta.rundir import EpisodeRecord, RunManifest, RunStatus, task_result_values
from contextdelta.tasks import Task
from contextdelta.worlds import MutationEvent, ProtectionMode, get_world

LOG_FORMAT_VERSION = 2
"""inspect_ai's ``EvalLog.version`` this writer produces."""
TASK_NAME = "contextdelta"
GRADERS: tuple[str, ...] = tuple(g.value for g in GraderName)
"""The verdict's graders, in the order the scores list them (after ``success``)."""
EPISODE_COLUMNS = (
    "harmful_action",
    "stale_action_count",
    "duplicate_action_count",
    "prohibited_action_count",
    "blocked_write_count",
    "final_answer_facts_ok",
    "attempt",
)
"""``task_results.csv`` columns each sample's metadata carries besides its ids and condition: the harmful-action
indicator (the RQ3 outcome), the graders' counts, the final-answer check and the attempt (None for a failed
trial's verdict columns, as in the CSV)."""
STOP_REASONS = {"stop": "stop", "tool_calls": "tool_calls", "length": "max_tokens", "content_filter": "content_filter"}
"""OpenAI finish reasons -> inspect_ai stop reasons (anything else: ``unknown``)."""


def _utc(stamp: str | None) -> str | None:
    """Our ``...Z`` timestamps in the ISO form inspect_ai writes (``+00:00``)."""
    return None if stamp is None else stamp.replace("Z", "+00:00")


def _arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """Tool-call arguments as an object, or ``{}`` and the parse error for text that is not a JSON object."""
    try:
        value = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        return {}, f"arguments are not valid JSON: {exc}"
    if not isinstance(value, dict):
        return {}, "arguments are not a JSON object"
    return value, None


def _tool_calls(message: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    calls = message.get("tool_calls")
    if not calls:
        return None
    out = []
    for call in calls:
        function = call.get("function") or {}
        arguments, error = _arguments(str(function.get("arguments") or ""))
        entry: dict[str, Any] = {
            "id": str(call.get("id") or ""),
            "function": str(function.get("name") or ""),
            "arguments": arguments,
            "type": "function",
        }
        if error is not None:
            entry["parse_error"] = error
        out.append(entry)
    return out


def chat_message(message: Mapping[str, Any], functions: Mapping[str, str], note: str | None = None) -> dict[str, Any]:
    """One OpenAI chat message as an inspect_ai ``ChatMessage``; ``functions`` maps tool-call ids to tool names (a
    tool message names its function); ``note`` goes into the message's metadata."""
    role = str(message.get("role") or "user")
    content = message_content(dict(message)) or ""
    out: dict[str, Any] = {"role": role, "content": content}
    if role == "assistant":
        out["tool_calls"] = _tool_calls(message)
    elif role == "tool":
        call_id = str(message.get("tool_call_id") or "")
        out["tool_call_id"] = call_id
        out["function"] = functions.get(call_id)
    elif role not in ("system", "user"):
        out = {"role": "user", "content": content, "metadata": {"original_role": role}}
    if note is not None:
        out["metadata"] = {**(out.get("metadata") or {}), "contextdelta": note}
    return out


def _functions(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    found: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            found[str(call.get("id") or "")] = str((call.get("function") or {}).get("name") or "")
    return found


def _usage(usage: Usage | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    return {
        "input_tokens": usage.prompt_tokens,
        "output_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "input_tokens_cache_read": usage.cached_tokens,
        "input_tokens_cache_write": usage.cache_write_tokens,
    }


def _tool_infos(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI tool schemas as inspect_ai ``ToolInfo`` (name, description, parameters)."""
    out = []
    for tool in tools:
        function = tool.get("function") or {}
        out.append(
            {
                "name": function.get("name"),
                "description": function.get("description") or "",
                "parameters": function.get("parameters") or {"type": "object", "properties": {}},
            }
        )
    return out


def _event(kind: str, timestamp: str | None, working_start: float, **fields: Any) -> dict[str, Any]:
    return {"event": kind, "timestamp": timestamp, "working_start": working_start, **fields}


def _mutation_event(m: MutationEvent, timestamp: str | None, working_start: float) -> dict[str, Any]:
    return _event(
        "info",
        timestamp,
        working_start,
        source="contextdelta: hidden mutation (evaluator only, never shown to the agent)",
        data=m.model_dump(mode="json"),
    )


def _model_event(
    step: StepRecord, trace: EpisodeTrace, tools: list[dict[str, Any]], timestamp: str | None, start: float
) -> dict[str, Any]:
    functions = _functions(step.messages)
    inserted = set(step.context.inserted)
    note = f"written by the context strategy {trace.strategy.name}"
    response = step.response
    assistant: dict[str, Any] = {"role": "assistant", "content": "", "tool_calls": None}
    output: dict[str, Any] = {"model": trace.model, "choices": []}
    if response is not None:
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in response.tool_calls
        ]
        assistant = chat_message({"role": "assistant", "content": response.content, "tool_calls": calls}, functions) | {
            "model": response.model
        }
        output = {
            "model": response.model or trace.model,
            "choices": [
                {"message": assistant, "stop_reason": STOP_REASONS.get(response.finish_reason or "", "unknown")}
            ],
            "completion": response.content or "",
            "usage": _usage(response.usage),
            "time": response.latency_s,
        }
    return _event(
        "model",
        timestamp,
        start,
        model=trace.model,
        input=[chat_message(m, functions, note if i in inserted else None) for i, m in enumerate(step.messages)],
        tools=tools,
        tool_choice="auto",
        config={},
        output=output,
        retries=response.retries if response is not None else None,
        error=step.error,
        metadata={
            "step": step.step,
            "messages_sha256": step.messages_sha256,
            "harness_prompt_tokens": step.harness_prompt_tokens,
            "history_messages": step.context.canonical_message_count,
            "removed": step.context.removed,
            "inserted": step.context.inserted,
        },
    )


def _summary_events(step: StepRecord, timestamp: str | None, start: float) -> list[dict[str, Any]]:
    events = []
    for call in step.context.summary_calls:
        functions = _functions(call.messages)
        output = {
            "model": call.response_model or call.model or "",
            "choices": [{"message": {"role": "assistant", "content": call.content}, "stop_reason": "stop"}],
            "completion": call.content,
            "usage": _usage(call.usage),
            "time": call.latency_s,
        }
        events.append(
            _event(
                "model",
                timestamp,
                start,
                model=call.model or "",
                role="summary",
                input=[chat_message(m, functions) for m in call.messages],
                tools=[],
                tool_choice="none",
                config={},
                output=output,
                metadata={"step": step.step, "covers_steps": call.covers_steps, "prompt_version": call.prompt_version},
            )
        )
    return events


def _tool_events(record: EpisodeRecord, step: StepRecord, timestamp: str | None, start: float) -> list[dict[str, Any]]:
    flags = {f.seq: f for f in record.verdict.event_flags}
    out = []
    for i, call in enumerate(step.tool_calls):
        arguments, _ = _arguments(call.arguments)
        event = step.evaluator.tool_events[i] if i < len(step.evaluator.tool_events) else None
        flag = flags.get(event.seq) if event is not None else None
        metadata: dict[str, Any] = {"raw_arguments": call.arguments}
        if event is not None:
            metadata |= {
                "seq": event.seq,
                "kind": event.kind.value if event.kind else None,
                "resource": event.resource,
                "outcome": event.outcome.value,
                "error_code": event.error_code,
                "observed_version": event.observed_version,
                "version_at_execution": event.version_at_execution,
                "expected_version": event.expected_version,
                "stale": bool(flag and flag.stale),
                "duplicate": bool(flag and flag.duplicate),
                "prohibited": bool(flag and flag.prohibited),
            }
        out.append(
            _event(
                "tool",
                timestamp,
                start,
                type="function",
                id=call.call_id,
                function=call.name,
                arguments=arguments,
                result=call.result,
                metadata=metadata,
            )
        )
    return out


def _scores(record: EpisodeRecord) -> dict[str, dict[str, Any]]:
    v = record.verdict
    details: dict[str, list[Any]] = {}
    reasons: dict[str, list[str]] = {}
    for d in v.details or []:
        details.setdefault(d.grader.value, []).append(d.model_dump(mode="json"))
        reasons.setdefault(d.grader.value, []).append(describe(d))
    success = v.success and not record.failed
    scores: dict[str, dict[str, Any]] = {
        "success": {
            "value": 1.0 if success else 0.0,
            "explanation": (
                f"failed trial ({record.trace.termination.value}): no verdict counts"
                if record.failed
                else ("every grader passed" if success else "; ".join(t for ts in reasons.values() for t in ts))
            ),
            "metadata": {"failed_trial": record.failed},
        }
    }
    for grader in () if record.failed else GRADERS:  # a failed trial has no verdict: success alone, as 0
        passed = getattr(v, grader, None)
        if passed is None:
            continue  # not applicable (conflict_recovery without a blocked write)
        scores[grader] = {
            "value": 1.0 if passed else 0.0,
            "explanation": "; ".join(reasons.get(grader, [])) or ("pass" if passed else "fail"),
            "metadata": {"details": details.get(grader, [])},
        }
    return scores


def _condition_id(record: EpisodeRecord) -> str:
    parts = [record.task_id, record.strategy, record.protection_mode]
    if record.control:
        parts.append(record.control)
    return ".".join(parts)


def _target(task: Task | None) -> list[str] | str:
    if task is None:
        return ""
    return [f"{p.resource} {p.field} {p.op} {canonical_json(p.value)}" for p in task.evaluator.expected_end_state] or ""


def eval_sample(
    record: EpisodeRecord, attribution: Attribution | None, task: Task | None, summary_model: str
) -> dict[str, Any]:
    """One episode as an inspect_ai ``EvalSample``."""
    trace = record.trace
    external = trace.external is not None
    row = task_result_values(record)
    started, finished = _utc(record.started_at), _utc(record.finished_at)
    tools = _tool_infos(get_world(record.world).tool_schemas(ProtectionMode(record.protection_mode)))
    events: list[dict[str, Any]] = []
    elapsed = 0.0
    if external:
        events.append(
            _event(
                "info",
                started,
                0.0,
                source="contextdelta",
                data=f"external agent {trace.strategy.name}: its model's context is unknown; only its tool calls "
                "are recorded",
            )
        )
    for step in trace.steps:
        events += [_mutation_event(m, started, elapsed) for m in step.evaluator.mutations_before_step]
        events += _summary_events(step, started, elapsed)
        if not external:
            events.append(_model_event(step, trace, tools, started, elapsed))
        if step.response is not None:
            elapsed += step.response.latency_s
        events += _tool_events(record, step, started, elapsed)
        events += [_mutation_event(m, started, elapsed) for m in step.evaluator.mutations_after_calls]
    history = trace.canonical_history()
    functions = _functions(history)
    model_usage: dict[str, dict[str, Any]] = {}
    totals = trace.totals
    if not external and totals.usage_complete:  # a call that reported no usage: the totals are unknown, not 0
        model_usage[trace.model] = _usage(totals.agent_usage) or {}
        if totals.summary_calls:
            summary = (
                totals.summary_usage if summary_model != trace.model else totals.agent_usage + totals.summary_usage
            )
            model_usage[summary_model] = _usage(summary) or {}
    sample: dict[str, Any] = {
        "id": _condition_id(record),
        "epoch": record.repeat,
        "input": [chat_message(m, functions) for m in trace.initial_messages]
        if not external
        else trace.initial_messages[-1]["content"],
        "target": _target(task),
        "messages": [] if external else [chat_message(m, functions) for m in history],
        "output": {"model": trace.model, "choices": [], "completion": trace.final_answer or ""},
        "scores": _scores(record),
        "metadata": {
            "run_id": record.run_id,
            "run_group_id": record.run_group_id,
            "task_id": record.task_id,
            "task_version": record.task_version,
            "world": record.world,
            "hazard": record.hazard,
            "strategy": record.strategy,
            "protection_mode": record.protection_mode,
            "repeat": record.repeat,
            "control": record.control,
            "failure_mode": attribution.mode.value if attribution is not None else None,
            "termination": trace.termination.value,
            "failed_trial": record.failed,
            "steps": trace.step_count,
            "cost_usd": record.cost_usd,
            "episode_seed": record.episode_seed,
            "context": "unknown" if external else "recorded",
            "usage_complete": None if external else totals.usage_complete,
            **{column: row[column] for column in EPISODE_COLUMNS},
        },
        "events": events,
        "model_usage": model_usage,
        "started_at": started,
        "completed_at": finished,
        "total_time": record.wall_s,
        "uuid": record.run_id,
    }
    if trace.termination is TerminationReason.MAX_STEPS:  # inspect_ai's sample limit: its viewer flags it
        reason = f"the step limit ({trace.max_steps}) ended the episode before a final answer"
        sample["limit"] = {"type": "custom", "limit": float(trace.max_steps), "reason": reason}
    if record.failed:
        message = trace.error or trace.termination.value
        sample["error"] = {"message": message, "traceback": trace.error_detail or "", "traceback_ansi": ""}
    return sample


def _score(name: str, values: Sequence[float], of: int, unit: str) -> dict[str, Any]:
    return {
        "name": name,
        "scorer": name,
        "scored_samples": len(values),
        "unscored_samples": of - len(values),
        "metrics": {"mean": {"name": "mean", "value": sum(values) / len(values)}},
        "metadata": {"unit": unit},
    }


def _results(samples: Sequence[Mapping[str, Any]], total: int) -> dict[str, Any]:
    """The log's headline scores: each grader's mean over the main matrix's samples (a control condition's episodes,
    e.g. no_mutation with the hidden mutations off, left out, as the report and the dashboard leave them out), then
    ``success[CONTROL]`` over each control's samples."""
    main = [s for s in samples if not s["metadata"].get("control")]
    controls = sorted({s["metadata"]["control"] for s in samples if s["metadata"].get("control")})
    unit = "share of the main matrix's episodes (the task-level statistics are in aggregate_metrics.json)"
    if controls:
        unit += f"; control episodes ({', '.join(controls)}) left out"
    scores = []
    for name in ("success", *GRADERS):
        values = [s["scores"][name]["value"] for s in main if name in s["scores"]]
        if values:
            scores.append(_score(name, values, len(main), unit))
    for control in controls:
        held = [s for s in samples if s["metadata"].get("control") == control]
        values = [s["scores"]["success"]["value"] for s in held]
        scores.append(_score(f"success[{control}]", values, len(held), f"share of the {control} control's episodes"))
    # inspect_ai's completed_samples: the samples that finished without an error (a failed trial is an errored
    # sample), as its own recompute_metrics counts them; total_samples is the plan
    completed = sum(1 for s in samples if "error" not in s)
    return {"total_samples": total, "completed_samples": completed, "scores": scores}


def eval_log(
    manifest: RunManifest,
    records: Sequence[EpisodeRecord],
    tasks: Mapping[str, Task] | None = None,
    attributions: Sequence[Attribution] | None = None,
    superseded: Sequence[EpisodeRecord] = (),
) -> dict[str, Any]:
    """The whole run as an inspect_ai ``EvalLog`` (a JSON value), samples in run id order; ``records`` are the
    episodes' current records, ``superseded`` their earlier attempts (``--retry-failed``), which each sample lists
    in its metadata (``superseded_attempts``: attempt, termination, error) and nothing counts."""
    ordered = sorted(records, key=lambda r: r.run_id)
    earlier: dict[str, list[dict[str, Any]]] = {}
    for old in sorted(superseded, key=lambda r: (r.run_id, r.attempt)):
        earlier.setdefault(old.run_id, []).append(
            {
                "attempt": old.attempt,
                "failed_trial": old.failed,
                "termination": old.trace.termination.value,
                "error": old.trace.error,
                "started_at": old.started_at,
            }
        )
    if attributions is None:
        attributions = attribute_run(ordered)
    by_run = {a.run_id: a for a in attributions}
    tasks = tasks or {}
    samples = [
        eval_sample(r, by_run.get(r.run_id), tasks.get(r.task_id), manifest.provider.summary_model) for r in ordered
    ]
    for sample, record in zip(samples, ordered, strict=True):
        sample["metadata"]["superseded_attempts"] = earlier.get(record.run_id, [])
    usage: dict[str, Usage] = {}
    unreported = sum(1 for r in ordered if r.trace.external is None and not r.trace.totals.usage_complete)
    for r in ordered:
        if r.trace.external is None and r.trace.totals.usage_complete:
            usage[r.trace.model] = usage.get(r.trace.model, Usage()) + r.trace.totals.agent_usage
            if r.trace.totals.summary_calls:
                name = manifest.provider.summary_model
                usage[name] = usage.get(name, Usage()) + r.trace.totals.summary_usage
    git = manifest.environment.git
    status = {RunStatus.COMPLETE: "success", RunStatus.RUNNING: "started"}.get(manifest.status, "cancelled")
    missing: dict[str, Any] = {}
    if manifest.status is RunStatus.COMPLETE and len(samples) < manifest.counts.planned:
        # a complete run whose directory holds fewer episodes than it finished: lost or cut after the run
        status = "error"
        message = (
            f"the run directory holds {len(samples)} of the {manifest.counts.planned} episodes its complete run "
            f"finished; `contextdelta verify {manifest.run_group_id}` names what changed"
        )
        missing = {"error": {"message": message, "traceback": "", "traceback_ansi": ""}}
    return {
        "version": LOG_FORMAT_VERSION,
        "status": status,
        **missing,
        "eval": {
            "eval_id": manifest.run_group_id,
            "run_id": manifest.run_group_id,
            "created": _utc(manifest.created_at),
            "task": TASK_NAME,
            "task_id": manifest.hashes.suite_sha256,
            "task_version": 0,
            "task_attribs": {},
            "task_args": {},
            "dataset": {  # inspect_ai's dataset: one sample per condition, run once per epoch (repeat)
                "name": "contextdelta tasks",
                "samples": len({s["id"] for s in samples}),
                "sample_ids": sorted({s["id"] for s in samples}),
                "shuffled": False,
            },
            "model": manifest.provider.model,
            "model_base_url": manifest.provider.base_url,
            "model_generate_config": {"temperature": manifest.provider.temperature},
            "config": {"epochs": manifest.repeats},
            "revision": (
                {"type": "git", "origin": "", "commit": git.commit, "dirty": git.dirty} if git.commit else None
            ),
            "packages": {"contextdelta": manifest.environment.contextdelta},
            # what a model, an endpoint or an edited file wrote is shown as plain text: inspect view otherwise
            # renders it as markdown (a remote image is fetched, a link is live), which the dashboard never does
            "viewer": {"trust_content": False},
            "metadata": {
                "run_group_id": manifest.run_group_id,
                "strategies": manifest.strategies,
                "protection_modes": manifest.protection_modes,
                "repeats": manifest.repeats,
                "seed": manifest.seed,
                "seed_rule": manifest.seed_rule.value,
                "suite_sha256": manifest.hashes.suite_sha256,
                "harness_sha256": manifest.hashes.harness_sha256,
                "system_prompt_sha256": manifest.hashes.system_prompt_sha256,
                "status": manifest.status.value,
                "stop_reason": manifest.stop_reason,
                "usage_unreported_episodes": unreported,
                "exported_from": "contextdelta run directory",
            },
        },
        "plan": {
            "name": "plan",
            "steps": [{"solver": "contextdelta_agent_loop", "params": {"strategies": manifest.strategies}}],
            "config": {"temperature": manifest.provider.temperature},
        },
        "results": _results(samples, manifest.counts.planned),
        "stats": {
            "started_at": _utc(manifest.created_at),
            "completed_at": _utc(manifest.finished_at) or "",
            "model_usage": {name: _usage(u) for name, u in sorted(usage.items())},
        },
        "samples": samples,
    }
