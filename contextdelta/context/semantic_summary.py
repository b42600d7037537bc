"""``semantic_summary``: older tool groups replaced by a natural-language summary from the summary model.

Window: as for ``typed_state_digest``, once the history holds more than ``trigger`` tool groups, every group but
the last ``keep`` is evicted (a sliding window: from then on each step evicts one more group).

Incremental: the strategy remembers the summary and which groups it covers. When more groups are evicted it
makes one call with the previous summary plus only the newly evicted groups; groups already summarised are
never sent again. If the evicted prefix no longer matches what was summarised (not possible within one
episode), it starts over from the evicted groups alone.

The request is a FIXED, versioned prompt: a system message whose first line is the marker
``ContextDelta summary prompt`` and a user message with the log, and no tools. The task instruction is not
sent (the agent keeps it verbatim; the summary is about state and actions). The summary reaches the agent as
one user message right after the instruction. A failed summary call raises ProviderFailure, which ends the
episode with its reason; a reply without text counts as a failed call, named: a tool call instead of the summary,
a refusal, or an empty summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from contextdelta.canonical import canonical_json, content_hash, sha256_hex
from contextdelta.context.base import (
    PINNED,
    Message,
    Segment,
    StrategyBase,
    SummaryCall,
    TransformResult,
    check_window,
    compaction,
)
from contextdelta.context.tokens import count_message_tokens
from contextdelta.providers import ChatProvider, ProviderFailure, ProviderResponse, one_line, shorten

SUMMARY_MARKER = "ContextDelta summary prompt"
SUMMARY_PROMPT_VERSION = "1"
SUMMARY_SYSTEM_PROMPT = f"""{SUMMARY_MARKER}
Version: {SUMMARY_PROMPT_VERSION}

You condense the earlier part of a tool-using agent's work log so that the agent can continue its task without
the full log. Write a concise, factual summary in plain text. Keep:
- every resource the agent looked at, by its key (for example order/order/A-1001), with its state and version
  as last shown, the tool that showed it and the step;
- every change the agent made (tool and arguments) and its result, including errors and their codes;
- any observations that disagreed with each other or changed between steps.
Do not guess and do not add anything that is not in the log. Output only the summary."""

SUMMARY_MESSAGE_HEADER = (
    "Summary of your earlier steps {first}-{last} (the log of those steps was condensed to save space):"
)


@dataclass(frozen=True)
class _Cached:
    text: str
    steps: list[int]
    groups: int
    fingerprint: str


class SemanticSummary(StrategyBase):
    """Pinned messages, a model-written summary of the evicted groups, and the last ``keep`` groups verbatim."""

    name = "semantic_summary"
    deterministic = False

    def __init__(self, provider: ChatProvider, *, model: str | None = None, trigger: int = 6, keep: int = 3) -> None:
        super().__init__()
        check_window(trigger, keep)
        self.provider = provider
        self.model = model
        self.trigger = trigger
        self.keep = keep
        self._cache: _Cached | None = None

    @property
    def params(self) -> dict[str, Any]:
        return {
            "trigger": self.trigger,
            "keep": self.keep,
            "summary_model": self.model or self.provider.model,
            "prompt_version": SUMMARY_PROMPT_VERSION,
            "prompt_sha256": sha256_hex(SUMMARY_SYSTEM_PROMPT),
        }

    def _reset(self) -> None:
        self._cache = None

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        """Replace the evicted groups by the summary, calling the summary model for newly evicted groups only."""
        plan = compaction(history, self.trigger, self.keep)
        if plan is None:
            return TransformResult(messages=list(history))
        calls: list[SummaryCall] = []
        cached = self._cache
        evicted = plan.evicted
        if cached is not None and (
            cached.groups > len(evicted) or cached.fingerprint != _fingerprint(history, evicted[: cached.groups])
        ):
            cached = None
        start = cached.groups if cached else 0
        if cached is None or start < len(evicted):
            call = await self._summarise(history, cached, evicted[start:])
            calls.append(call)
            cached = _Cached(call.content, call.covers_steps, len(evicted), _fingerprint(history, evicted))
            self._cache = cached
        header = SUMMARY_MESSAGE_HEADER.format(first=min(cached.steps), last=max(cached.steps))
        message = {"role": "user", "content": f"{header}\n\n{cached.text}"}
        return TransformResult(
            messages=[*history[:PINNED], message, *history[plan.start :]],
            removed=list(range(PINNED, plan.start)),
            inserted=[PINNED],
            summary_calls=calls,
        )

    async def _summarise(
        self, history: Sequence[Message], previous: _Cached | None, new: Sequence[Segment]
    ) -> SummaryCall:
        new_steps = [g.step for g in new if g.step is not None]
        previous_steps = previous.steps if previous else []
        covers = [*previous_steps, *new_steps]
        messages = summary_request(history, previous.text if previous else None, previous_steps, new)
        response = await self.provider.complete(messages, None, seed=self.episode.seed, model=self.model)
        text = (response.content or "").strip()
        if not text:
            raise ProviderFailure("provider_error", _no_summary(response), response.retries, usage=response.usage)
        return SummaryCall(
            prompt_version=SUMMARY_PROMPT_VERSION,
            model=self.model,
            new_steps=new_steps,
            covers_steps=covers,
            messages=messages,
            messages_sha256=content_hash(messages),
            harness_prompt_tokens=count_message_tokens(messages),
            content=text,
            usage=response.usage,
            latency_s=response.latency_s,
            queue_s=response.queue_s,
            retries=response.retries,
            response_model=response.model,
        )


def _no_summary(response: ProviderResponse) -> str:
    """Why a summary reply without text is no summary: a tool call (the request offers no tools), a refusal, or
    nothing at all (with its finish reason when that says why)."""
    if response.tool_calls:
        names = one_line(shorten(", ".join(sorted({call.name for call in response.tool_calls})), 200))
        count = len(response.tool_calls)
        return (
            f"the summary model returned {count} tool call{'s' if count != 1 else ''} ({names}) instead of a "
            "summary text (the summary request offers no tools)"
        )
    if response.refusal is not None and response.refusal.strip():
        return f"the summary model refused: {shorten(one_line(response.refusal))}"
    finish = response.finish_reason
    why = f" (finish_reason {finish!r})" if finish not in (None, "stop") else ""
    return f"the summary model returned an empty summary{why}"


def summary_request(
    history: Sequence[Message], previous: str | None, previous_steps: Sequence[int], groups: Sequence[Segment]
) -> list[Message]:
    """The summary request: the fixed system prompt, then the previous summary (if any) and the new log."""
    steps = [g.step for g in groups if g.step is not None]
    parts: list[str] = []
    if previous is not None:
        parts.append(f"Previous summary (steps {_span(previous_steps)}):\n{previous}")
        parts.append(f"New log entries to fold in (steps {_span(steps)}):")
    else:
        parts.append(f"Log entries to summarise (steps {_span(steps)}):")
    parts.extend(render_group(history, g) for g in groups)
    parts.append(f"Write the summary covering steps {_span([*previous_steps, *steps])}.")
    return [{"role": "system", "content": SUMMARY_SYSTEM_PROMPT}, {"role": "user", "content": "\n\n".join(parts)}]


def render_group(history: Sequence[Message], group: Segment) -> str:
    """One tool group as plain log text: the step, any assistant text, each call, and each result verbatim."""
    assistant = history[group.start]
    lines = [f"Step {group.step}"]
    if isinstance(assistant.get("content"), str) and assistant["content"].strip():
        lines.append(f"Assistant: {assistant['content'].strip()}")
    results = {m.get("tool_call_id"): m.get("content") for m in history[group.start + 1 : group.end]}
    for call in assistant.get("tool_calls") or []:
        function = call.get("function") or {}
        lines.append(f"Call {function.get('name')} with arguments {function.get('arguments') or '{}'}")
        lines.append(f"Result: {results.get(call.get('id'), '')}")
    return "\n".join(lines)


def _span(steps: Sequence[int]) -> str:
    return f"{min(steps)}-{max(steps)}" if steps else "none"


def _fingerprint(history: Sequence[Message], groups: Sequence[Segment]) -> str:
    return sha256_hex(canonical_json([history[i] for g in groups for i in g.indices]))
