"""One registry for every context strategy: the built-ins and plug-ins, found and built the same way.

A strategy is named on the command line (``--strategies``) in one of three ways:

- a built-in name (:data:`BUILTIN_STRATEGIES`);
- the name of an installed plug-in: an entry point in the group ``contextdelta.strategies`` whose name is the
  strategy's name and whose object is a *factory*;
- ``package.module:factory``: a factory by import path (the strategy's name is the factory's ``name``
  attribute, e.g. the class attribute of a :class:`~contextdelta.context.StrategyBase` subclass).

A factory is a callable that takes the strategy's parameters as keyword arguments (from
``--strategy-param NAME.KEY=VALUE``) and returns a :class:`~contextdelta.context.ContextStrategy`; one that
declares a ``services`` parameter also gets :class:`StrategyServices` (the summary model, for strategies that
call one). The strategy it returns declares ``name`` and ``deterministic``.

Every built strategy is described by a :class:`StrategyDescription` (recorded in the run manifest): its
factory parameters, its resolved parameters and configuration hash, whether it is deterministic, and its
:class:`StrategySource`: for a plug-in the distribution name and version and a SHA-256 of its package's Python
sources, so a resumed run can refuse a plug-in that changed (:func:`source_changes`).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, cast

import anyio
from pydantic import BaseModel, ConfigDict, Field

from contextdelta.canonical import sha256_hex
from contextdelta.context.base import ContextStrategy, EpisodeContext
from contextdelta.context.full_history import FullHistory
from contextdelta.context.last_n import LastN
from contextdelta.context.semantic_summary import SemanticSummary
from contextdelta.context.token_budget_trim import DEFAULT_TOKEN_BUDGET, TokenBudgetTrim
from contextdelta.context.tool_result_clearing import ToolResultClearing
from contextdelta.context.typed_state_digest import TypedStateDigest
from contextdelta.context.validation import (
    EpisodeLoopProvider,
    call_transform,
    describe_problems,
    detached,
    transform_problems,
)
from contextdelta.providers import ChatProvider, shorten

ENTRY_POINT_GROUP = "contextdelta.strategies"
"""The entry-point group plug-in distributions register their strategy factories in."""

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
"""Strategy names: they are part of episode run ids (``task.strategy.mode.rN``), so no dots or colons."""

StrategyFactory = Callable[..., ContextStrategy]
"""``factory(**params) -> ContextStrategy`` (plus ``services=`` when it declares that parameter)."""


PLUGIN_ERRORS = (Exception, SystemExit)
"""What running a plug-in's code (importing it, its factory, its properties) may raise that ends the plug-in, not
the command: any error, and ``sys.exit()`` (which would otherwise end the command without a word)."""


class StrategyError(ValueError):
    """A strategy that cannot be found or built; the message names the strategy and what to fix."""


@dataclass(frozen=True)
class StrategyServices:
    """What the harness offers a factory besides its parameters."""

    summary_provider: ChatProvider | None = None
    """The summary model's provider (the agent's endpoint), for strategies that call a model."""
    summary_model: str | None = None
    """The summary model name (None: the provider's own model)."""


class StrategySource(BaseModel):
    """Where a strategy's code comes from. Built-ins are covered by the harness hash; plug-ins carry their own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["builtin", "entry_point", "module"] = Field(
        description="builtin, entry_point (group contextdelta.strategies) or module (package.module:factory)."
    )
    target: str = Field(description="The factory as ``package.module:attribute``.")
    distribution: str | None = Field(default=None, description="Installed distribution that provides it.")
    version: str | None = Field(default=None, description="That distribution's version.")
    source_sha256: str | None = Field(
        default=None, description="SHA-256 over (path, SHA-256) of the plug-in package's .py files; null: built-in."
    )

    def label(self) -> str:
        """``distribution version`` or the target, for messages."""
        if self.distribution:
            return f"{self.distribution} {self.version or '(no version)'}"
        return self.target


class StrategyDescription(BaseModel):
    """One strategy of a run, as configured: enough to rebuild it (``verify``) and to notice a change (resume)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The strategy's name (--strategies).")
    factory_params: dict[str, Any] = Field(description="The keyword arguments the factory was called with.")
    params: dict[str, Any] = Field(description="The strategy's own ``params`` (what its config hash covers).")
    config_hash: str = Field(description="SHA-256 of the strategy's configuration (name and parameters).")
    deterministic: bool = Field(
        description="Whether the same history always gives the same context (verify re-derives those)."
    )
    source: StrategySource = Field(description="Where the strategy's code comes from.")

    @property
    def spec(self) -> str:
        """What to pass to :func:`create_strategy` to build it again."""
        return self.source.target if self.source.kind == "module" else self.name


@dataclass(frozen=True)
class RegisteredStrategy:
    """A strategy found by name or path, not yet built."""

    name: str
    factory: StrategyFactory
    source: StrategySource


# ---- built-ins --------------------------------------------------------------------------------------------


def _semantic_summary(services: StrategyServices, trigger: int = 6, keep: int = 3) -> SemanticSummary:
    if services.summary_provider is None:
        raise StrategyError("semantic_summary needs a summary provider")
    return SemanticSummary(services.summary_provider, model=services.summary_model, trigger=trigger, keep=keep)


_BUILTINS: dict[str, tuple[StrategyFactory, str]] = {
    "full_history": (FullHistory, "contextdelta.context.full_history:FullHistory"),
    "last_n": (LastN, "contextdelta.context.last_n:LastN"),
    "semantic_summary": (_semantic_summary, "contextdelta.context.semantic_summary:SemanticSummary"),
    "typed_state_digest": (TypedStateDigest, "contextdelta.context.typed_state_digest:TypedStateDigest"),
    "tool_result_clearing": (ToolResultClearing, "contextdelta.context.tool_result_clearing:ToolResultClearing"),
    "token_budget_trim": (TokenBudgetTrim, "contextdelta.context.token_budget_trim:TokenBudgetTrim"),
}

BUILTIN_STRATEGIES: tuple[str, ...] = tuple(_BUILTINS)
"""The built-in strategy names, in the order reports list them."""

WINDOWED_STRATEGIES = ("semantic_summary", "typed_state_digest", "tool_result_clearing")
"""Built-ins that share the compaction window (``--summary-trigger`` / ``--summary-keep``)."""


def builtin_params(
    name: str,
    *,
    last_n: int = 3,
    summary_trigger: int = 6,
    summary_keep: int = 3,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
) -> dict[str, Any]:
    """The factory parameters a built-in gets from the run's shared settings (empty for a plug-in)."""
    if name == "last_n":
        return {"n": last_n}
    if name in WINDOWED_STRATEGIES:
        return {"trigger": summary_trigger, "keep": summary_keep}
    if name == "token_budget_trim":
        return {"budget": token_budget}
    return {}


# ---- finding ----------------------------------------------------------------------------------------------


def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def installed_plugins() -> list[str]:
    """Names of the strategies installed through the entry-point group (built-in names left out), sorted."""
    return sorted(n for n in _entry_points() if n not in _BUILTINS)


def _known() -> str:
    plugins = installed_plugins()
    text = "built-in: " + ", ".join(BUILTIN_STRATEGIES)
    return text + ("; installed plug-ins: " + ", ".join(plugins) if plugins else "; no plug-ins installed")


def resolve_strategy(spec: str) -> RegisteredStrategy:
    """The strategy ``spec`` names: a built-in, an installed plug-in, or ``package.module:factory``."""
    spec = spec.strip()
    if spec in _BUILTINS:
        factory, target = _BUILTINS[spec]
        return RegisteredStrategy(spec, factory, StrategySource(kind="builtin", target=target))
    if ":" in spec:
        return _from_path(spec)
    entry = _entry_points().get(spec)
    if entry is None:
        raise StrategyError(f"unknown strategy {spec!r} ({_known()}; or give package.module:factory)")
    try:
        factory = entry.load()
    except PLUGIN_ERRORS as exc:  # a broken plug-in must not crash (or silently end) the command line
        raise StrategyError(f"plug-in strategy {spec!r} ({entry.value}) does not load: {_failure(exc)}") from exc
    if not NAME_PATTERN.match(spec):
        raise StrategyError(f"plug-in entry point {spec!r}: a strategy name is lowercase letters, digits and '_'")
    dist = entry.dist
    module = sys.modules.get(entry.module)
    return RegisteredStrategy(
        spec,
        factory,
        StrategySource(
            kind="entry_point",
            target=entry.value,
            distribution=dist.name if dist is not None else None,
            version=dist.version if dist is not None else None,
            source_sha256=_package_hash(module) if module is not None else None,
        ),
    )


def _from_path(spec: str) -> RegisteredStrategy:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise StrategyError(f"strategy {spec!r}: write a plug-in path as package.module:factory")
    try:
        module = importlib.import_module(module_name)
    except PLUGIN_ERRORS as exc:  # any import failure is the plug-in's, reported on one line
        raise StrategyError(f"strategy {spec!r}: cannot import {module_name}: {_failure(exc)}") from exc
    factory: Any = module
    for part in attribute.split("."):
        factory = getattr(factory, part, None)
    if not callable(factory):
        raise StrategyError(f"strategy {spec!r}: {module_name} has no callable {attribute!r}")
    name = getattr(factory, "name", None)
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise StrategyError(
            f"strategy {spec!r}: the factory needs a `name` attribute of lowercase letters, digits and '_' "
            f"(got {name!r}); a StrategyBase subclass has it as a class attribute"
        )
    if name in _BUILTINS:
        raise StrategyError(f"strategy {spec!r} is named {name!r}, the name of a built-in strategy; rename it")
    distribution, version = _distribution_of(module_name)
    return RegisteredStrategy(
        name,
        factory,
        StrategySource(
            kind="module",
            target=spec,
            distribution=distribution,
            version=version,
            source_sha256=_package_hash(module),
        ),
    )


def _distribution_of(module_name: str) -> tuple[str | None, str | None]:
    top = module_name.split(".")[0]
    names = sorted(metadata.packages_distributions().get(top, []))
    if not names:
        return None, None
    try:
        return names[0], metadata.version(names[0])
    except metadata.PackageNotFoundError:
        return names[0], None


def _package_hash(module: ModuleType) -> str | None:
    """SHA-256 over (relative path, content hash) of every .py file of the module's top-level package (or of
    the module file alone when it is not in a package): what decides the plug-in's behaviour."""
    top = sys.modules.get(module.__name__.split(".")[0], module)
    paths = list(getattr(top, "__path__", []))
    if paths:
        root = Path(paths[0])
        files = sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
    elif getattr(top, "__file__", None):
        root = Path(str(top.__file__)).parent
        files = [Path(str(top.__file__))]
    else:
        return None
    parts = [f"{p.relative_to(root).as_posix()}\n{sha256_hex(p.read_bytes())}" for p in files]
    return sha256_hex("\n".join(parts))


# ---- building ---------------------------------------------------------------------------------------------


def build_strategy(
    registered: RegisteredStrategy, params: Mapping[str, Any], services: StrategyServices | None = None
) -> tuple[ContextStrategy, StrategyDescription]:
    """Call the factory with ``params`` and check what it returns; the strategy and its description."""
    name = registered.name
    try:
        signature = inspect.signature(registered.factory)
    except (TypeError, ValueError):
        signature = None
    kwargs = dict(params)
    if signature is not None:
        accepted = [p for p in signature.parameters.values() if p.name not in ("self", "services")]
        open_ended = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted)
        names = [p.name for p in accepted if p.kind is not inspect.Parameter.VAR_KEYWORD]
        unknown = sorted(set(kwargs) - set(names))
        if unknown and not open_ended:
            takes = ", ".join(names) if names else "no parameters"
            raise StrategyError(f"strategy {name!r} has no parameter {unknown[0]!r} (it takes: {takes})")
        if "services" in signature.parameters:
            kwargs["services"] = _plugin_services(registered, services or StrategyServices())
    strategy = _call_factory(registered, kwargs, params)
    _check_strategy(name, strategy)
    again = _call_factory(registered, kwargs, params)
    _check_strategy(name, again)
    if again.config_hash != strategy.config_hash:
        # workers, resume and verify rebuild the strategy from its recorded parameters: it must come out the same
        raise StrategyError(
            f"strategy {name!r}: its factory built it twice from the same parameters with different params "
            f"({strategy.params} and {again.params}); a factory must be a pure function of its parameters (draw "
            "nothing at random in it, and read no clock or file that changes)"
        )
    description = StrategyDescription(
        name=name,
        factory_params=dict(params),
        params=strategy.params,
        config_hash=strategy.config_hash,
        deterministic=strategy.deterministic,
        source=registered.source,
    )
    return strategy, description


def _plugin_services(registered: RegisteredStrategy, services: StrategyServices) -> StrategyServices:
    """``services`` as a plug-in gets them: its transform runs in a thread of its own, so its summary provider is
    one whose calls run on the episode's loop (:class:`EpisodeLoopProvider`); a built-in gets them as they are."""
    provider = services.summary_provider
    if registered.source.kind == "builtin" or provider is None or isinstance(provider, EpisodeLoopProvider):
        return services
    return dataclasses.replace(services, summary_provider=cast(ChatProvider, EpisodeLoopProvider(provider)))


def _call_factory(registered: RegisteredStrategy, kwargs: dict[str, Any], params: Mapping[str, Any]) -> Any:
    name = registered.name
    try:
        return registered.factory(**kwargs)
    except StrategyError:
        raise
    except (TypeError, ValueError) as exc:
        raise StrategyError(shorten(f"strategy {name!r} rejected its parameters {dict(params)}: {exc}")) from exc
    except PLUGIN_ERRORS as exc:  # a plug-in's own failure, reported on one line
        raise StrategyError(shorten(f"strategy {name!r}: its factory failed: {type(exc).__name__}: {exc}")) from exc


_ABSENT = object()


def _check_strategy(name: str, strategy: object) -> None:
    # looked up without running a property (config_hash hashes params, which may not be JSON: named below)
    missing = [
        member
        for member in ("name", "params", "config_hash", "for_episode", "transform")
        if inspect.getattr_static(strategy, member, _ABSENT) is _ABSENT
    ]
    if missing:
        raise StrategyError(
            f"strategy {name!r}: its factory returned {type(strategy).__name__}, which lacks {', '.join(missing)} "
            "(implement contextdelta.context.ContextStrategy, e.g. by subclassing StrategyBase)"
        )
    declared = _member(name, strategy, "name")
    if declared != name:
        raise StrategyError(f"strategy {name!r}: its factory returned a strategy named {declared!r}")
    deterministic = _member(name, strategy, "deterministic")
    if not isinstance(deterministic, bool):
        raise StrategyError(
            f"strategy {name!r}: declare `deterministic = True` (transform is a pure function of the history) or "
            f"`deterministic = False` on {type(strategy).__name__}; got {deterministic!r}"
        )
    try:
        params = strategy.params  # type: ignore[attr-defined]
        json.dumps(params, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise StrategyError(f"strategy {name!r}: its params are not plain JSON data: {exc}") from exc
    except PLUGIN_ERRORS as exc:  # a plug-in's params property that fails
        raise StrategyError(
            shorten(f"strategy {name!r}: reading its params failed: {type(exc).__name__}: {exc}")
        ) from exc
    config_hash = _member(name, strategy, "config_hash")
    if not isinstance(config_hash, str):
        raise StrategyError(
            f"strategy {name!r}: its config_hash is {type(config_hash).__name__}, not a string (StrategyBase's is "
            "the SHA-256 of its name and params)"
        )


def _member(name: str, strategy: object, member: str) -> Any:
    """``strategy.member``, read once; a property of a plug-in that fails is named, not a traceback."""
    try:
        return getattr(strategy, member, None)
    except PLUGIN_ERRORS as exc:
        raise StrategyError(
            shorten(f"strategy {name!r}: reading its {member} failed: {type(exc).__name__}: {exc}")
        ) from exc


def _failure(exc: BaseException) -> str:
    """What went wrong when loading a plug-in, on one line (``sys.exit(3)`` says SystemExit: 3)."""
    return shorten(f"{type(exc).__name__}: {exc}" if isinstance(exc, SystemExit) else str(exc))


PROBE_HISTORY: tuple[dict[str, Any], ...] = (
    {"role": "system", "content": "You are an operations agent."},
    {"role": "user", "content": "Check order A-1 and tell me its status."},
)
"""The smallest history (the two pinned messages), which every episode's first step is transformed from."""

PROBE_TIMEOUT_S = 30.0
"""How long the probe waits for a deterministic strategy's transform of :data:`PROBE_HISTORY`."""


def probe_strategy(strategy: ContextStrategy, timeout_s: float | None = None) -> str | None:
    """What is wrong with a deterministic strategy's context of the smallest history (every episode's first step),
    or None when it is a valid one. ``timeout_s`` is the run's per-call timeout (``--timeout-s``), which bounds
    each of its transforms: the probe waits no longer than it (nor than :data:`PROBE_TIMEOUT_S`), so a transform
    every episode would time out in is refused too. A strategy that fails here would fail every episode as a harness
    error, so a run refuses it before it starts; one that is not deterministic is not probed (its transform may
    call a model). The probe's copy is bound to an empty :class:`EpisodeContext` (seed None: no episode); it runs in
    the driver."""
    if not getattr(strategy, "deterministic", False):
        return None
    history = detached(PROBE_HISTORY)
    limit, why = PROBE_TIMEOUT_S, ""
    if isinstance(timeout_s, int | float) and not isinstance(timeout_s, bool) and 0 < timeout_s < PROBE_TIMEOUT_S:
        limit, why = float(timeout_s), " (the run's --timeout-s, which bounds every transform of the run)"

    async def probe() -> object:
        with anyio.fail_after(limit):
            return await call_transform(strategy.for_episode(EpisodeContext()), detached(history))

    outcome: list[object] = []
    failure: list[BaseException] = []
    took: list[float] = []

    def run() -> None:
        started = time.monotonic()
        try:
            outcome.append(anyio.run(probe))
        except BaseException as exc:  # reported below, whatever the plug-in raised
            failure.append(exc)
        took.append(time.monotonic() - started)

    # in a thread of its own: a transform that blocks (time.sleep, a busy loop) is left behind, not waited for
    thread = threading.Thread(target=run, name="strategy-probe", daemon=True)
    thread.start()
    thread.join(limit + 1)
    # a transform that blocks past the limit and then returns meets no checkpoint where fail_after could cancel it:
    # the time it took says it was too slow
    slow = not took or took[0] > limit
    if thread.is_alive() or slow or (failure and isinstance(failure[0], TimeoutError)):
        return f"its transform did not return within {limit:g} s{why}"
    if failure:
        return f"its transform failed: {type(failure[0]).__name__}: {failure[0]}"
    problems = transform_problems(history, outcome[0])
    return describe_problems(problems) if problems else None


def create_strategy(
    spec: str,
    *,
    last_n: int = 3,
    summary_trigger: int = 6,
    summary_keep: int = 3,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
    summary_provider: ChatProvider | None = None,
    summary_model: str | None = None,
    params: Mapping[str, Any] | None = None,
) -> ContextStrategy:
    """The strategy ``spec`` (built-in name, plug-in name or ``package.module:factory``), configured.

    A built-in takes its parameters from the shared settings (``last_n``, the compaction window
    ``summary_trigger``/``summary_keep`` of the windowed strategies, ``token_budget``); ``params`` overrides
    single keys (``--strategy-param``). ``semantic_summary`` needs ``summary_provider``.
    """
    return describe_strategy(
        spec,
        last_n=last_n,
        summary_trigger=summary_trigger,
        summary_keep=summary_keep,
        token_budget=token_budget,
        summary_provider=summary_provider,
        summary_model=summary_model,
        params=params,
    )[0]


def describe_strategy(
    spec: str,
    *,
    last_n: int = 3,
    summary_trigger: int = 6,
    summary_keep: int = 3,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
    summary_provider: ChatProvider | None = None,
    summary_model: str | None = None,
    params: Mapping[str, Any] | None = None,
) -> tuple[ContextStrategy, StrategyDescription]:
    """As :func:`create_strategy`, with the strategy's :class:`StrategyDescription`."""
    registered = resolve_strategy(spec)
    merged = builtin_params(
        registered.name,
        last_n=last_n,
        summary_trigger=summary_trigger,
        summary_keep=summary_keep,
        token_budget=token_budget,
    )
    merged.update(params or {})
    services = StrategyServices(summary_provider=summary_provider, summary_model=summary_model)
    return build_strategy(registered, merged, services)


def configure_strategies(
    specs: Sequence[str],
    *,
    last_n: int = 3,
    summary_trigger: int = 6,
    summary_keep: int = 3,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    services: StrategyServices | None = None,
) -> list[tuple[ContextStrategy, StrategyDescription]]:
    """Every strategy of a run, built and described, in the order given.

    Each spec is resolved (:func:`resolve_strategy`); a built-in gets its shared parameters, then
    ``overrides[name]`` (``--strategy-param``) is applied. Raises StrategyError for an unknown or broken
    strategy, two specs with one name, or an override naming no strategy of the run.
    """
    overrides = overrides or {}
    built: list[tuple[ContextStrategy, StrategyDescription]] = []
    for spec in specs:
        registered = resolve_strategy(spec)
        if any(d.name == registered.name for _, d in built):
            raise StrategyError(f"--strategies: {registered.name!r} is listed twice")
        params = builtin_params(
            registered.name,
            last_n=last_n,
            summary_trigger=summary_trigger,
            summary_keep=summary_keep,
            token_budget=token_budget,
        )
        params.update(overrides.get(registered.name, {}))
        built.append(build_strategy(registered, params, services))
    names = [d.name for _, d in built]
    for name in overrides:
        if name not in names:
            raise StrategyError(
                f"--strategy-param {name}.*: {name!r} is not a strategy of this run ({', '.join(names)})"
            )
    return built


def rebuild_strategy(description: StrategyDescription, services: StrategyServices | None = None) -> ContextStrategy:
    """The strategy a recorded description describes, built again; StrategyError when it is not available or
    no longer has the recorded configuration hash."""
    strategy, again = build_strategy(resolve_strategy(description.spec), description.factory_params, services)
    if again.config_hash != description.config_hash:
        raise StrategyError(
            f"strategy {description.name!r} rebuilt from its recorded parameters has params {again.params}, "
            f"not the recorded {description.params}"
        )
    return strategy


# ---- parameters and changes -------------------------------------------------------------------------------


class _NotANumber(Exception):
    """``NaN``, ``Infinity`` or ``-Infinity`` in a JSON value (Python's reader takes them; JSON has none)."""


def _not_a_number(constant: str) -> Any:
    raise _NotANumber(constant)


def parse_strategy_params(items: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``--strategy-param NAME.KEY=VALUE`` values as ``{name: {key: value}}``.

    VALUE is read as JSON when it parses (``3``, ``true``, ``[1, 2]``, ``"text"``) and as plain text otherwise.
    Raises StrategyError naming the malformed item.
    """
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        target, sep, raw = item.partition("=")
        name, dot, key = target.strip().rpartition(".")
        if not sep or not dot or not name or not key.isidentifier():
            raise StrategyError(f"--strategy-param {item!r}: write NAME.KEY=VALUE, e.g. last_n.n=5")
        try:
            value: Any = json.loads(raw, parse_constant=_not_a_number)
        except _NotANumber:
            raise StrategyError(
                f"--strategy-param {item!r}: {raw.strip()} is not a finite number; give a number, true/false, a "
                "string or a JSON list/object"
            ) from None
        except ValueError:
            value = raw
        if key in out.setdefault(name, {}):
            raise StrategyError(f"--strategy-param {item!r}: {name}.{key} is given twice")
        out[name][key] = value
    return out


def source_changes(recorded: Sequence[StrategyDescription]) -> list[str]:
    """How the plug-ins of a run differ from what is installed now, one line each naming the plug-in (empty
    when none changed). Built-ins are left out: the harness hash covers them."""
    changes: list[str] = []
    for description in recorded:
        old = description.source
        if old.kind == "builtin":
            continue
        label = f"plug-in strategy {description.name!r} ({old.label()})"
        try:
            new = resolve_strategy(description.spec).source
        except StrategyError as exc:
            changes.append(f"{label}: no longer available ({exc})")
            continue
        for field, before, after in (
            ("distribution", old.distribution, new.distribution),
            ("version", old.version, new.version),
            ("target", old.target, new.target),
            ("source hash", old.source_sha256, new.source_sha256),
        ):
            if before != after:
                changes.append(f"{label}: {field} changed (run has {before!r}, now {after!r})")
    return changes
