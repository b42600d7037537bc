"""One episode of a world driven by an external agent: its tool calls are its steps.

:class:`WorldEpisode` is the MCP server's state, independent of any MCP type (so it is tested without the
``mcp`` package). It uses the world exactly as the built-in agent loop does: ``world.begin_step(k)`` before
step k (``before_step`` mutations), ``world.call`` for the call (results, tool events, and the
``after_tool_call`` / ``after_observation`` mutations the world applies), and records the step in the same
:class:`~contextdelta.agent.StepRecord` shape, with no messages: what the agent's model saw is unknown.

An episode the agent leaves without ``finish`` (its command exits 0, the session closes) gave no final answer: it is
recorded as ``provider_error`` with the error saying so (:func:`no_final_answer`), never as ``final_answer``.

Steps: each tool call is one step; ``finish`` is one more (as the built-in final answer is a model call), so
``max_steps`` bounds both alike. After ``max_steps`` calls, or after ``finish``, the episode is over and every
further call is answered with an error and changes nothing.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from contextdelta.agent import (
    SYSTEM_PROMPT,
    SYSTEM_PROMPT_VERSION,
    ContextRecord,
    EpisodeEvaluatorData,
    EpisodeTotals,
    EpisodeTrace,
    ExternalEpisode,
    ResponseRecord,
    StepEvaluatorData,
    StepRecord,
    StrategyInfo,
    TerminationReason,
    ToolCallRecord,
    external_strategy,
    initial_messages,
    system_prompt_sha256,
    task_message_text,
)
from contextdelta.canonical import canonical_json, content_hash, json_type, sha256_hex
from contextdelta.context import Message, count_tool_tokens
from contextdelta.providers import ToolCallRequest
from contextdelta.tasks import Task
from contextdelta.worlds import Outcome, World

FINISH_TOOL = "finish"
FINISH_DESCRIPTION = (
    "Declare the task done (or impossible) and end the episode. Give your short final message: what you did and "
    "what the outcome was. Call it once, last; no tool works after it."
)
FINISH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "description": "Your final message."}},
    "required": ["answer"],
    "additionalProperties": False,
}
FINISH_NOTE = (
    "This server is one episode of a ContextDelta task. Work only through its tools. When the task is done, or "
    "cannot be done, call the `finish` tool with your short final message instead of replying with text."
)
EPISODE_OVER = '{"error": {"code": "episode_over", "message": "The episode has ended; no tool works any more."}}'


def _argument_text(arguments: dict[str, Any]) -> str:
    """The arguments an MCP client sent as the text the step records and the world reads: canonical JSON, or, when
    they hold NaN or Infinity (which a client's JSON may carry and canonical JSON refuses), the same text with those
    constants written out, for the world to answer as malformed arguments (and ``verify`` to re-read alike)."""
    try:
        return canonical_json(arguments)
    except ValueError:
        return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_LEFT_WITHOUT_FINISH = {
    "agent_exited": "the agent command exited 0",
    "session_closed": "the MCP session closed",
}


def no_final_answer(ended_by: str) -> str:
    """The error of an episode its agent left without calling ``finish``: how it ended, and that no final answer
    was given."""
    how = _LEFT_WITHOUT_FINISH.get(ended_by, f"the episode ended ({ended_by})")
    return f"{how} before the agent called {FINISH_TOOL}: it gave no final answer"


def server_instructions(task: Task) -> str:
    """What the MCP server tells the agent: the harness's fixed system prompt, how to finish, and the task
    message the built-in agent gets (only the task's public part)."""
    return f"{SYSTEM_PROMPT}\n\n{FINISH_NOTE}\n\n{task_message_text(task.public_task)}"


@dataclass
class WorldEpisode:
    """The state of one external episode (thread-safe: a lock serialises calls, as the agent loop does)."""

    task: Task
    world: World
    agent: str
    transport: str
    max_steps: int
    seed: int | None = None
    steps: list[StepRecord] = field(default_factory=list)
    history: list[Message] = field(default_factory=list)
    termination: TerminationReason | None = None
    ended_by: str | None = None
    final_answer: str | None = None
    error: str | None = None
    exit_code: int | None = None
    stopped_by_harness: bool = False
    stray_sweep: Literal["cookie", "unavailable"] | None = None
    agent_latency_s: float = 0.0
    _last: float = field(default_factory=time.perf_counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _done: threading.Event = field(default_factory=threading.Event)
    _requests: dict[str | int, int] = field(default_factory=dict)
    """The step of each JSON-RPC request id a tool call came with."""

    def __post_init__(self) -> None:
        self.strategy = external_strategy(self.agent)
        self.initial = self.world.state()
        self.history = initial_messages(self.task.public_task)
        self.instructions = server_instructions(self.task)

    # ---- what the server offers ----------------------------------------------------------------------------

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The world's tools in the protection mode (OpenAI function schemas, as the built-in agent gets them)."""
        return self.world.tool_schemas()

    @property
    def over(self) -> bool:
        return self.termination is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the episode is over (finish or the step limit); False on timeout."""
        return self._done.wait(timeout)

    # ---- what the agent does -------------------------------------------------------------------------------

    def call(self, name: str, arguments: Any, request_id: str | int | None = None) -> tuple[str, bool]:
        """One tool call as the next step: (result text, whether it is an error). Unknown tools and bad arguments
        (arguments that are not an object included; None is none, ``{}``) are the world's ``invalid`` calls,
        recorded like the built-in loop records them. ``request_id``: the JSON-RPC id it came with, by which
        :meth:`undelivered` finds its step."""
        with self._lock:
            if self.over:
                return EPISODE_OVER, True
            k = len(self.steps) + 1
            if request_id is not None:
                self._requests[request_id] = k
            think = self._think()
            before = self.world.begin_step(k)
            call_id = f"mcp_{k}"
            raw = _argument_text(arguments if arguments is not None else {})
            result = self.world.call(name, raw, call_id)
            assistant: Message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}],
            }
            answer: Message = {"role": "tool", "tool_call_id": call_id, "content": result.content}
            self._append(
                k,
                ResponseRecord(
                    content=None,
                    tool_calls=[ToolCallRequest(id=call_id, name=name, arguments=raw)],
                    finish_reason="tool_calls",
                    usage=None,
                    latency_s=round(think, 6),
                ),
                [assistant, answer],
                [ToolCallRecord(call_id=call_id, original_id=call_id, name=name, arguments=raw, result=result.content)],
                StepEvaluatorData(
                    mutations_before_step=before, tool_events=[result.event], mutations_after_calls=result.mutations
                ),
            )
            if len(self.steps) >= self.max_steps:
                self._end(TerminationReason.MAX_STEPS, "max_steps", None)
            return result.content, result.event.outcome is not Outcome.EXECUTED

    def finish(self, answer: Any) -> tuple[str, bool]:
        """The agent declares the episode done; its answer (a string) is the final answer (a step, like the built-in
        one). Returns (result text, whether it is an error): a ``finish`` after the episode ended is one, and so is
        one whose ``answer`` is missing (None) or not a string: that call is a step of its own, answered with what
        was wrong, and the episode goes on (up to the step limit) for the agent to finish again."""
        with self._lock:
            if self.over:
                return EPISODE_OVER, True
            k = len(self.steps) + 1
            think = self._think()
            before = self.world.begin_step(k)
            if not isinstance(answer, str):
                got = "no `answer`" if answer is None else f"`answer` that is {json_type(answer)}"
                self._append(
                    k,
                    ResponseRecord(content=None, finish_reason=None, usage=None, latency_s=round(think, 6)),
                    [],
                    [],
                    StepEvaluatorData(mutations_before_step=before),
                    note=f"{FINISH_TOOL} called with {got}; answered with an error, the episode went on",
                )
                then = f"The episode has not ended: call {FINISH_TOOL} again with your answer as text."
                if len(self.steps) >= self.max_steps:
                    self._end(TerminationReason.MAX_STEPS, "max_steps", None)
                    then = "That was the last step: the episode has ended."
                message = f"{FINISH_TOOL} needs `answer`, your final message as a string; it got {got}. {then}"
                return canonical_json({"error": {"code": "invalid_arguments", "message": message}}), True
            self._append(
                k,
                ResponseRecord(content=answer, finish_reason="stop", usage=None, latency_s=round(think, 6)),
                [{"role": "assistant", "content": answer}],
                [],
                StepEvaluatorData(mutations_before_step=before),
            )
            self.final_answer = answer
            self._end(TerminationReason.FINAL_ANSWER, "finish", None)
            return '{"finished": true}', False

    def undelivered(self, request_id: str | int, tool: str) -> None:
        """The client disconnected before the answer to its request ``request_id`` (a call of ``tool``) was sent.

        The call is judged as the action that happened: when it ran, its step stays (the world changed) and is
        noted as never answered; when it had not run yet, it never will. Either way the agent no longer knows what
        its call did, so the episode ends (``client_disconnected``, a failed trial: the agent's side broke, as when
        its command crashes), instead of waiting for a session that lost its answer. Called once the call, if it
        was running, has returned (the lock)."""
        with self._lock:
            k = self._requests.get(request_id)
            if k is not None:
                step = self.steps[k - 1]
                said = "the client disconnected before this call's result was delivered; the call was executed"
                self.steps[k - 1] = step.model_copy(
                    update={"note": said if step.note is None else f"{step.note}; {said}"}
                )
                why = (
                    f"the client disconnected while its call of {tool} (step {k}) ran: the call was executed and "
                    "its result never delivered"
                )
            else:
                why = f"the client disconnected before its call of {tool} was answered; the call was not executed"
            if self.over:
                return
            self._end(TerminationReason.PROVIDER_ERROR, "client_disconnected", why)

    def close(
        self, ended_by: str, *, failed: str | None = None, exit_code: int | None = None, stopped: bool = False
    ) -> None:
        """The agent is gone (session closed, command exited, crashed or timed out). A failure (``failed``: why) is
        a failed trial (``provider_error``: the agent is this episode's model), even after ``finish``: the agent
        did not end cleanly, so its run is not counted as a success. Otherwise a finished episode keeps its ending;
        one the agent left without ``finish`` (and before the step limit) gave no final answer, and is a failed
        trial too (``provider_error``, :func:`no_final_answer` saying how it ended), never ``final_answer``.
        ``stopped``: the harness stopped the agent's command (recorded; by itself no failure)."""
        with self._lock:
            if exit_code is not None:
                self.exit_code = exit_code
            self.stopped_by_harness = self.stopped_by_harness or stopped
            if self.over and failed is not None and self.termination is TerminationReason.FINAL_ANSWER:
                self._end(TerminationReason.PROVIDER_ERROR, ended_by, f"{failed} (after it called finish)")
                return
            if self.over and failed is not None and self.ended_by == "session_closed":
                # its session ended first (HTTP DELETE), then it crashed or hung: the crash is how it left
                self._end(TerminationReason.PROVIDER_ERROR, ended_by, f"{failed} (after its MCP session closed)")
                return
            if self.over:
                return
            # no final answer was given: not `final_answer` (the agent gave none), but what the built-in loop records
            # for a model that never answers (an empty reply twice), a failed trial, the error saying how it left
            self._end(TerminationReason.PROVIDER_ERROR, ended_by, failed or no_final_answer(ended_by))

    # ---- the record ----------------------------------------------------------------------------------------

    def trace(self) -> EpisodeTrace:
        """The episode in the built-in trace shape (steps without messages; ``external`` says why)."""
        with self._lock:
            schemas = self.world.tool_schemas()
            steps = list(self.steps)
            totals = EpisodeTotals(
                agent_calls=len(steps),
                agent_latency_s=round(self.agent_latency_s, 6),
                usage_complete=False,
                tool_calls=sum(len(s.tool_calls) for s in steps),
                latency_s=round(self.agent_latency_s, 6),
            )
            params = {"agent": self.agent}
            return EpisodeTrace(
                task_id=self.task.id,
                world=self.world.name,
                protection_mode=str(self.world.mode),
                strategy=StrategyInfo(
                    name=self.strategy,
                    params=params,
                    config_hash=content_hash({"name": self.strategy, "params": params}),
                ),
                provider="external",
                model=self.agent,
                seed=self.seed,
                max_steps=self.max_steps,
                system_prompt_version=SYSTEM_PROMPT_VERSION,
                system_prompt_sha256=system_prompt_sha256(),
                tools_sha256=content_hash(schemas),
                tools_harness_tokens=count_tool_tokens(schemas),
                initial_messages=initial_messages(self.task.public_task),
                steps=steps,
                termination=self.termination or TerminationReason.HARNESS_ERROR,
                final_answer=self.final_answer,
                error=self.error if self.termination else "the episode never ended",
                totals=totals,
                evaluator=EpisodeEvaluatorData(
                    final_state=self.world.state(), final_state_hash=self.world.state_hash()
                ),
                external=ExternalEpisode(
                    agent=self.agent,
                    transport=self.transport,
                    instructions_sha256=sha256_hex(self.instructions),
                    ended_by=self.ended_by or "never",
                    exit_code=self.exit_code,
                    stopped_by_harness=self.stopped_by_harness,
                    stray_sweep=self.stray_sweep,
                ),
            )

    # ---- internals -----------------------------------------------------------------------------------------

    def _think(self) -> float:
        """Seconds since the previous result went back (or the episode started): the agent's own time."""
        now = time.perf_counter()
        spent, self._last = now - self._last, now
        self.agent_latency_s += spent
        return spent

    def _append(
        self,
        k: int,
        response: ResponseRecord,
        appended: list[Message],
        calls: list[ToolCallRecord],
        evaluator: StepEvaluatorData,
        note: str | None = None,
    ) -> None:
        self.steps.append(
            StepRecord(
                note=note,
                step=k,
                messages=[],
                messages_sha256=content_hash([]),
                harness_prompt_tokens=0,
                context=ContextRecord(canonical_message_count=len(self.history)),
                response=response,
                tool_calls=calls,
                appended=appended,
                evaluator=evaluator,
            )
        )
        self.history.extend(appended)
        self._last = time.perf_counter()

    def _end(self, reason: TerminationReason, ended_by: str, error: str | None) -> None:
        self.termination = reason
        self.ended_by = ended_by
        self.error = error
        self._done.set()
