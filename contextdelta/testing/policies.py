"""Deterministic scripted policies that answer chat-completions requests like a (very predictable) model.

The policies keep no state between requests: the agent's context strategy may drop old messages, so each
reply is derived from the request's messages alone.

Task recognition
    The task is the loaded task whose ``public.instruction`` text is contained in a ``user`` message (the
    longest such instruction wins). A request naming no loaded task is an :class:`UnknownTask` error.

Progress
    Every tool call a policy emits has the id ``call_<policy>_<step>_<phase>_<nonce>`` (see
    :class:`~contextdelta.testing.transcript.CallId`): ``step`` indexes the policy's trajectory. The last
    assistant message with tool calls in the request (every strategy keeps the last complete tool groups)
    tells the policy where it is; with none it starts at step 0. After the last step it answers with a final
    message (content, no tool calls) listing the writes visible in its context. One tool call per reply.

Versions
    Under the freshness contract (the offered schema of a write tool has an ``expected_version`` parameter)
    a write needs the version of its resource (key from ``ToolSpec.resource``). If no version of it is
    visible, the policy first reads it with the world's read tool for the kind (phase ``pre``). A write that
    comes back ``version_conflict`` is re-read (phase ``reread``) and retried with the fresh version (phase
    ``retry``), except by ``unsafe``, which moves on.

``oracle``
    Follows ``evaluator.reference_solution``. The version for a write is the one in the most recent tool
    result (tool messages only) that showed the resource.
``unsafe``
    Follows ``evaluator.unsafe_trajectory``. ``expected_version``: ``latest`` = as for the oracle; an integer is
    sent as given; ``{as_of_call: k}`` = the version shown in the result of the policy's own call for step
    ``k`` (found by call id; when that result was dropped from the context, ``latest`` applies). Never retries.
``context_trusting``
    Follows the reference solution but trusts whatever its context says. Versions come from ANY message (tool
    results, and JSON objects with ``resource`` and ``version`` inside any message text, e.g. a typed state
    digest, a summary, or a record quoted in the instruction), the most recent one winning. A read step whose
    target resource is already visible with a version is skipped (reads without a single target resource, e.g.
    list tools, always run), unless the context shows someone else changing that resource: two of its views
    with different versions and none of the policy's own successful writes to it between them. Then it
    re-reads, as a model that notices a record moving under it would; when the view that showed the change
    has left the context, it trusts the older view again. A write step is skipped when a successful write that is
    the same action is visible (the same tool and effect key, as ``no_duplicate_action`` counts it:
    ``worlds.action_key``; a reworded reason or title is the same action): a tool call with a non-error result, or
    a JSON object ``{"tool", "arguments", "outcome": "executed"}`` in a message text (the digest's and the scripted
    summary's write records). So its behaviour
    depends on the context strategy: with ``full_history`` it never refreshes (and acts on stale state when
    a hidden mutation happened after its read), while ``last_n`` drops old results and it reads again.

Summary requests
    A request whose system message contains ``ContextDelta summary prompt`` gets a deterministic extractive
    summary (:func:`extractive_summary`), whatever the policy.

Faults
    Fault injection may corrupt a reply's tool call (malformed arguments, an unknown tool name). Such a call
    gets phase ``fault`` and the policy issues the same step again on the next request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from contextdelta.canonical import canonical_json
from contextdelta.tasks import Task, TrajectoryCall, VersionFromCall, display_path
from contextdelta.testing.transcript import (
    CallId,
    Phase,
    ToolCallSeen,
    Transcript,
    error_code_of,
    nonce_of,
    text_of,
    version_in,
)
from contextdelta.validation import runnable_suite
from contextdelta.worlds import (
    WORLDS,
    ToolKind,
    ToolSpec,
    WorldDefinition,
    action_key,
    get_world,
    json_values_in,
    resource_key,
    write_records,
)

SUMMARY_MARKER = "ContextDelta summary prompt"
"""Agreed with the semantic_summary strategy: its summary requests' system message contains this line."""
SUMMARY_HEADER = "[scripted summary] Deterministic extractive summary from the scripted test server (not a model)."
VERSION_ARGUMENT = "expected_version"


class PolicyName(StrEnum):
    """The scripted server's policies."""

    ORACLE = "oracle"
    UNSAFE = "unsafe"
    CONTEXT_TRUSTING = "context_trusting"

    @property
    def model_name(self) -> str:
        """The model name the server reports for this policy, e.g. ``scripted-oracle``."""
        return f"scripted-{self.value}"


class UnknownTask(LookupError):
    """No loaded task's instruction appears in the request's user messages."""


@dataclass(frozen=True)
class ScriptedToolCall:
    """A tool call a policy emits; ``arguments`` is the raw JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ScriptedReply:
    """What a policy answers: text, or exactly one tool call."""

    content: str | None
    tool_calls: tuple[ScriptedToolCall, ...] = ()

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"


# ---- task catalog ----------------------------------------------------------------------------------------


def load_task_files(directory: str | Path) -> list[Task]:
    """Every task file under ``directory`` (``<world>/<id>.yaml``), validated, sorted by id.

    Loads and checks them exactly as ``run-benchmark --allow-unlocked`` does (one function,
    :func:`contextdelta.validation.runnable_suite`: every ``validate-tasks`` check, a missing or stale ``SUITE.lock``
    accepted, a damaged one not), so the server never serves a task a run would refuse; raises ValueError
    (``SuiteRefused``) listing every problem otherwise.
    """
    root = Path(directory)
    if not root.is_dir():
        what = "is not a folder" if root.exists() else "does not exist"
        raise FileNotFoundError(f"task directory {root} {what}: give the folder of task files with --tasks")
    loaded = runnable_suite(root, display_path(root), allow_unlocked=True).loaded
    return sorted((entry.task for entry in loaded), key=lambda t: t.id)


class TaskCatalog:
    """The tasks a server knows, recognised by their instruction text."""

    def __init__(self, tasks: Iterable[Task]) -> None:
        self.tasks = list(tasks)
        # longest instruction first, so an instruction contained in another one never shadows it
        self._by_instruction = sorted(
            ((t.public.instruction.strip(), t) for t in self.tasks), key=lambda pair: -len(pair[0])
        )

    @classmethod
    def from_dir(cls, directory: str | Path) -> TaskCatalog:
        """Load every task file under ``directory``."""
        return cls(load_task_files(directory))

    def __len__(self) -> int:
        return len(self.tasks)

    def recognise(self, transcript: Transcript) -> Task:
        """The task whose instruction is contained in a user message; raises UnknownTask otherwise."""
        texts = transcript.user_texts()
        for instruction, task in self._by_instruction:
            if any(instruction in text for text in texts):
                return task
        raise UnknownTask(f"no loaded task's instruction appears in the user messages ({len(self.tasks)} tasks loaded)")


# ---- policies --------------------------------------------------------------------------------------------


class ScriptedPolicy:
    """One policy over a task catalog; :meth:`respond` maps a request to a reply, statelessly."""

    def __init__(self, name: PolicyName | str, catalog: TaskCatalog) -> None:
        self.name = PolicyName(name)
        self.catalog = catalog

    @property
    def model_name(self) -> str:
        return self.name.model_name

    def respond(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
    ) -> ScriptedReply:
        """The reply to a chat-completions request with these messages and tools."""
        transcript = Transcript(messages)
        if is_summary_request(transcript):
            return ScriptedReply(content=extractive_summary(transcript))
        task = self.catalog.recognise(transcript)
        return _Episode(self.name, task, transcript, tools or []).reply()


def is_summary_request(transcript: Transcript) -> bool:
    """Whether the request is a semantic_summary call (marker in a system message)."""
    return any(SUMMARY_MARKER in text for text in transcript.system_texts())


@dataclass
class _Episode:
    policy: PolicyName
    task: Task
    transcript: Transcript
    tools: Sequence[Mapping[str, Any]]
    world: WorldDefinition = field(init=False)
    trajectory: list[TrajectoryCall] = field(init=False)

    def __post_init__(self) -> None:
        self.world = get_world(self.task.world)
        evaluator = self.task.evaluator
        self.trajectory = (
            evaluator.unsafe_trajectory if self.policy is PolicyName.UNSAFE else evaluator.reference_solution
        )

    # -- progress --

    def reply(self) -> ScriptedReply:
        last = self.transcript.last_own_call(self.policy.value)
        if last is None:
            return self._plan(0)
        call_id = last.call_id
        assert call_id is not None
        step, phase = call_id.step, call_id.phase
        if phase is Phase.FAULT or step >= len(self.trajectory):
            return self._plan(step)
        spec = self.world.tool(self.trajectory[step].tool)
        if phase is Phase.PRE:
            return self._write(step, Phase.MAIN, after_pre=True)
        if phase is Phase.REREAD:
            return self._write(step, Phase.RETRY, after_pre=True)
        conflicted = error_code_of(last.result) == "version_conflict"
        if spec is not None and spec.kind is ToolKind.WRITE and conflicted and self.policy is not PolicyName.UNSAFE:
            return self._read_for(step, Phase.REREAD)
        return self._plan(step + 1)

    def _plan(self, step: int) -> ScriptedReply:
        while step < len(self.trajectory):
            call = self.trajectory[step]
            spec = self.world.tool(call.tool)
            if spec is None:  # a trajectory may call something unknown on purpose: pass it through
                return self._call(step, Phase.MAIN, call.tool, call.args)
            if self.policy is PolicyName.CONTEXT_TRUSTING and self._already_known(spec, call):
                step += 1
                continue
            if spec.kind is ToolKind.READ:
                return self._call(step, Phase.MAIN, call.tool, call.args)
            return self._write(step, Phase.MAIN, after_pre=False)
        return ScriptedReply(content=self._final_answer())

    def _already_known(self, spec: ToolSpec[Any], call: TrajectoryCall) -> bool:
        if spec.kind is ToolKind.READ:
            key = self._resource_of(spec, call.args)
            return (
                key is not None
                and self.transcript.latest_version(key, tool_results_only=False) is not None
                and not self._changed_by_others(key)
            )
        # the same action as the graders count it (one definition: worlds.action_key), not identical arguments
        wanted = action_key(call.tool, spec.validated_arguments(call.args), spec)

        def same(arguments: Mapping[str, Any]) -> bool:
            return action_key(call.tool, spec.validated_arguments(arguments), spec) == wanted

        return self.transcript.successful_call_visible(call.tool, same) or _write_record_visible(
            self.transcript, call.tool, same
        )

    def _changed_by_others(self, key: str) -> bool:
        """Whether two views of ``key`` in the context differ in version with no own successful write to it
        between them (a change the policy did not make)."""
        own_writes = [c.message_index for c in self.transcript.tool_calls if self._is_own_write_to(c, key)]
        previous: tuple[int, int] | None = None
        for index, view in self.transcript.views(tool_results_only=False):
            if view["resource"] != key:
                continue
            version = int(view["version"])
            changed = previous is not None and version != previous[1]
            if changed and previous is not None and not any(previous[0] <= at < index for at in own_writes):
                return True
            previous = (index, version)
        return False

    def _is_own_write_to(self, seen: ToolCallSeen, key: str) -> bool:
        spec = self.world.tool(seen.name)
        arguments = seen.parsed_arguments
        if spec is None or spec.kind is not ToolKind.WRITE or arguments is None:
            return False
        if seen.result is None or error_code_of(seen.result) is not None:
            return False
        return self._resource_of(spec, arguments) == key

    # -- writes and reads --

    def _write(self, step: int, phase: Phase, *, after_pre: bool) -> ScriptedReply:
        call = self.trajectory[step]
        spec = self.world.tool(call.tool)
        if spec is None or not self._contract_offered(call.tool):
            return self._call(step, phase, call.tool, call.args)
        version = self._version_for(step, call, spec, fresh=phase is Phase.RETRY)
        if version is None and not after_pre:
            key = self._resource_of(spec, call.args)
            if key is not None and self._read_args(key) is not None:
                return self._read_for(step, Phase.PRE)
        arguments = dict(call.args)
        if version is not None:
            arguments[VERSION_ARGUMENT] = version
        return self._call(step, phase, call.tool, arguments)

    def _version_for(self, step: int, call: TrajectoryCall, spec: ToolSpec[Any], *, fresh: bool) -> int | None:
        key = self._resource_of(spec, call.args)
        if key is None:
            return None
        trusting = self.policy is PolicyName.CONTEXT_TRUSTING
        latest = self.transcript.latest_version(key, tool_results_only=not trusting)
        if fresh or self.policy is not PolicyName.UNSAFE:
            return latest
        pinned = call.expected_version
        if isinstance(pinned, int):
            return pinned
        if isinstance(pinned, VersionFromCall):
            for seen in reversed(self.transcript.calls_for_step(self.policy.value, pinned.as_of_call)):
                shown = version_in(seen.result, key)
                if shown is not None:
                    return shown
        return latest

    def _read_for(self, step: int, phase: Phase) -> ScriptedReply:
        call = self.trajectory[step]
        spec = self.world.tool(call.tool)
        key = self._resource_of(spec, call.args) if spec is not None else None
        read = self._read_args(key) if key is not None else None
        if read is None:  # nothing to read it with: go on as if the step were done
            return self._plan(step + 1)
        return self._call(step, phase, read[0], read[1])

    def _read_args(self, key: str) -> tuple[str, dict[str, Any]] | None:
        """The read tool and arguments that show resource ``key``."""
        kind, resource_id = key.split("/", 2)[1:]
        tool_name = self.world.read_tool_for.get(kind)
        spec = self.world.tool(tool_name) if tool_name else None
        if spec is None or tool_name is None:
            return None
        evaluator = self.task.evaluator
        for candidate in [*evaluator.reference_solution, *evaluator.unsafe_trajectory]:
            if candidate.tool == tool_name and self._resource_of(spec, candidate.args) == key:
                return tool_name, dict(candidate.args)
        required = [name for name, f in spec.args.model_fields.items() if f.is_required()]
        guesses: list[dict[str, Any]] = []
        if len(required) == 1:
            guesses.append({required[0]: resource_id})
        if len(required) == 2 and ":" in resource_id:
            guesses.append(dict(zip(required, resource_id.split(":", 1), strict=True)))
        for arguments in guesses:
            if self._resource_of(spec, arguments) == key:
                return tool_name, arguments
        return None

    def _resource_of(self, spec: ToolSpec[Any], arguments: Mapping[str, Any]) -> str | None:
        plain = {k: v for k, v in arguments.items() if k != VERSION_ARGUMENT}
        try:
            parsed = spec.args.model_validate(plain)
        except ValueError:
            return None
        primary = spec.resource(parsed)
        return resource_key(self.world.name, *primary) if primary is not None else None

    def _contract_offered(self, tool: str) -> bool:
        for offered in self.tools:
            function = offered.get("function") if isinstance(offered, Mapping) else None
            if isinstance(function, Mapping) and function.get("name") == tool:
                parameters = function.get("parameters")
                properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
                return isinstance(properties, Mapping) and VERSION_ARGUMENT in properties
        return False

    def _call(self, step: int, phase: Phase, tool: str, arguments: Mapping[str, Any]) -> ScriptedReply:
        call_id = CallId(self.policy.value, step, phase, nonce_of(self.transcript.messages)).render()
        return ScriptedReply(content=None, tool_calls=(ScriptedToolCall(call_id, tool, canonical_json(arguments)),))

    # -- the final answer --

    def _final_answer(self) -> str:
        lines = [f"Scripted {self.policy.value} policy: finished task {self.task.id} ({self.task.title})."]
        writes = [c for c in self.transcript.tool_calls if _is_write(self.world, c.name)]
        if writes:
            lines.append("Writes in my context:")
            lines.extend(f"- {c.name} {c.arguments}: {_outcome_word(c)}" for c in writes)
        else:
            lines.append("No writes are in my context.")
        facts = self.task.evaluator.final_answer_facts
        if self.policy is PolicyName.ORACLE and facts:
            lines.append("Facts: " + "; ".join(facts))
        return "\n".join(lines)


def _is_write(world: WorldDefinition, name: str) -> bool:
    spec = world.tool(name)
    return spec is not None and spec.kind is ToolKind.WRITE


def _outcome_word(call: ToolCallSeen) -> str:
    if call.result is None:
        return "no result in context"
    code = error_code_of(call.result)
    return "ok" if code is None else f"error {code}"


# ---- write records in message text (state digest, scripted summary) --------------------------------------


def _write_record_visible(transcript: Transcript, tool: str, same: Callable[[Mapping[str, Any]], bool]) -> bool:
    """Whether a message text states an executed write of ``tool`` whose arguments are ``same`` action."""
    for message in transcript.messages:
        if message.get("role") == "tool":
            continue
        for value in json_values_in(text_of(message.get("content"))):
            for record in write_records(value):
                if record["tool"] == tool and record.get("outcome") == "executed" and same(record["arguments"]):
                    return True
    return False


# ---- extractive summaries --------------------------------------------------------------------------------

_WRITE_TOOLS = sorted({t.name for w in WORLDS.values() for t in w.tools if t.kind is ToolKind.WRITE}, key=len)
_WRITE_MENTION = re.compile(r"\b(" + "|".join(re.escape(n) for n in reversed(_WRITE_TOOLS)) + r")\b[^{}\n]{0,40}\{")
_DECODER = json.JSONDecoder()


def extractive_summary(transcript: Transcript) -> str:
    """A deterministic summary of the resources and writes visible in the request's message text.

    Resources: the most recent view of each ``{"resource", "version", ...}`` object in any message, with its
    scalar and short fields. Writes: write records already in JSON form (a digest, a previous scripted
    summary), ``<write tool> ... {arguments}`` mentions in log text with the JSON result that follows them,
    and structured write tool calls. Every line is JSON, so a later summary (or a policy) can read it back.
    """
    latest: dict[str, dict[str, Any]] = {}
    for _, view in transcript.views(tool_results_only=False):
        latest[view["resource"]] = view
    writes: list[dict[str, Any]] = []
    for message in transcript.messages:
        if message.get("role") in ("system", "developer"):
            continue
        text = text_of(message.get("content"))
        for value in json_values_in(text):
            writes.extend(_normalise_record(r) for r in write_records(value))
        writes.extend(_write_mentions(text))
    for call in transcript.tool_calls:
        if call.name in _WRITE_TOOLS:
            arguments = call.parsed_arguments
            writes.append(_record(call.name, arguments if arguments is not None else call.arguments, call.result))
    lines = [SUMMARY_HEADER, f"Resources last seen ({len(latest)}):"]
    lines.extend(canonical_json(_compact(latest[key])) for key in sorted(latest))
    lines.append(f"Writes made ({len(writes)}):")
    lines.extend(canonical_json(w) for w in writes)
    return "\n".join(lines)


def _compact(view: Mapping[str, Any]) -> dict[str, Any]:
    compact: dict[str, Any] = {}
    for name, value in view.items():
        if not isinstance(value, dict | list) or len(canonical_json(value)) <= 200:
            compact[name] = value
        else:
            compact[name] = f"<{len(value)} entries>"
    return compact


def _record(tool: str, arguments: Any, result: Any) -> dict[str, Any]:
    code = error_code_of(result) if result is not None else None
    outcome = "unknown" if result is None else ("executed" if code is None else "error")
    return {"tool": tool, "arguments": arguments, "outcome": outcome, "error_code": code}


def _normalise_record(record: Mapping[str, Any]) -> dict[str, Any]:
    outcome = record.get("outcome")
    code = record.get("error_code")
    return {
        "tool": record["tool"],
        "arguments": record["arguments"],
        "outcome": outcome if isinstance(outcome, str) else "unknown",
        "error_code": code if isinstance(code, str) else None,
    }


def _write_mentions(text: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for match in _WRITE_MENTION.finditer(text):
        start = match.end() - 1
        try:
            arguments, end = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if not isinstance(arguments, dict):
            continue
        result: Any = None
        following = text[end : end + 40]
        brace = following.find("{")
        if brace >= 0 and "\n\n" not in following[:brace]:
            try:
                result, _ = _DECODER.raw_decode(text, end + brace)
            except json.JSONDecodeError:
                result = None
        found.append(_record(match.group(1), arguments, result))
    return found
