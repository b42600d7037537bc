"""Re-deriving what the model was sent: every step's context from the canonical history, for every
deterministic strategy of a run, built-in or plug-in (SPEC section 10).

The strategies are rebuilt from the manifest's ``strategy_configs`` (runs from before plug-ins: from the
built-in names and ``strategy_params``). A strategy that declares ``deterministic = False`` (``semantic_summary``,
or a plug-in that calls a model) is not re-derived here. A deterministic plug-in that is not installed cannot
be re-derived, and that is a divergence: verify never prints MATCH over contexts it could not check.

Per episode and step: the canonical history before the step is the initial messages plus every earlier step's
``appended`` messages; the rebuilt strategy (a fresh per-episode copy, bound to the same episode context as the
agent loop's) transforms it, and the result must equal the recorded ``messages``, ``removed`` and ``inserted``.
The recorded ``messages_sha256`` and ``harness_prompt_tokens`` must match the recorded messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio

from contextdelta.agent import EXTERNAL_PREFIX, EpisodeTrace, TerminationReason, episode_context
from contextdelta.canonical import canonical_json, content_hash
from contextdelta.context import (
    BUILTIN_STRATEGIES,
    ContextStrategy,
    Message,
    StrategyDescription,
    StrategyError,
    count_message_tokens,
    describe_strategy,
    rebuild_strategy,
    resolve_strategy,
)
from contextdelta.rundir import RunManifest
from contextdelta.worlds import World


@dataclass
class RunStrategies:
    """The deterministic strategies of a run, rebuilt; and what could not be rebuilt, or changed since."""

    strategies: dict[str, ContextStrategy] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    """Deterministic strategies that could not be rebuilt: name -> why."""
    notes: list[str] = field(default_factory=list)


def recorded_configs(manifest: RunManifest) -> list[StrategyDescription]:
    """The run's strategy descriptions: recorded, or for runs from before plug-ins derived from the built-in
    names and shared parameters (``semantic_summary`` left out: it needs a summary provider to be built)."""
    if manifest.strategy_configs:
        return list(manifest.strategy_configs)
    params = manifest.strategy_params
    configs = []
    for name in manifest.strategies:
        if name not in BUILTIN_STRATEGIES or name == "semantic_summary":
            continue
        _, description = describe_strategy(
            name,
            last_n=params.last_n,
            summary_trigger=params.summary_trigger,
            summary_keep=params.summary_keep,
            token_budget=params.token_budget,
        )
        configs.append(description)
    return configs


def rebuild_run_strategies(manifest: RunManifest) -> RunStrategies:
    """Rebuild every deterministic strategy of ``manifest`` (see the module docstring)."""
    out = RunStrategies()
    for config in recorded_configs(manifest):
        if not config.deterministic:
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


def context_divergences(trace: EpisodeTrace, strategy: ContextStrategy, world: World) -> list[tuple[str, str]]:
    """(field, detail) for every way the recorded contexts of ``trace`` differ from the re-derived ones."""
    return anyio.run(_rederive, trace, strategy, world)


async def _rederive(trace: EpisodeTrace, strategy: ContextStrategy, world: World) -> list[tuple[str, str]]:
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
        # a step the loop cut short with a harness error before sending records no messages
        cut_short = not step.messages and index == last and trace.termination is TerminationReason.HARNESS_ERROR
        if step.messages and count_message_tokens(step.messages) != step.harness_prompt_tokens:
            found.append(
                (
                    f"{where}.harness_prompt_tokens",
                    f"recorded {step.harness_prompt_tokens}, the messages count {count_message_tokens(step.messages)}",
                )
            )
        try:
            result = await episode.transform(list(history))
        except Exception as exc:  # a strategy failure is a finding, never a crash of verify
            if not cut_short:
                found.append((f"{where}.messages", f"re-deriving the context failed: {type(exc).__name__}: {exc}"))
        else:
            if not cut_short and canonical_json(result.messages) != canonical_json(step.messages):
                found.append((f"{where}.messages", _first_difference(step.messages, result.messages)))
            for name, a, b in (
                ("removed", recorded.removed, result.removed),
                ("inserted", recorded.inserted, result.inserted),
            ):
                if a != b:
                    found.append((f"{where}.context.{name}", f"recorded {a}, re-derived {b}"))
        history.extend(step.appended)
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
