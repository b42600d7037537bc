"""Tool definitions: one declaration per tool, from which validation and every OpenAI schema derive."""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Annotated, Any, Generic, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model

from contextdelta.canonical import canonical_json
from contextdelta.worlds.model import ProtectionMode, ResourceModel, ToolKind

VERSION_ARGUMENT = "expected_version"
"""The freshness contract's precondition argument of every write: never part of what a write does."""


M = TypeVar("M", bound=ResourceModel)
A = TypeVar("A", bound=BaseModel)


MatchedEmail = Annotated[str, AfterValidator(str.lower)]
"""An email parameter the tool only matches case-insensitively (a filter, an uninvite): read in lower case, so
``validated_arguments`` holds what the tool compares, and ``Ana@x`` and ``ana@x`` are one argument."""


class ToolArgs(BaseModel):
    """Base class of tool parameter models: unknown arguments are an error the model can read."""

    model_config = ConfigDict(extra="forbid")


class ToolFailure(Exception):
    """A tool call that cannot run; carries the machine-readable code and a message for the model."""

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details


class GuardViolation(ToolFailure):
    """A domain guard refused the call (outcome ``rejected``)."""


class InvalidCall(ToolFailure):
    """The call is malformed or names something that does not exist (outcome ``invalid``)."""


@dataclass(frozen=True)
class ResourceRef:
    """A placeholder in a tool's return value, rendered after commit as the resource's current view."""

    kind: str
    id: str


def private_copy(resource: M) -> M:
    """A deep copy of a resource that shares nothing with it: dumped and validated again by pydantic-core, about a
    third of the CPU of ``model_copy(deep=True)`` (``copy.deepcopy`` in Python). Equal to the original: a resource
    holds plain data only (tests/worlds/test_world.py checks every resource of every task)."""
    return type(resource).model_validate(resource.model_dump())


@dataclass
class ToolContext:
    """What a tool implementation sees: a transaction over the world's resources.

    Changes are staged and only committed when the tool returns normally, so a guard violation or an
    invalid call can never leave partial state behind.
    """

    world: str
    models: dict[str, type[ResourceModel]]
    stored: dict[str, tuple[int, ResourceModel]]
    clock: datetime | None
    actor: str
    staged: dict[str, ResourceModel] = field(default_factory=dict)

    def key(self, kind: str, resource_id: str) -> str:
        return f"{self.world}/{kind}/{resource_id}"

    def exists(self, model: type[ResourceModel], resource_id: str) -> bool:
        key = self.key(model.kind, resource_id)
        return key in self.staged or key in self.stored

    def get(self, model: type[M], resource_id: str) -> M:
        """A private copy of the resource; raises InvalidCall when the id is unknown."""
        key = self.key(model.kind, resource_id)
        if key in self.staged:
            current = self.staged[key]
        elif key in self.stored:
            current = self.stored[key][1]
        else:
            raise InvalidCall(
                "unknown_resource",
                f"No {model.kind} with id {resource_id!r} exists.",
                known_ids=self.ids(model)[:20],
            )
        assert isinstance(current, model)
        return private_copy(current)

    def ids(self, model: type[ResourceModel]) -> list[str]:
        """Every id of a kind, sorted."""
        prefix = f"{self.world}/{model.kind}/"
        keys = {k for k in self.stored if k.startswith(prefix)} | {k for k in self.staged if k.startswith(prefix)}
        return sorted(k[len(prefix) :] for k in keys)

    def all(self, model: type[M]) -> Iterator[tuple[str, M]]:
        """Every resource of a kind as (id, copy), sorted by id."""
        for resource_id in self.ids(model):
            yield resource_id, self.get(model, resource_id)

    def put(self, resource_id: str, resource: ResourceModel) -> ResourceRef:
        """Stage a write; the version bumps once per committed call."""
        self.staged[self.key(resource.kind, resource_id)] = private_copy(resource)
        return ResourceRef(resource.kind, resource_id)

    def next_id(self, model: type[ResourceModel], prefix: str) -> str:
        """A deterministic new id: prefix plus one more than the count of existing resources of the kind."""
        n = len(self.ids(model)) + 1
        while self.exists(model, f"{prefix}{n}"):
            n += 1
        return f"{prefix}{n}"

    def ref(self, model: type[ResourceModel], resource_id: str) -> ResourceRef:
        """Show this resource in the result (validated to exist)."""
        if not self.exists(model, resource_id):
            self.get(model, resource_id)  # raises the unknown-resource error
        return ResourceRef(model.kind, resource_id)

    def now(self) -> datetime:
        if self.clock is None:
            raise RuntimeError(f"world {self.world} has no clock")
        return self.clock


ToolFunction = Callable[[ToolContext, Any], Any]
ResourceLocator = Callable[[Any], tuple[str, str] | None]


@dataclass(frozen=True)
class ToolSpec(Generic[A]):
    """One tool, defined once: name, description, parameters, read or write, and the resource it addresses."""

    name: str
    description: str
    kind: ToolKind
    args: type[A]
    function: Callable[[ToolContext, A], Any]
    resource: Callable[[A], tuple[str, str] | None]
    """(kind, id) of the primary resource: the one a write's ``expected_version`` refers to."""
    effect: tuple[str, ...] = ()
    """A write's effect key: the parameters that decide what it does to the world, in declaration order. Free text
    (a reason, a note, a title) and the ``expected_version`` precondition are not part of it, so two calls that
    agree on these are the same action (SPEC section 8, ``no_duplicate_action``). Empty for a read."""
    effect_form: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    """How the tool acts on its effect arguments where that is coarser than their JSON (a list it reads as a set
    of case-insensitive emails): the effect arguments in that form. None: as they are."""

    def __post_init__(self) -> None:
        fields = set(self.args.model_fields)
        unknown = [name for name in self.effect if name not in fields]
        if unknown:
            raise ValueError(f"tool {self.name}: effect key names {unknown}, which are not parameters of the tool")
        if self.kind is ToolKind.WRITE and not self.effect:
            raise ValueError(
                f"tool {self.name}: a write tool needs an effect key (the parameters that decide its effect)"
            )
        if self.kind is ToolKind.READ and self.effect:
            raise ValueError(f"tool {self.name}: a read tool has no effect key")

    def effect_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The effect key's part of a call's arguments (``interpreted_arguments()``): what decides whether two
        writes are the same action. A parameter the arguments lack (a record of raw arguments that omitted one) is
        left out."""
        effect = {name: arguments[name] for name in self.effect if name in arguments}
        return effect if self.effect_form is None else self.effect_form(effect)

    def validated_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """A call's arguments as the tool acts on them, ``expected_version`` aside: validated by its parameter model
        and dumped as JSON (``"1000"`` read as 1000, defaults filled), as the world records a call's
        ``validated_arguments``. Arguments the model refuses are given back as they are: no call acted on them."""
        plain = {name: value for name, value in arguments.items() if name != VERSION_ARGUMENT}
        try:
            return self.args.model_validate(plain).model_dump(mode="json")
        except ValidationError:
            return plain

    def declared_action(self, declared: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments a declared action (a trigger's ``after_tool_call``, a prohibited action) is matched on: its
        declared values as the tool interprets them (`interpret`), without a write's parameters outside its effect
        key: free text such as a refund's reason names no other action, so a call worded otherwise still matches."""
        ignored = set(self.args.model_fields) - set(self.effect) if self.kind is ToolKind.WRITE else set()
        return {name: value for name, value in self.interpret(declared).items() if name not in ignored}

    def interpret(self, declared: Mapping[str, Any]) -> dict[str, Any]:
        """Declared argument values (a trigger's, a prohibited action's) as this tool interprets them: each one
        validated by its parameter's type and constraints and dumped as JSON, as ``validated_arguments`` records a
        call's. A name the tool does not take, or a value its parameter refuses, is kept as given: no validated
        call holds it, so it matches none."""
        interpreted: dict[str, Any] = {}
        for name, value in declared.items():
            adapter = self._parameter_adapters.get(name)
            try:
                interpreted[name] = (
                    value if adapter is None else adapter.dump_python(adapter.validate_python(value), mode="json")
                )
            except ValidationError:
                interpreted[name] = value
        return interpreted

    @cached_property
    def effect_form_description(self) -> str | None:
        """How the tool reads its effect arguments where that is coarser than their JSON (``effect_form``'s
        docstring, on one line); None where they count as they are."""
        if self.effect_form is None:
            return None
        return " ".join((inspect.getdoc(self.effect_form) or self.effect_form.__name__).split())

    @cached_property
    def resource_pattern(self) -> str | None:
        """The primary resource a call addresses, spelled with the parameters its id comes from (``order/{order_id}``,
        ``setting/{environment}:{key}``); None for a tool that addresses none (a listing)."""
        named: dict[str, Any] = {name: f"{{{name}}}" for name in self.args.model_fields}
        placeholders = self.args.model_construct(**named)
        found = self.resource(placeholders)
        return None if found is None else f"{found[0]}/{found[1]}"

    @cached_property
    def _parameter_adapters(self) -> dict[str, TypeAdapter[Any]]:
        adapters: dict[str, TypeAdapter[Any]] = {}
        for name, info in self.args.model_fields.items():
            annotation: Any = info.annotation  # with its constraints (PositiveInt's gt=0) and validators
            adapters[name] = TypeAdapter(Annotated[(annotation, *info.metadata)] if info.metadata else annotation)
        return adapters

    def args_model(self, mode: ProtectionMode) -> type[BaseModel]:
        """The parameter model for a protection mode (the contract adds ``expected_version`` to writes)."""
        return self._contract_args if self._needs_version(mode) else self.args

    def _needs_version(self, mode: ProtectionMode) -> bool:
        return self.kind is ToolKind.WRITE and mode is ProtectionMode.FRESHNESS_CONTRACT

    @cached_property
    def _contract_args(self) -> type[BaseModel]:
        return create_model(
            f"{self.args.__name__}WithVersion",
            __base__=self.args,
            expected_version=(
                int,
                Field(
                    description="The version of the resource you last read. The write is refused if the "
                    "resource has changed since then; read it again to get the current version.",
                ),
            ),
        )

    def openai_schema(self, mode: ProtectionMode) -> dict[str, Any]:
        """The OpenAI ``tools`` entry for this tool in a protection mode (a fresh copy each call)."""
        # parsed from its JSON text: a fresh copy for every episode at a fifth of copy.deepcopy's CPU
        return json.loads(self._schema_texts[ProtectionMode(mode)])  # type: ignore[no-any-return]

    @cached_property
    def _schema_texts(self) -> dict[ProtectionMode, str]:
        return {mode: json.dumps(schema) for mode, schema in self._schemas.items()}

    @cached_property
    def _schemas(self) -> dict[ProtectionMode, dict[str, Any]]:
        # Deriving a JSON schema through pydantic costs ~1 ms per tool; every episode step needs them.
        return {
            mode: {
                "type": "function",
                "function": {
                    "name": self.name,
                    "description": self.description,
                    "parameters": _clean_schema(self.args_model(mode).model_json_schema()),
                },
            }
            for mode in ProtectionMode
        }


def action_key(tool: str, arguments: Mapping[str, Any], spec: ToolSpec[Any] | None) -> str:
    """What makes two writes the same action (SPEC section 8, ``no_duplicate_action``), as canonical JSON: the tool
    and the arguments of its effect key (``ToolSpec.effect_arguments``: not free text such as a refund's reason,
    not ``expected_version``). ``arguments`` are as the tool interpreted them (a call's ``validated_arguments``, or
    ``ToolSpec.validated_arguments`` of raw ones). Without a spec (a tool the world does not have), every argument
    but ``expected_version``. The one definition the graders and the scripted policies share."""
    if spec is not None and spec.effect:
        compared = spec.effect_arguments(arguments)
    else:
        compared = {name: value for name, value in arguments.items() if name != VERSION_ARGUMENT}
    return canonical_json([tool, compared])


def includes_arguments(arguments: Mapping[str, Any], declared: Mapping[str, Any]) -> bool:
    """Whether ``arguments`` hold every declared name with the same JSON value (``1`` is not ``true``, nor ``1.0``).

    Compare a call's ``interpreted_arguments()`` with declared values its tool has ``interpret``ed: both as the
    tool acted on them, so ``"1000"`` and ``1000`` for an integer parameter are one value."""
    return all(
        name in arguments and canonical_json(arguments[name]) == canonical_json(value)
        for name, value in declared.items()
    )


def tool(
    kind: ToolKind,
    resource: Callable[[Any], tuple[str, str] | None] | None = None,
    effect: tuple[str, ...] = (),
    effect_form: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> Callable[[Callable[[ToolContext, A], Any]], ToolSpec[A]]:
    """Declare a tool from a function ``(ctx, args: ArgsModel) -> result``; its docstring is the description.
    A write declares its ``effect`` key (``ToolSpec.effect``): the parameters that decide what it does."""

    def wrap(function: Callable[[ToolContext, A], Any]) -> ToolSpec[A]:
        hints = inspect.get_annotations(function, eval_str=True)
        args_model = hints["args"]
        description = inspect.cleandoc(function.__doc__ or "")
        if not description:
            raise ValueError(f"tool {function.__name__} needs a docstring: it is the model-facing description")
        return ToolSpec(
            name=function.__name__,
            description=description,
            kind=kind,
            args=args_model,
            function=function,
            resource=resource or (lambda _args: None),
            effect=effect,
            effect_form=effect_form,
        )

    return wrap


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Inline $defs and drop pydantic's titles so the schema reads well to a model and is stable."""
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                target = defs[node["$ref"].split("/")[-1]]
                return walk(copy.deepcopy(target))
            return {k: walk(v) for k, v in node.items() if k not in ("title", "$defs")}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    cleaned: dict[str, Any] = walk(schema)
    cleaned.setdefault("properties", {})
    cleaned["additionalProperties"] = False
    return cleaned
