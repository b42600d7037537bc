"""The agent loop: one episode of a model acting on a world through tools, under a context strategy.

Step k (1-based), for k up to ``max_steps``:
budget check -> ``world.begin_step(k)`` (before-step hidden mutations) -> the strategy turns the canonical
history into the messages to send -> one chat-completions call with the world's tool schemas -> each tool call
runs in order through ``world.call`` (which never raises: unknown tools, malformed or invalid arguments get a
JSON error result and the loop goes on) -> the assistant message and one tool message per call are appended to
the canonical history; hidden mutations that fired after the calls are recorded with the step.

The episode ends on a final answer (text and no tool calls), the step limit, a provider failure (its reason:
``provider_error`` or ``context_window_exceeded``; a failed summary call ends it the same way), the budget
check, or ``harness_error`` for any unexpected exception (recorded, never raised).

Decisions:
- An empty reply (no tool calls and no non-blank text) is never a final answer. The first one in an episode is
  recorded as a step with no action; an empty assistant message and a fixed nudge (a user message) are appended
  and the loop goes on. A second one ends the episode as ``provider_error`` ("empty response").
- A refusal (``message.refusal``, or refusal parts of the content) without tool calls ends the episode at once:
  its text is the final answer, graded on the world's state like any other (a refused task is not done), and the
  step's note says ``refusal: ...``. It is neither an empty reply to nudge nor an endpoint failure (a failed
  trial would leave the episode out of the rates and count towards the circuit breaker).
- A reply cut short (``finish_reason`` "length" or "content_filter") is acted on as any other: its text is the
  final answer, graded on the world's state; its tool calls run as sent. The step's note names the cut.
- Tool-call ids the model left empty or reused are replaced in the history by an invented id (the original is
  kept in the record), so every tool message answers exactly one call. An invented id is 9 letters and digits
  (Mistral's API rejects any other tool-call id), derived from the episode seed, the step and the call's index
  (:func:`invented_call_id`: the same in every run and in ``verify``), and unique within the episode.
- The messages the strategy returns are checked to be a valid chat sequence before they are sent; a strategy
  that breaks one ends the episode as ``harness_error``.
- Only a :class:`PublicTask` is accepted; evaluator data never reaches a message.
"""

from __future__ import annotations

import contextlib
import string
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from contextdelta.agent.prompt import (
    EMPTY_RESPONSE_NUDGE,
    SYSTEM_PROMPT_VERSION,
    initial_messages,
    system_prompt_sha256,
)
from contextdelta.agent.records import (
    ContextRecord,
    EpisodeEvaluatorData,
    EpisodeTotals,
    EpisodeTrace,
    FailedCallRecord,
    ResponseRecord,
    StepEvaluatorData,
    StepRecord,
    StrategyInfo,
    TerminationReason,
    ToolCallRecord,
)
from contextdelta.canonical import canonical_json, content_hash, sha256_hex
from contextdelta.context import (
    MAX_CONTEXT_CHARS,
    ContextStrategy,
    EpisodeContext,
    Message,
    TransformResult,
    bounded_for_episode,
    bounded_transform,
    count_message_tokens,
    count_tool_tokens,
    describe_problems,
    detached,
    is_builtin,
    summary_call_problems,
    transform_problems,
)
from contextdelta.providers import ChatProvider, ProviderFailure, ProviderResponse, Usage, one_line, shorten
from contextdelta.tasks import PublicTask
from contextdelta.worlds import MutationEvent, ToolEvent, ToolKind, World

BudgetCheck = Callable[[EpisodeTotals], str | None]
"""Called before each step with the running totals; returns why to stop (budget_exceeded), or None to go on."""
StepCallback = Callable[[StepRecord], None]
"""Called with each step record once the step is over (for progress reporting)."""


def episode_context(world: World, seed: int | None) -> EpisodeContext:
    """What a strategy may know about an episode besides the messages (the one definition the loop and
    ``verify``'s re-derivation share): the seed and which of the world's tools write."""
    writes = frozenset(t.name for t in world.definition.tools if t.kind is ToolKind.WRITE)
    return EpisodeContext(seed=seed, write_tools=writes)


CUT_SHORT_REASONS = {
    "length": "cut at the completion token limit",
    "content_filter": "cut by the endpoint's content filter",
}
"""Finish reasons that say a reply was cut short, and the words a step's note names them with."""


PLUGIN_MODEL_CALLS = 4
"""A plug-in strategy that is not deterministic may take as long as this many model calls (each with its retries)
in one transform before its episode ends as ``harness_error``."""

INVENTED_ID_LENGTH = 9
"""Characters of an invented tool-call id: Mistral's API takes exactly 9 of ``[a-zA-Z0-9]`` and rejects any other."""
_ID_ALPHABET = string.digits + string.ascii_letters


def invented_call_id(seed: int | None, step: int, index: int, attempt: int = 0) -> str:
    """The tool-call id the loop gives the ``index``-th call of step ``step`` when the model's id is empty or
    already used: 9 letters and digits drawn from a SHA-256 of (seed, step, index, attempt), so the same episode
    gets the same ids in every run; ``attempt`` counts up past an id the episode already holds."""
    number = int(sha256_hex(f"contextdelta tool-call id\n{seed}\n{step}\n{index}\n{attempt}")[:16], 16)
    chars = []
    for _ in range(INVENTED_ID_LENGTH):
        number, digit = divmod(number, len(_ID_ALPHABET))
        chars.append(_ID_ALPHABET[digit])
    return "".join(chars)


MAX_ERROR_DETAIL_CHARS = 20_000
"""The longest traceback a record keeps of a harness error (its start and its end: where it began, what it was)."""


def _ends_of(text: str, limit: int) -> str:
    """``text`` when it has at most ``limit`` characters, else its first and last halves of that and how long it was."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... [cut: {len(text)} characters in all] ...\n{text[-half:]}"


class HarnessError(RuntimeError):
    """An inconsistency inside the harness (ends the episode as ``harness_error``)."""


async def run_episode(
    public_task: PublicTask,
    world: World,
    provider: ChatProvider,
    strategy: ContextStrategy,
    *,
    max_steps: int,
    seed: int | None = None,
    budget: BudgetCheck | None = None,
    on_step: StepCallback | None = None,
) -> EpisodeTrace:
    """Run one episode and return its trace; never raises for anything the model, provider or world does.

    ``strategy`` is used as a configuration: the episode works on ``strategy.for_episode(...)``, a fresh copy
    with no state from other episodes, so one configured strategy can serve many concurrent episodes. A
    ``semantic_summary`` strategy carries its own summary provider. Raises TypeError when given anything but a
    PublicTask and ValueError for ``max_steps < 1``.
    """
    if not isinstance(public_task, PublicTask):
        raise TypeError(f"run_episode takes a PublicTask, not {type(public_task).__name__}")
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    episode = _Episode(public_task, world, provider, strategy, max_steps=max_steps, seed=seed)
    await episode.run(budget, on_step)
    return episode.trace()


@dataclass
class _StepDraft:
    """A step record being filled in, so a step cut short by a harness error is still recorded."""

    step: int
    messages: list[Message] = field(default_factory=list)
    harness_prompt_tokens: int = 0
    context: ContextRecord = field(default_factory=lambda: ContextRecord(canonical_message_count=0))
    response: ResponseRecord | None = None
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    appended: list[Message] = field(default_factory=list)
    note: str | None = None
    error: str | None = None
    failed_call: FailedCallRecord | None = None
    mutations_before: list[MutationEvent] = field(default_factory=list)
    tool_events: list[ToolEvent] = field(default_factory=list)
    mutations_after: list[MutationEvent] = field(default_factory=list)

    def record(self) -> StepRecord:
        return StepRecord(
            step=self.step,
            messages=self.messages,
            messages_sha256=content_hash(self.messages),
            harness_prompt_tokens=self.harness_prompt_tokens,
            context=self.context,
            response=self.response,
            tool_calls=self.tool_calls,
            appended=self.appended,
            note=self.note,
            error=self.error,
            failed_call=self.failed_call,
            evaluator=StepEvaluatorData(
                mutations_before_step=self.mutations_before,
                tool_events=self.tool_events,
                mutations_after_calls=self.mutations_after,
            ),
        )


class _Episode:
    def __init__(
        self,
        task: PublicTask,
        world: World,
        provider: ChatProvider,
        strategy: ContextStrategy,
        *,
        max_steps: int,
        seed: int | None,
    ) -> None:
        self.task = task
        self.world = world
        self.provider = provider
        self.config = strategy
        self.max_steps = max_steps
        self.seed = seed
        self.history: list[Message] = initial_messages(task)
        self.initial = list(self.history)
        self.steps: list[StepRecord] = []
        self.totals = EpisodeTotals()
        self.termination: TerminationReason | None = None
        self.final_answer: str | None = None
        self.error: str | None = None
        self.error_detail: str | None = None
        self.nudged = False
        self.used_ids: set[str] = set()
        self.tools: list[dict[str, Any]] = []
        self.tools_sha256 = ""
        self.tools_tokens = 0
        self.strategy = strategy

    async def run(self, budget: BudgetCheck | None, on_step: StepCallback | None) -> None:
        try:
            self.tools = self.world.tool_schemas()
            self.tools_sha256 = content_hash(self.tools)
            self.tools_tokens = count_tool_tokens(self.tools)
            self.strategy = await self._episode_strategy()
            for k in range(1, self.max_steps + 1):
                if budget is not None:
                    stop = budget(self.totals.model_copy(deep=True))
                    if stop is not None:
                        self._end(TerminationReason.BUDGET_EXCEEDED, stop)
                        return
                await self._step(k)
                if on_step is not None:
                    on_step(self.steps[-1])
                if self.termination is not None:
                    return
            self._end(TerminationReason.MAX_STEPS, None)
        except Exception as exc:  # the loop records every harness failure instead of crashing the run
            self.termination = None
            # a plug-in's exception may carry megabytes: the record keeps a readable part of it
            self._end(TerminationReason.HARNESS_ERROR, shorten(f"{type(exc).__name__}: {exc}"))
            self.error_detail = _ends_of(traceback.format_exc(), MAX_ERROR_DETAIL_CHARS)

    async def _episode_strategy(self) -> ContextStrategy:
        """The configured strategy's copy for this episode; a plug-in whose ``for_episode`` fails or returns no
        strategy ends the episode as ``harness_error`` naming it (the record keeps the configured strategy's name,
        params and hash)."""
        name = self.config.name
        limit, why = self._transform_limit(self.config)
        try:
            episode: Any = await bounded_for_episode(self.config, episode_context(self.world, self.seed), limit)
        except TimeoutError:
            raise HarnessError(f"strategy {name}: for_episode did not return within {limit:g} s ({why})") from None
        except (Exception, SystemExit) as exc:
            raise HarnessError(f"strategy {name}: for_episode failed: {type(exc).__name__}: {exc}") from exc
        if not callable(getattr(episode, "transform", None)):
            raise HarnessError(
                f"strategy {name}: for_episode returned {type(episode).__name__}, not a strategy (a copy of itself "
                "with a transform method)"
            )
        return cast(ContextStrategy, episode)

    async def _step(self, k: int) -> None:
        draft = _StepDraft(step=k)
        try:
            await self._run_step(k, draft)
        finally:
            self.steps.append(draft.record())

    async def _run_step(self, k: int, draft: _StepDraft) -> None:
        draft.mutations_before = self.world.begin_step(k)
        draft.context = ContextRecord(canonical_message_count=len(self.history))
        try:
            reduced = await self._transform(k)
        except ProviderFailure as failure:
            draft.error = f"summary call failed: {failure.message}"
            draft.failed_call = FailedCallRecord.of(failure, "summary")
            self.totals.summary_calls += 1
            self.totals.summary_retries += failure.retries
            if failure.usage is not None:  # a reply came, just not a summary: its tokens were spent
                self.totals.summary_usage = self.totals.summary_usage + failure.usage
            self._end(TerminationReason(failure.reason), draft.error)
            return
        problems = transform_problems(self.history, reduced)
        if problems:
            # its summary calls were made (and paid for): counted, unless they are what is wrong
            if isinstance(reduced, TransformResult) and not summary_call_problems(reduced.summary_calls):
                with contextlib.suppress(ValueError):
                    self._record_context(draft, reduced)
            size = len(canonical_json(self.history))
            if size > MAX_CONTEXT_CHARS:  # the model's own output made the history too big: no strategy's fault
                draft.error = (
                    f"the episode's history takes {size:,} characters as JSON, over the {MAX_CONTEXT_CHARS:,} a "
                    "context may take (16 MiB, more than any endpoint's context window); nothing was sent"
                )
                self._end(TerminationReason.CONTEXT_WINDOW_EXCEEDED, draft.error)
                return
            raise HarnessError(
                f"strategy {self.config.name} produced an invalid message sequence at step {draft.step}: "
                f"{describe_problems(problems)}"
            )
        self._record_context(draft, reduced)
        # a plug-in may keep the messages it returned and edit them at a later step (in its own thread, even while
        # this one runs): what is sent and recorded is a copy of them as they were checked
        messages = reduced.messages if is_builtin(self.strategy) else detached(reduced.messages)
        draft.messages = messages
        draft.harness_prompt_tokens = count_message_tokens(messages)
        self.totals.harness_prompt_tokens += draft.harness_prompt_tokens
        self.totals.agent_calls += 1
        try:
            response = await self.provider.complete(messages, self.tools, seed=self.seed)
        except ProviderFailure as failure:
            draft.error = failure.message
            draft.failed_call = FailedCallRecord.of(failure, "agent")
            self.totals.agent_retries += failure.retries
            if failure.usage is not None:  # a reply of the wrong shape: not acted on, but its tokens were spent
                self.totals.agent_usage = self.totals.agent_usage + failure.usage
            self._end(TerminationReason(failure.reason), failure.message)
            return
        self._record_response(draft, response)
        finish = response.finish_reason
        if response.tool_calls:
            if (
                finish in CUT_SHORT_REASONS
            ):  # the calls run as sent (the world answers arguments cut mid-way as malformed)
                draft.note = f"{CUT_SHORT_REASONS[finish]} (finish_reason {finish!r}): its tool calls may be incomplete"
            self._run_tools(k, draft, response)
        elif response.refusal is not None and response.refusal.strip():
            # the model declined: its last word, graded on the world's state like any final answer (a model that
            # refuses a task has not done it), never an empty reply to nudge, nor an endpoint failure
            self._append(draft, {"role": "assistant", "content": response.refusal})
            self.final_answer = response.refusal
            draft.note = f"refusal: {shorten(one_line(response.refusal))}"
            self._end(TerminationReason.FINAL_ANSWER, None)
        elif response.content is not None and response.content.strip():
            message: Message = {"role": "assistant", "content": response.content}
            self._append(draft, message)
            self.final_answer = response.content
            if finish in CUT_SHORT_REASONS:  # still graded on the world's state, as every final answer
                draft.note = f"final answer {CUT_SHORT_REASONS[finish]} (finish_reason {finish!r})"
            self._end(TerminationReason.FINAL_ANSWER, None)
        elif not self.nudged:
            self.nudged = True
            draft.note = "empty response: no text and no tool calls; nudged once"
            self._append(draft, {"role": "assistant", "content": ""})
            self._append(draft, {"role": "user", "content": EMPTY_RESPONSE_NUDGE})
        else:
            draft.note = "empty response again after the nudge"
            # a filtered or cut-off reply says why it is empty: the reason names it
            why = f" (finish_reason {finish!r})" if finish not in (None, "stop", "tool_calls") else ""
            self._end(TerminationReason.PROVIDER_ERROR, f"empty response{why}")

    async def _transform(self, k: int) -> TransformResult:
        """The strategy's context for the history, given a copy of it (a strategy that edits its input cannot change
        the canonical history), within the strategy's time limit (:meth:`_transform_limit`); a plug-in runs in a
        thread of its own, so that one that blocks (``time.sleep``) is left behind at the limit instead of
        holding the run (:func:`bounded_transform`). Its failures name it and the step."""
        name = self.config.name
        limit, why = self._transform_limit(self.strategy)
        try:
            reduced: Any = await bounded_transform(self.strategy, self.history, limit)
        except ProviderFailure:
            raise
        except TimeoutError:
            raise HarnessError(
                f"strategy {name}: transform did not return within {limit:g} s at step {k} ({why})"
            ) from None
        except (Exception, SystemExit) as exc:  # SystemExit: a plug-in's sys.exit() ends its episode, not the run
            raise HarnessError(f"strategy {name}: transform failed at step {k}: {type(exc).__name__}: {exc}") from exc
        return cast(TransformResult, reduced)

    def _transform_limit(self, strategy: ContextStrategy) -> tuple[float | None, str]:
        """How long the strategy's transform may take, and the words that say where the limit comes from.

        A deterministic strategy makes no model call: the per-call timeout (``--timeout-s``). A plug-in that is not
        deterministic may make model calls: room for :data:`PLUGIN_MODEL_CALLS` of them, each with its retries
        (``--timeout-s``, or the retries' time budget when that is longer). ``semantic_summary`` has no limit of its
        own: its one call is bounded by the provider."""
        timeout = getattr(self.provider, "timeout_s", None)
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
            return None, ""
        if getattr(strategy, "deterministic", False):
            return float(timeout), "the per-call timeout, --timeout-s"
        if is_builtin(strategy):
            return None, ""
        budget = getattr(getattr(self.provider, "retry", None), "max_total_s", 0.0)
        call = max(float(timeout), budget if isinstance(budget, int | float) else 0.0)
        return PLUGIN_MODEL_CALLS * call, f"the time of {PLUGIN_MODEL_CALLS} model calls of up to {call:g} s each"

    def _run_tools(self, k: int, draft: _StepDraft, response: ProviderResponse) -> None:
        ids: list[str] = []
        brought = {call.id for call in response.tool_calls}  # the ids this reply brings, none of them invented
        for index, call in enumerate(response.tool_calls):
            call_id = call.id
            if not call_id or call_id in self.used_ids:
                attempt = 0
                call_id = invented_call_id(self.seed, k, index)
                while call_id in self.used_ids or call_id in brought:
                    attempt += 1  # taken, or the id another call of this reply brings: draw again
                    call_id = invented_call_id(self.seed, k, index, attempt)
            self.used_ids.add(call_id)
            ids.append(call_id)
        assistant: Message = {
            "role": "assistant",
            "content": response.content,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
                for call_id, call in zip(ids, response.tool_calls, strict=True)
            ],
        }
        self._append(draft, assistant)
        for call_id, call in zip(ids, response.tool_calls, strict=True):
            result = self.world.call(call.name, call.arguments, call_id)
            self._append(draft, {"role": "tool", "tool_call_id": call_id, "content": result.content})
            draft.tool_calls.append(
                ToolCallRecord(
                    call_id=call_id,
                    original_id=call.id,
                    name=call.name,
                    arguments=call.arguments,
                    result=result.content,
                )
            )
            draft.tool_events.append(result.event)
            draft.mutations_after.extend(result.mutations)
            self.totals.tool_calls += 1

    def _record_context(self, draft: _StepDraft, reduced: TransformResult) -> None:
        calls = reduced.summary_calls
        if not is_builtin(self.strategy):  # copies: a plug-in that keeps its calls cannot edit the record later
            calls = [call.model_copy(deep=True) for call in calls]
        draft.context = ContextRecord(
            canonical_message_count=len(self.history),
            removed=reduced.removed,
            inserted=reduced.inserted,
            summary_calls=calls,
        )
        for call in calls:
            self.totals.summary_calls += 1
            self.totals.summary_usage = self.totals.summary_usage + (call.usage or Usage())
            self.totals.summary_latency_s += call.latency_s
            self.totals.queue_s += call.queue_s
            self.totals.summary_retries += call.retries
            self.totals.harness_summary_prompt_tokens += call.harness_prompt_tokens
            if call.usage is None:
                self.totals.usage_complete = False
        self.totals.latency_s = self.totals.agent_latency_s + self.totals.summary_latency_s

    def _record_response(self, draft: _StepDraft, response: ProviderResponse) -> None:
        draft.response = ResponseRecord(
            content=response.content,
            tool_calls=response.tool_calls,
            finish_reason=response.finish_reason,
            model=response.model,
            usage=response.usage,
            latency_s=response.latency_s,
            queue_s=response.queue_s,
            elapsed_s=response.elapsed_s,
            retries=response.retries,
        )
        self.totals.agent_usage = self.totals.agent_usage + (response.usage or Usage())
        self.totals.agent_latency_s += response.latency_s
        self.totals.queue_s += response.queue_s
        self.totals.agent_retries += response.retries
        if response.usage is None:
            self.totals.usage_complete = False
        self.totals.latency_s = self.totals.agent_latency_s + self.totals.summary_latency_s

    def _append(self, draft: _StepDraft, message: Message) -> None:
        self.history.append(message)
        draft.appended.append(message)

    def _end(self, reason: TerminationReason, error: str | None) -> None:
        if self.termination is None:
            self.termination = reason
            self.error = error

    def trace(self) -> EpisodeTrace:
        strategy = self.config  # what the run configured (and checked); the episode's copy may be anything
        return EpisodeTrace(
            task_id=self.task.id,
            world=self.world.name,
            protection_mode=str(self.world.mode),
            strategy=StrategyInfo(name=strategy.name, params=strategy.params, config_hash=strategy.config_hash),
            provider=self.provider.name,
            model=self.provider.model,
            seed=self.seed,
            max_steps=self.max_steps,
            system_prompt_version=SYSTEM_PROMPT_VERSION,
            system_prompt_sha256=system_prompt_sha256(),
            tools_sha256=self.tools_sha256,
            tools_harness_tokens=self.tools_tokens,
            initial_messages=self.initial,
            steps=self.steps,
            termination=self.termination or TerminationReason.HARNESS_ERROR,
            final_answer=self.final_answer,
            error=self.error,
            error_detail=self.error_detail,
            totals=self.totals,
            evaluator=EpisodeEvaluatorData(final_state=self.world.state(), final_state_hash=self.world.state_hash()),
        )
