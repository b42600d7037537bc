"""The world engine: versioned resources, tool execution, the freshness contract and hidden mutations.

Order of checks for one call (each stops the call with its outcome, and nothing changes):
unknown tool / bad JSON / schema violation / unknown resource -> ``invalid``;
write outside the principal's scope -> ``forbidden``;
freshness contract version mismatch -> ``blocked`` (before any business logic);
domain guard -> ``rejected``; otherwise ``executed`` and every written resource's version is bumped once.
Hidden mutations due after the call are applied before the next call runs.
"""

from __future__ import annotations

import copy
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel, ValidationError

from contextdelta.canonical import (
    MAX_JSON_DEPTH,
    canonical_json,
    has_lone_surrogate,
    json_depth,
    json_type,
    replace_lone_surrogates,
    sha256_hex,
)
from contextdelta.worlds.model import (
    MutationEvent,
    Outcome,
    ProtectionMode,
    ResourceModel,
    Scope,
    ToolEvent,
    ToolKind,
    resource_key,
)
from contextdelta.worlds.mutations import HiddenMutation
from contextdelta.worlds.tools import (
    GuardViolation,
    InvalidCall,
    ResourceRef,
    ToolContext,
    ToolFailure,
    ToolSpec,
    includes_arguments,
)

RESERVED_FIELDS = frozenset({"resource", "version"})


class WorldStateError(ValueError):
    """The initial state given to a world does not fit its resource models."""


@dataclass(frozen=True)
class WorldDefinition:
    """A world's fixed shape: resource kinds, tools, and which read tool refreshes each kind."""

    name: str
    models: tuple[type[ResourceModel], ...]
    tools: tuple[ToolSpec[Any], ...]
    read_tool_for: Mapping[str, str]
    needs_clock: bool = False

    def __post_init__(self) -> None:
        names = [t.name for t in self.tools]
        if len(names) != len(set(names)):
            raise ValueError(f"world {self.name}: duplicate tool names")
        for model in self.models:
            clash = RESERVED_FIELDS & set(model.model_fields)
            if clash:
                raise ValueError(f"{model.__name__} uses reserved field names {sorted(clash)}")
            if model.kind not in self.read_tool_for:
                raise ValueError(f"world {self.name}: no read tool declared for kind {model.kind}")

    @property
    def kinds(self) -> dict[str, type[ResourceModel]]:
        return {m.kind: m for m in self.models}

    def tool(self, name: str) -> ToolSpec[Any] | None:
        return next((t for t in self.tools if t.name == name), None)

    def tool_schemas(self, mode: ProtectionMode) -> list[dict[str, Any]]:
        """OpenAI tool schemas for a protection mode, in declaration order."""
        return [t.openai_schema(mode) for t in self.tools]


@dataclass
class ToolCallResult:
    """What one call produced: the text for the model, and the evaluator-only records."""

    content: str
    event: ToolEvent
    mutations: list[MutationEvent] = field(default_factory=list)


@dataclass
class _Observation:
    version: int
    seq: int


class World:
    """One episode's world. Pure: the same (state, mutations, mode, call sequence) gives the same logs."""

    def __init__(
        self,
        definition: WorldDefinition,
        initial_state: Mapping[str, Mapping[str, Mapping[str, Any]]],
        *,
        mode: ProtectionMode = ProtectionMode.UNPROTECTED,
        scope: Scope | None = None,
        mutations: Sequence[HiddenMutation] = (),
        clock: datetime | None = None,
    ) -> None:
        if definition.needs_clock and clock is None:
            raise WorldStateError(f"world {definition.name} needs a clock (the current time)")
        self.definition = definition
        self.mode = ProtectionMode(mode)
        self.scope = scope or Scope()
        self.clock = clock
        self._resources: dict[str, tuple[int, ResourceModel]] = {}
        kinds = definition.kinds
        for kind in sorted(initial_state):
            if kind not in kinds:
                raise WorldStateError(
                    f"{kind}: unknown resource kind for world {definition.name}; known: {sorted(kinds)}"
                )
            for resource_id in sorted(initial_state[kind]):
                try:
                    model = kinds[kind].model_validate(initial_state[kind][resource_id])
                except ValidationError as exc:
                    raise WorldStateError(f"{kind}.{resource_id}: {_first_error(exc)}") from exc
                self._resources[resource_key(definition.name, kind, resource_id)] = (1, model)
        self._state_hash: str | None = None  # of the current state; every change goes through _commit
        self._texts: dict[str, str] = {}  # each resource's canonical JSON, dropped when _commit changes it
        self._pending = list(mutations)
        self._trigger_args = {  # each after_tool_call trigger's declared arguments, as its tool matches them
            m.id: _interpreted(definition, m.trigger.after_tool_call.tool, m.trigger.after_tool_call.args)
            for m in self._pending
            if m.trigger.after_tool_call is not None
        }
        self._match_counts: dict[str, int] = {}
        self._observed: dict[str, _Observation] = {}
        self._step = 0
        self._index = 0
        self.events: list[ToolEvent] = []
        self.mutation_log: list[MutationEvent] = []

    # ---- state -------------------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.definition.name

    def state(self) -> dict[str, dict[str, Any]]:
        """The whole world as plain JSON data: ``{key: {"version": v, "fields": {...}}}``."""
        return {key: _dump(version, model) for key, (version, model) in sorted(self._resources.items())}

    def state_hash(self) -> str:
        """SHA-256 of the canonical `state`, computed once per state (a call that changes nothing reuses it), from
        each resource's canonical JSON, kept until the resource changes: ``content_hash(self.state())``."""
        if self._state_hash is None:
            texts = self._texts
            pieces = []
            for key in sorted(self._resources):
                text = texts.get(key)
                if text is None:
                    text = texts[key] = canonical_json(_dump(*self._resources[key]))
                pieces.append(f"{_json_string(key)}:{text}")
            self._state_hash = sha256_hex("{" + ",".join(pieces) + "}")
        return self._state_hash

    def version(self, key: str) -> int | None:
        entry = self._resources.get(key)
        return entry[0] if entry else None

    def observed_version(self, key: str) -> int | None:
        """The version of ``key`` the agent last saw in a tool result, if it saw one."""
        seen = self._observed.get(key)
        return seen.version if seen else None

    def tool_schemas(self) -> list[dict[str, Any]]:
        return self.definition.tool_schemas(self.mode)

    # ---- the agent's calls -------------------------------------------------------------------------------

    def begin_step(self, step: int) -> list[MutationEvent]:
        """Start agent step ``step`` (1-based) and apply the ``before_step`` mutations now due."""
        self._step = step
        self._index = 0
        due = [m for m in self._pending if m.trigger.before_step and m.trigger.before_step.step <= step]
        return [self._apply_mutation(m, after_seq=None) for m in due]

    def call(self, name: str, arguments: str | Mapping[str, Any] | None, call_id: str | None = None) -> ToolCallResult:
        """Run one tool call by the agent. Never raises: every failure is a JSON error result and an event."""
        name = replace_lone_surrogates(name)  # no tool's name has U+FFFD, and the event must encode as UTF-8
        seq = len(self.events)
        index = self._index
        self._index += 1
        before = self.state_hash()
        record: dict[str, Any] = {
            "seq": seq,
            "step": self._step,
            "index": index,
            "call_id": call_id,
            "tool": name,
            "arguments": _recorded(arguments),
            "kind": None,
            "resource": None,
            "observed_version": None,
            "observed_seq": None,
            "version_at_execution": None,
            "state_before": before,
        }
        try:
            content, outcome, code, shown, written = self._execute(name, arguments, record)
        except Exception as exc:  # a bug in a tool must not crash an episode; it is recorded, never hidden
            content = _error("tool_error", f"The tool failed unexpectedly: {type(exc).__name__}")
            outcome, code, shown, written = Outcome.INVALID, "tool_error", [], []
        first_seen = [k for k in shown if k not in self._observed]
        for key in shown:
            self._observed[key] = _Observation(self._resources[key][0], seq)
        event = ToolEvent(
            **record,
            resources_written=written,
            resources_observed=shown,
            outcome=outcome,
            error_code=code,
            result=content,
            state_after=self.state_hash(),
        )
        self.events.append(event)
        applied = self._after_call(event, first_seen)
        return ToolCallResult(content=content, event=event, mutations=applied)

    def _execute(
        self, name: str, arguments: str | Mapping[str, Any] | None, record: dict[str, Any]
    ) -> tuple[str, Outcome, str | None, list[str], list[str]]:
        spec = self.definition.tool(name)
        if spec is None:
            allowed = [t.name for t in self.definition.tools]
            return _error("unknown_tool", f"There is no tool named {name!r}.", allowed_tools=allowed), *_invalid(
                "unknown_tool"
            )
        record["kind"] = spec.kind
        parsed = _parse_arguments(arguments)
        if isinstance(parsed, str):
            return _error("malformed_arguments", parsed), *_invalid("malformed_arguments")
        record["arguments"] = parsed
        args_model = spec.args_model(self.mode)
        problems = _booleans_as_numbers(args_model, parsed)
        try:
            args = args_model.model_validate(parsed)
        except ValidationError as exc:
            named = {p["field"] for p in problems}
            problems = [
                {"field": ".".join(str(p) for p in e["loc"]) or "(arguments)", "problem": e["msg"]}
                for e in exc.errors(include_url=False, include_input=False)
                if ".".join(str(p) for p in e["loc"]) not in named
            ] + problems
        if problems:
            message = f"The arguments for {name} are not valid."
            return _error("invalid_arguments", message, problems=problems, parameters=_params(args_model)), *_invalid(
                "invalid_arguments"
            )
        # what the tool acts on ("1000" read as 1000, defaults filled): what graders and triggers compare
        record["validated_arguments"] = args.model_dump(mode="json")
        expected = getattr(args, "expected_version", None)
        record["expected_version"] = expected
        ctx = self._context(actor="agent")
        primary = spec.resource(args)
        key = None
        if primary is not None:
            key = resource_key(self.name, *primary)
            record["resource"] = key
            if key not in self._resources:
                kind, rid = primary
                model = self.definition.kinds[kind]
                return _error(
                    "unknown_resource", f"No {kind} with id {rid!r} exists.", known_ids=ctx.ids(model)[:20]
                ), *_invalid("unknown_resource")
            seen = self._observed.get(key)
            record["observed_version"] = seen.version if seen else None
            record["observed_seq"] = seen.seq if seen else None
            record["version_at_execution"] = self._resources[key][0]
            record["resource_states_before"] = {key: _dump(*self._resources[key])}
        if spec.kind is ToolKind.WRITE:
            plain = args.model_dump(mode="json", exclude={"expected_version"})
            refusal = self.scope.refusal(name, key, plain)
            if refusal is not None:
                return _error("forbidden", f"Not authorized: {refusal}."), Outcome.FORBIDDEN, "forbidden", [], []
            if expected is not None and key is not None and expected != self._resources[key][0]:
                kind = key.split("/")[1]
                read_tool = self.definition.read_tool_for[kind]
                message = (
                    f"Write refused: {key} is at version {self._resources[key][0]}, not the expected version "
                    f"{expected}. It changed since you last read it; call {read_tool} to see its current state "
                    "before deciding what to do."
                )
                content = _error(
                    "version_conflict",
                    message,
                    resource=key,
                    expected_version=expected,
                    current_version=self._resources[key][0],
                    read_tool=read_tool,
                )
                return content, Outcome.BLOCKED, "version_conflict", [], []
        try:
            raw = spec.function(ctx, args)
        except GuardViolation as exc:
            return _error(exc.code, exc.message, **exc.details), Outcome.REJECTED, exc.code, [], []
        except InvalidCall as exc:
            return _error(exc.code, exc.message, **exc.details), *_invalid(exc.code)
        for touched in sorted(ctx.staged):
            if touched in self._resources:
                record.setdefault("resource_states_before", {})[touched] = _dump(*self._resources[touched])
        written = self._commit(ctx)
        shown: list[str] = []
        rendered = self._render(raw, shown)
        return canonical_json(rendered), Outcome.EXECUTED, None, shown, written

    # ---- hidden mutations --------------------------------------------------------------------------------

    def _after_call(self, event: ToolEvent, first_seen: list[str]) -> list[MutationEvent]:
        applied: list[MutationEvent] = []
        arguments = event.interpreted_arguments()
        for mutation in list(self._pending):
            trigger = mutation.trigger
            if trigger.after_tool_call is not None and event.outcome is not Outcome.INVALID:
                if event.tool == trigger.after_tool_call.tool and includes_arguments(
                    arguments, self._trigger_args[mutation.id]
                ):
                    count = self._match_counts.get(mutation.id, 0) + 1
                    self._match_counts[mutation.id] = count
                    if count == trigger.after_tool_call.n:
                        applied.append(self._apply_mutation(mutation, after_seq=event.seq))
            elif trigger.after_observation is not None and trigger.after_observation.resource in first_seen:
                applied.append(self._apply_mutation(mutation, after_seq=event.seq))
        return applied

    def _apply_mutation(self, mutation: HiddenMutation, after_seq: int | None) -> MutationEvent:
        self._pending.remove(mutation)
        before = self.state_hash()
        ctx = self._context(actor=mutation.actor)
        outcome, code = Outcome.EXECUTED, None
        try:
            if mutation.set is not None:
                self._stage_patch(ctx, mutation.set.resource, mutation.set.fields)
            else:
                assert mutation.tool is not None
                spec = self.definition.tool(mutation.tool.name)
                if spec is None or spec.kind is not ToolKind.WRITE:
                    raise InvalidCall("unknown_tool", f"{mutation.tool.name} is not a write tool of {self.name}")
                try:
                    args = spec.args.model_validate(mutation.tool.args)
                except ValidationError as exc:
                    raise InvalidCall("invalid_arguments", _first_error(exc)) from exc
                spec.function(ctx, args)
        except GuardViolation as exc:
            outcome, code = Outcome.REJECTED, exc.code
        except ToolFailure as exc:
            outcome, code = Outcome.INVALID, exc.code
        keys = sorted(ctx.staged) if outcome is Outcome.EXECUTED else _mutation_targets(mutation)
        versions_before = {k: self.version(k) for k in keys}
        if outcome is Outcome.EXECUTED:
            self._commit(ctx)
        event = MutationEvent(
            mutation_id=mutation.id,
            actor=mutation.actor,
            step=self._step,
            after_seq=after_seq,
            trigger=mutation.trigger.kind,
            resources=keys,
            versions_before=versions_before,
            versions_after={k: self.version(k) for k in keys},
            outcome=outcome,
            error_code=code,
            state_before=before,
            state_after=self.state_hash(),
        )
        self.mutation_log.append(event)
        return event

    def _stage_patch(self, ctx: ToolContext, key: str, fields: Mapping[str, Any]) -> None:
        world, _, rest = key.partition("/")
        kind, _, resource_id = rest.partition("/")
        model = self.definition.kinds.get(kind)
        if world != self.name or model is None or key not in self._resources:
            raise InvalidCall("unknown_resource", f"{key} does not exist in world {self.name}")
        current = self._resources[key][1].model_dump(mode="json")
        try:
            patched = model.model_validate({**current, **fields})
        except ValidationError as exc:
            raise InvalidCall("invalid_patch", _first_error(exc)) from exc
        ctx.put(resource_id, patched)

    # ---- internals ---------------------------------------------------------------------------------------

    def _context(self, actor: str) -> ToolContext:
        return ToolContext(
            world=self.name,
            models=self.definition.kinds,
            stored=self._resources,
            clock=self.clock,
            actor=actor,
        )

    def _commit(self, ctx: ToolContext) -> list[str]:
        if ctx.staged:
            self._state_hash = None
        for key, model in sorted(ctx.staged.items()):
            self._texts.pop(key, None)
            previous = self._resources.get(key)
            self._resources[key] = ((previous[0] + 1) if previous else 1, model)
        return sorted(ctx.staged)

    def _render(self, value: Any, shown: list[str]) -> Any:
        if isinstance(value, ResourceRef):
            key = resource_key(self.name, value.kind, value.id)
            version, model = self._resources[key]
            if key not in shown:
                shown.append(key)
            return {"resource": key, "version": version, **model.model_dump(mode="json")}
        if isinstance(value, BaseModel):
            return value.model_dump(mode="json")
        if isinstance(value, dict):
            return {k: self._render(v, shown) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._render(v, shown) for v in value]
        if isinstance(value, datetime):
            return value.isoformat()
        return value


_json_string = json.encoder.encode_basestring  # a key as canonical JSON writes it


def _dump(version: int, model: ResourceModel) -> dict[str, Any]:
    return {"version": version, "fields": model.model_dump(mode="json")}


def _error(code: str, message: str, **details: Any) -> str:
    return canonical_json({"error": {"code": code, "message": message, **details}})


def _invalid(code: str) -> tuple[Outcome, str, list[str], list[str]]:
    return Outcome.INVALID, code, [], []


_UNPAIRED_SURROGATE = (
    "The arguments hold an unpaired UTF-16 surrogate (such as \\ud800), which is not a character; send a JSON "
    "object of valid Unicode text."
)
_TOO_DEEP = f"The arguments are nested more than {MAX_JSON_DEPTH} levels deep; send a JSON object of the parameters."
_NOT_FINITE = (
    "The arguments hold NaN, Infinity or a number too large for a float ({value}), which JSON does not allow; send "
    "finite numbers."
)


class _NotFinite(ValueError):
    """A number JSON cannot hold: NaN, Infinity, or one a float overflows to infinity (1e400)."""


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(text)
    return value


def _no_constant(name: str) -> Any:
    raise _NotFinite(name)


def _admits_bool(annotation: Any) -> bool:
    """Whether a parameter's type takes ``true``/``false`` as such (``bool``, a union holding it, any JSON value)."""
    if annotation is bool or annotation is Any:
        return True
    if get_origin(annotation) is Annotated:
        return _admits_bool(get_args(annotation)[0])
    return any(_admits_bool(a) for a in get_args(annotation))


def _booleans_as_numbers(args_model: type[BaseModel], parsed: Mapping[str, Any]) -> list[dict[str, str]]:
    """The parameters sent ``true``/``false`` whose type is not boolean. Pydantic's lax mode (which reads ``"1000"``
    as 1000 cents) also reads ``true`` as 1: ``amount_cents: true`` refunded a cent and ``expected_version: true``
    pinned version 1."""
    fields = args_model.model_fields
    return [
        {"field": key, "problem": f"{str(value).lower()} is a boolean, not a value of this parameter's type"}
        for key, value in parsed.items()
        if isinstance(value, bool) and key in fields and not _admits_bool(fields[key].annotation)
    ]


def _parse_arguments(arguments: str | Mapping[str, Any] | None) -> dict[str, Any] | str:
    """The arguments as a dict, or a message saying why they are not a JSON object.

    Empty text and no arguments at all are ``{}``; a JSON value that is not an object (``0``, ``[]``, ``null``) is
    never taken for one. A surrogate code point (text UTF-8 cannot encode, so neither recorded nor hashed), in the
    text or in a string the text decodes to, makes the arguments malformed, as does nesting past MAX_JSON_DEPTH or an
    integer longer than Python reads (``sys.get_int_max_str_digits()``)."""
    if arguments is None:
        return {}
    if isinstance(arguments, Mapping):
        given = dict(arguments)
        if has_lone_surrogate(given):
            return _UNPAIRED_SURROGATE
        try:
            canonical_json(given)  # refuses NaN and Infinity, as the text path does
        except ValueError:
            return _NOT_FINITE.format(value="NaN or Infinity")
        return given
    if has_lone_surrogate(arguments):
        return _UNPAIRED_SURROGATE
    text = arguments.strip()
    if not text:
        return {}
    try:
        # NaN and Infinity are not JSON, and a world holding one could no longer hash its state
        parsed = json.loads(text, parse_float=_finite, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        return f"The arguments are not valid JSON ({exc.msg} at position {exc.pos}); send a JSON object."
    except _NotFinite as exc:
        return _NOT_FINITE.format(value=exc)
    except RecursionError:
        return _TOO_DEEP
    except ValueError:  # the decoder's integer past Python's digit limit: valid JSON, but no value to read
        return (
            f"The arguments hold a number too long to read (an integer of more than {sys.get_int_max_str_digits():,} "
            "digits); send a JSON object of the parameters."
        )
    if not isinstance(parsed, dict):
        shown = text if len(text) <= 40 else f"{text[:40]}..."
        return (
            f"The arguments must be a JSON object, not {json_type(parsed)} ({shown}); send an object of the parameters."
        )
    if text.count("{") + text.count("[") > MAX_JSON_DEPTH and json_depth(parsed) > MAX_JSON_DEPTH:
        return _TOO_DEEP
    if has_lone_surrogate(parsed):  # "\ud800" written as an escape in the text
        return _UNPAIRED_SURROGATE
    return parsed


def _recorded(arguments: str | Mapping[str, Any] | None) -> dict[str, Any] | str:
    """The arguments as the event records them: as given, lone surrogates made U+FFFD (the record must encode)."""
    if isinstance(arguments, str):
        return replace_lone_surrogates(arguments)
    given = dict(arguments or {})
    return replace_lone_surrogates(copy.deepcopy(given)) if has_lone_surrogate(given) else given


def _params(model: type[BaseModel]) -> dict[str, Any]:
    return {name: (f.description or "") for name, f in model.model_fields.items()}


def _first_error(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in err["loc"]) or "(value)"
    return f"{where}: {err['msg']} (got {err.get('input')!r})"


def _interpreted(definition: WorldDefinition, tool: str, declared: Mapping[str, Any]) -> dict[str, Any]:
    spec = definition.tool(tool)
    return spec.declared_action(declared) if spec is not None else dict(declared)


def _mutation_targets(mutation: HiddenMutation) -> list[str]:
    return [mutation.set.resource] if mutation.set is not None else []
