"""Re-deriving what the model was sent: every step's context from the canonical history, for every
deterministic strategy of a run, built-in or plug-in (SPEC section 10).

The strategies are rebuilt from the manifest's ``strategy_configs`` (runs from before plug-ins: from the
built-in names and ``strategy_params``). A deterministic plug-in that is not installed cannot be re-derived, and
that is a divergence: verify never prints MATCH over contexts it could not check. ``semantic_summary`` is not
deterministic (it calls the summary model), but everything except the model's reply is: it is rebuilt with a
provider that answers each summary call with the reply the step recorded (:class:`RecordedSummaries`), so the
summary requests (their messages, hash, token count and the steps they cover) and every sent context are
re-derived, and a summary call the strategy would not make (or a recorded one it would) is named. Other
non-deterministic plug-ins are left to the hash chain (``contextdelta.rundir.receipts``), and a note names each.

Per episode and step: the canonical history before the step is the initial messages plus every earlier step's
``appended`` messages; the rebuilt strategy (a fresh per-episode copy, bound to the same episode context as the
agent loop's) transforms it, and the result must equal the recorded ``messages``, ``removed`` and ``inserted``.
The recorded ``messages_sha256`` and ``harness_prompt_tokens`` must match the recorded messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from contextdelta._words import plural
from contextdelta.agent import EXTERNAL_PREFIX, EpisodeTrace, TerminationReason, episode_context
from contextdelta.canonical import canonical_json, content_hash
from contextdelta.context import (
    BUILTIN_STRATEGIES,
    ContextStrategy,
    Message,
    StrategyDescription,
    StrategyError,
    StrategyServices,
    SummaryCall,
    bounded_transform,
    count_message_tokens,
    describe_strategy,
    rebuild_strategy,
    resolve_strategy,
)
from contextdelta.providers import ProviderFailure, ProviderResponse
from contextdelta.rundir import RunManifest
from contextdelta.worlds import World

SUMMARY_STRATEGY = "semantic_summary"


class RecordedSummaries:
    """The summary model of a recorded episode: each call is answered with the next reply the current step recorded
    (``load`` sets them), and what the strategy asked is kept for comparison. No reply left is a failed call."""

    name = "recorded"
    is_mock = True  # a stand-in for the summary model; never a benchmark run's provider

    def __init__(self, model: str) -> None:
        self.model = model
        self.pending: list[SummaryCall] = []

    def load(self, calls: Sequence[SummaryCall]) -> None:
        self.pending = list(calls)

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        *,
        seed: int | None = None,
        model: str | None = None,
    ) -> ProviderResponse:
        if not self.pending:
            raise ProviderFailure("provider_error", "no recorded summary reply for this call")
        call = self.pending.pop(0)
        return ProviderResponse(
            content=call.content,
            usage=call.usage,
            latency_s=call.latency_s,
            queue_s=call.queue_s,
            retries=call.retries,
            model=call.response_model,
        )


@dataclass
class RunStrategies:
    """The re-derivable strategies of a run, rebuilt; and what could not be rebuilt, or changed since."""

    strategies: dict[str, ContextStrategy] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    """Deterministic strategies that could not be rebuilt: name -> why."""
    notes: list[str] = field(default_factory=list)
    summaries: RecordedSummaries | None = None
    """The recorded summary model ``semantic_summary`` was rebuilt with (None: the run has none)."""


def recorded_configs(manifest: RunManifest) -> list[StrategyDescription]:
    """The run's strategy descriptions: recorded, or for runs from before plug-ins derived from the built-in
    names and shared parameters."""
    if manifest.strategy_configs:
        return list(manifest.strategy_configs)
    params = manifest.strategy_params
    configs = []
    summaries = RecordedSummaries(manifest.provider.summary_model)
    for name in manifest.strategies:
        if name not in BUILTIN_STRATEGIES:
            continue
        _, description = describe_strategy(
            name,
            last_n=params.last_n,
            summary_trigger=params.summary_trigger,
            summary_keep=params.summary_keep,
            token_budget=params.token_budget,
            summary_provider=summaries,
            summary_model=manifest.provider.summary_model,
        )
        configs.append(description)
    return configs


def rebuild_run_strategies(manifest: RunManifest) -> RunStrategies:
    """Rebuild every deterministic strategy of ``manifest``, and ``semantic_summary`` with the recorded summary
    replies (see the module docstring)."""
    out = RunStrategies()
    for config in recorded_configs(manifest):
        if config.name == SUMMARY_STRATEGY and config.source.kind == "builtin":
            _rebuild_summary(manifest, config, out)
            continue
        if not config.deterministic:
            # nothing to compare a model's (or any outside) answer with: said, never passed over in silence
            out.notes.append(
                f"strategy {config.name!r} ({config.source.label()}) declares itself not deterministic: its contexts "
                "are not re-derived, only checked against the receipts' hash chain and their own hashes and counts"
            )
            continue
        if config.source.kind != "builtin":
            try:
                installed = resolve_strategy(config.spec).source
            except StrategyError:
                installed = None
            if installed is not None and installed.source_sha256 != config.source.source_sha256:
                out.notes.append(
                    f"plug-in strategy {config.name!r} ({config.source.label()}) changed since the run "
                    f"(installed: {installed.label()}, source hash {str(installed.source_sha256)[:12]}): its "
                    "contexts are re-derived with the installed code"
                )
        try:
            out.strategies[config.name] = rebuild_strategy(config)
        except StrategyError as exc:
            out.unavailable[config.name] = f"cannot re-derive its contexts: {exc}"
    return out


def _rebuild_summary(manifest: RunManifest, config: StrategyDescription, out: RunStrategies) -> None:
    summaries = RecordedSummaries(manifest.provider.summary_model)
    services = StrategyServices(summary_provider=summaries, summary_model=manifest.provider.summary_model)
    try:
        out.strategies[config.name] = rebuild_strategy(config, services)
    except StrategyError as exc:  # e.g. its summary prompt changed since: the hash chain still covers the steps
        out.notes.append(f"{config.name}'s contexts are not re-derived: {exc}")
        return
    out.summaries = summaries


CUT_SHORT_TERMINATIONS = frozenset({TerminationReason.HARNESS_ERROR, TerminationReason.CONTEXT_WINDOW_EXCEEDED})
"""How an episode whose last step sent nothing may end: a harness error (a strategy's broken context), or a history
the model made larger than a context may be."""

REDERIVE_TIMEOUT_S = 120.0
"""How long re-deriving one context may take when the manifest records no session's ``--timeout-s``."""


def rederive_limit(sessions: Sequence[Mapping[str, Any]]) -> float:
    """How long re-deriving one step's context may take: the longest ``--timeout-s`` of the run's sessions (what
    the agent loop gave a deterministic strategy), else :data:`REDERIVE_TIMEOUT_S`."""
    limits = [
        float(s["timeout_s"])
        for s in sessions
        if isinstance(s.get("timeout_s"), int | float)
        and not isinstance(s.get("timeout_s"), bool)
        and s["timeout_s"] > 0
    ]
    return max(limits, default=REDERIVE_TIMEOUT_S)


def context_divergences(
    trace: EpisodeTrace,
    strategy: ContextStrategy,
    world: World,
    summaries: RecordedSummaries | None = None,
    limit_s: float | None = None,
) -> list[tuple[str, str]]:
    """(field, detail) for every way the recorded contexts of ``trace`` differ from the re-derived ones;
    ``summaries``: the recorded summary model ``strategy`` was rebuilt with, if it calls one. Each transform is
    bounded by ``limit_s`` (:func:`bounded_transform`: a plug-in that blocks is left behind, never waited for)."""
    return anyio.run(_rederive, trace, strategy, world, summaries, limit_s)


async def _rederive(
    trace: EpisodeTrace,
    strategy: ContextStrategy,
    world: World,
    summaries: RecordedSummaries | None,
    limit_s: float | None,
) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if trace.strategy.config_hash != strategy.config_hash:
        found.append(
            (
                "trace.strategy.config_hash",
                f"recorded {trace.strategy.config_hash[:16]}, rebuilt {strategy.config_hash[:16]}",
            )
        )
    episode = strategy.for_episode(episode_context(world, trace.seed))
    history: list[Message] = list(trace.initial_messages)
    last = len(trace.steps) - 1
    for index, step in enumerate(trace.steps):
        where = f"steps[{step.step}]"
        recorded = step.context
        if recorded.canonical_message_count != len(history):
            found.append(
                (
                    f"{where}.context.canonical_message_count",
                    f"recorded {recorded.canonical_message_count}, the history holds {len(history)}",
                )
            )
        if content_hash(step.messages) != step.messages_sha256:
            found.append((f"{where}.messages_sha256", "does not hash the recorded messages"))
        # a step the loop cut short before sending (a harness error, a history over the cap) records no messages
        cut_short = not step.messages and index == last and trace.termination in CUT_SHORT_TERMINATIONS
        if step.messages and count_message_tokens(step.messages) != step.harness_prompt_tokens:
            found.append(
                (
                    f"{where}.harness_prompt_tokens",
                    f"recorded {step.harness_prompt_tokens}, the messages count {count_message_tokens(step.messages)}",
                )
            )
        recorded_calls = recorded.summary_calls
        if summaries is not None:
            summaries.load(recorded_calls)
        # a summary call that failed ends the episode at once: the step records the error and no call
        summary_failed = index == last and not step.messages and (step.error or "").startswith("summary call failed")
        try:
            result: Any = await bounded_transform(episode, history, limit_s)
        except ProviderFailure as exc:
            if summaries is None or not summary_failed:
                found.append((f"{where}.messages", f"re-deriving the context failed: {exc.message}"))
        except TimeoutError:
            if not cut_short:
                found.append((f"{where}.messages", f"re-deriving the context did not end within {limit_s:g} s"))
        except (Exception, SystemExit) as exc:  # a strategy failure is a finding, never a crash of verify
            if not cut_short:
                found.append((f"{where}.messages", f"re-deriving the context failed: {type(exc).__name__}: {exc}"))
        else:
            if summary_failed:
                found.append((f"{where}.error", "records a failed summary call the strategy does not make"))
            elif not cut_short and canonical_json(result.messages) != canonical_json(step.messages):
                found.append((f"{where}.messages", _first_difference(step.messages, result.messages)))
            for name, a, b in (
                ("removed", recorded.removed, result.removed),
                ("inserted", recorded.inserted, result.inserted),
            ):
                if a != b:
                    found.append((f"{where}.context.{name}", f"recorded {a}, re-derived {b}"))
            found.extend(_summary_differences(where, recorded_calls, result.summary_calls))
        if summaries is not None and summaries.pending:
            found.append(
                (
                    f"{where}.context.summary_calls",
                    f"{plural(len(summaries.pending), 'recorded summary call')} the strategy does not make here",
                )
            )
        history.extend(step.appended)
    return found


def _summary_differences(
    where: str, recorded: Sequence[SummaryCall], derived: Sequence[SummaryCall]
) -> list[tuple[str, str]]:
    """Each field of a summary call that does not re-derive (its request; the reply fields echo the record)."""
    found: list[tuple[str, str]] = []
    if len(recorded) != len(derived):
        found.append((f"{where}.context.summary_calls", f"{len(recorded)} recorded, the strategy makes {len(derived)}"))
    for i, (a, b) in enumerate(zip(recorded, derived, strict=False)):
        old, new = a.model_dump(mode="json"), b.model_dump(mode="json")
        for name in sorted(set(old) | set(new)):
            if canonical_json(old.get(name)) != canonical_json(new.get(name)):
                found.append(
                    (f"{where}.context.summary_calls[{i}].{name}", "does not re-derive from the recorded history")
                )
    return found


def external_divergences(trace: EpisodeTrace, strategy: str, manifest: RunManifest) -> list[tuple[str, str]]:
    """What an external agent's episode may record, and nothing else: no messages, no usage, no strategy work
    (what its model saw is unknown, and recorded as such); and no episode of another kind claims to be one."""
    found: list[tuple[str, str]] = []
    agent = manifest.external_agent
    external = trace.external
    if external is None:
        if agent is not None or strategy.startswith(EXTERNAL_PREFIX):
            found.append(("trace.external", "missing: the run's episodes are an external agent's"))
        return found
    if agent is None or external.agent != agent.agent or strategy != f"{EXTERNAL_PREFIX}{agent.agent}":
        found.append(
            ("trace.external.agent", f"{external.agent!r} (strategy {strategy}) is not the run's external agent")
        )
    if trace.provider != "external" or trace.strategy.name != strategy:
        found.append(("trace.provider", f"an external episode records provider {trace.provider!r}"))
    if external.model_view != "unknown":
        found.append(("trace.external.model_view", f"recorded {external.model_view!r}; it is always unknown"))
    empty = content_hash([])
    length = len(trace.initial_messages)
    for step in trace.steps:
        where = f"steps[{step.step}]"
        context = step.context
        if step.messages or step.messages_sha256 != empty or step.harness_prompt_tokens != 0:
            found.append((f"{where}.messages", "an external agent's step records messages, but none were seen"))
        if context.removed or context.inserted or context.summary_calls:
            found.append((f"{where}.context", "an external agent's step records strategy work, but there was none"))
        if context.canonical_message_count != length:
            found.append(
                (
                    f"{where}.context.canonical_message_count",
                    f"recorded {context.canonical_message_count}, the history holds {length}",
                )
            )
        if step.response is not None and step.response.usage is not None:
            found.append((f"{where}.response.usage", "an external agent's usage is never seen"))
        length += len(step.appended)
    return found


def _first_difference(recorded: Sequence[Message], derived: Sequence[Message]) -> str:
    for i, (a, b) in enumerate(zip(recorded, derived, strict=False)):
        if canonical_json(a) != canonical_json(b):
            return f"sent message {i} differs from the re-derived context ({a.get('role')} vs {b.get('role')})"
    return f"{len(recorded)} messages sent, the re-derived context has {len(derived)}"
