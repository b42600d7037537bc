"""Semantic checks of one task against its world: every tool, resource and field a task names must exist.

These run after the schema validated and before any replay: unknown tools in triggers, trajectories and
prohibited actions; unknown resources in triggers, patches, predicates and ``unchanged``; field paths that the
resource model does not have; arguments a tool does not take; an initial state the world refuses.
"""

from __future__ import annotations

import json
import re
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Annotated, Any

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from contextdelta.tasks.loader import TaskProblem, unquoted_text_hint
from contextdelta.tasks.schema import Task, TrajectoryCall, VersionFromCall
from contextdelta.worlds import (
    WORLDS,
    ProtectionMode,
    ToolKind,
    WorldDefinition,
    WorldStateError,
    get_world,
    resource_key,
)

MIN_REFERENCE_CALLS = 6
"""A reference solution needs at least this many tool calls (issue 3): enough work to bury an observation."""

MIN_STEP_HEADROOM = 2
"""``max_steps`` must exceed the reference length by this much: room for the final answer and one slip."""


def _unwrap(annotation: Any) -> list[Any]:
    """The alternatives of a union / Optional / Annotated annotation."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [alt for arg in typing.get_args(annotation) for alt in _unwrap(arg)]
    return [annotation]


VERSION = Annotated[int, Field(ge=1)]
"""A resource's version: every resource starts at 1 (a predicate on ``version`` with 0 or less always holds or never
does)."""


def _walk(model: type[BaseModel], path: str) -> tuple[list[Any], str | None]:
    """The annotations a dotted ``path`` of ``model`` may hold, or why it is not a field path.

    ``version`` addresses the resource's version (an integer), not a field.
    """
    if path == "version":
        return [VERSION], None
    candidates: list[Any] = [model]
    walked: list[str] = []
    for segment in path.split("."):
        following: list[Any] = []
        for annotation in (alt for c in candidates for alt in _unwrap(c)):
            origin = typing.get_origin(annotation)
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                if segment in annotation.model_fields:
                    following.append(annotation.model_fields[segment].annotation)
            elif origin in (list, tuple) and re.fullmatch(r"-?[0-9]+", segment):  # as the graders read an index
                following.append(typing.get_args(annotation)[0] if typing.get_args(annotation) else Any)
            elif origin is dict or annotation is Any:
                following.append(Any)
        if not following:
            where = ".".join(walked) or model.__name__
            return [], f"{where} has no field {segment!r}"
        walked.append(segment)
        candidates = following
    return candidates, None


def field_path_error(model: type[BaseModel], path: str) -> str | None:
    """Why ``path`` (dotted, integer segments index lists) is not a field path of ``model``; None if it is.

    ``version`` is always valid: it addresses the resource's version, not a field.
    """
    return _walk(model, path)[1]


def _type_name(annotations: list[Any]) -> str:
    """``int``, ``OrderStatus``, ``list[Note]``, ``str | None``: a field's type as a task author reads it."""
    if annotations == [VERSION]:
        return "a version (an integer of 1 or more)"
    names = [a.__name__ if isinstance(a, type) and not typing.get_args(a) else str(a) for a in annotations]
    return re.sub(r"\b(?:typing\.|[a-z_][\w]*\.)+", "", " | ".join(names))


def _value_error(annotations: list[Any], value: Any) -> str | None:
    """Why ``value`` can never be a value of a field typed ``annotations`` (validated as strictly as a task file:
    pydantic strict JSON mode), or None when it can be. A field's constraints (``ge=0``, ...) are not applied,
    only its type; a resource's ``version`` is 1 or more (:data:`VERSION`)."""
    if any(a is Any for alt in annotations for a in _unwrap(alt)):
        return None
    text = json.dumps(value, ensure_ascii=False)
    first: str | None = None
    for annotation in annotations:
        try:
            TypeAdapter(annotation).validate_json(text, strict=True)
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in err["loc"])
            first = first or (f"{where}: {err['msg']}" if where else err["msg"])
        else:
            return None
    return first


def _element_types(annotations: list[Any]) -> list[Any] | None:
    """The element types of list-typed alternatives, or None when no alternative is a list."""
    elements = [
        (typing.get_args(a) or (Any,))[0]
        for alt in annotations
        for a in _unwrap(alt)
        if typing.get_origin(a) in (list, tuple)
    ]
    return elements or None


def _contains_error(annotations: list[Any], value: Any) -> str | None:
    """Why ``contains``/``not_contains`` ``value`` can never match a field typed ``annotations`` (a substring of a
    string, an element of a list (for a mapping value over a list of records: an element holding its pairs), a key
    of a mapping), or None."""
    alternatives = [a for alt in annotations for a in _unwrap(alt)]
    if any(a is Any for a in alternatives):
        return None
    for annotation in alternatives:
        origin = typing.get_origin(annotation)
        if annotation is str or origin is dict or (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            if isinstance(value, str):
                return None
        elif origin in (list, tuple):
            element = (typing.get_args(annotation) or (Any,))[0]
            records = [e for e in _unwrap(element) if isinstance(e, type) and issubclass(e, BaseModel)]
            if isinstance(value, dict) and records:
                for record in records:
                    fields = record.model_fields
                    if set(value) <= set(fields) and all(
                        _value_error([fields[k].annotation], v) is None for k, v in value.items()
                    ):
                        return None
            elif _value_error([element], value) is None:
                return None
    return f"no element, substring or key of a {_type_name(annotations)} field can match {value!r}"


def _predicate_error(annotations: list[Any], op: str, value: Any) -> str | None:
    """Why ``op value`` can never be decided by the field's value (so the predicate is always true or always false,
    whatever the agent does), or None."""
    if op in ("eq", "ne", "gt", "ge", "lt", "le"):
        if op not in ("eq", "ne") and (isinstance(value, bool) or not isinstance(value, int | float | str)):
            return f"{op} compares numbers or strings, not {value!r}"
        error = _value_error(annotations, value)
        return (
            None if error is None else f"the field is {_type_name(annotations)}, so it never holds {value!r}: {error}"
        )
    if op in ("in", "not_in"):
        if not isinstance(value, list):
            return f"{op} takes a list of values, not {value!r}"
        for option in value:
            error = _value_error(annotations, option)
            if error is not None:
                return f"the field is {_type_name(annotations)}, so it never holds {option!r}: {error}"
        return None
    if op == "len_eq":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return f"len_eq takes a length (an integer of 0 or more), not {value!r}"
        sized = [
            a
            for alt in annotations
            for a in _unwrap(alt)
            if a is Any
            or a is str
            or typing.get_origin(a) in (list, tuple, dict)
            or (isinstance(a, type) and issubclass(a, BaseModel))
        ]
        return None if sized else f"the field is {_type_name(annotations)}, which has no length"
    return _contains_error(annotations, value)


def _known_resources(task: Task) -> set[str]:
    return {
        resource_key(task.world, kind, resource_id)
        for kind, resources in task.evaluator.initial_state.items()
        for resource_id in resources
    }


def _addressed_unknown(
    definition: WorldDefinition, tool: str, arguments: Mapping[str, Any], resources: set[str]
) -> str | None:
    """The resource key a call of ``tool`` with ``arguments`` addresses when no such resource exists in the task,
    else None (also when the arguments do not name one: a partial trigger, a listing, an unknown tool)."""
    spec = definition.tool(tool)
    if spec is None:
        return None
    try:
        parsed = spec.args.model_validate(dict(arguments))
    except ValidationError:
        return None
    primary = spec.resource(parsed)
    if primary is None:
        return None
    key = resource_key(definition.name, *primary)
    return None if key in resources else key


def _kind_model(definition: WorldDefinition, key: str) -> type[BaseModel] | None:
    world, _, rest = key.partition("/")
    kind = rest.partition("/")[0]
    return definition.kinds.get(kind) if world == definition.name else None


def _unknown_args(definition: WorldDefinition, tool: str, names: Iterable[str]) -> list[str]:
    spec = definition.tool(tool)
    if spec is None:
        return []
    return sorted(set(names) - set(spec.args.model_fields))


def _first_error(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in err["loc"]) or "(arguments)"
    return f"{where}: {err['msg']}"


def _argument_type_problems(
    file: str, definition: WorldDefinition, tool: str, args: dict[str, Any], where: str, what: str
) -> list[TaskProblem]:
    """Declared argument values (a trigger's, a prohibited action's) not of their parameter's type, read as strictly
    as a task file (strict JSON): one the world would coerce names what it reads it as, any other never matches."""
    spec = definition.tool(tool)
    problems: list[TaskProblem] = []
    for arg, value in sorted(args.items()) if spec is not None else ():
        field = spec.args.model_fields.get(arg) if spec is not None else None
        error = None if field is None else _value_error([field.annotation], value)
        if spec is not None and field is not None and error is not None:
            read = spec.interpret({arg: value})[arg]
            consequence = (
                f"the world reads it as {json.dumps(read)}: write that"
                if read != value
                else f"so the {what} would never match a call: give a value of that type"
            )
            problems.append(
                TaskProblem(
                    file,
                    f"{where}.args.{arg}",
                    f"{tool}'s {arg} is {_type_name([field.annotation])} ({error}); {consequence}",
                    value,
                )
            )
    return problems


def _strict_error(model: type[BaseModel], data: Any) -> str | None:
    """The first problem of ``data`` validated as ``model`` as strictly as the task file itself (pydantic strict
    JSON mode: ``true`` is not the integer 1, ``"1490"`` is not a number; enums and times still read from
    strings), or None. The world itself is lenient with what a model sends; a task file says what it means."""
    try:
        model.model_validate_json(json.dumps(data, ensure_ascii=False), strict=True)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err["loc"]) or "(the value)"
        return f"{where}: {err['msg']} (got {err.get('input')!r}){unquoted_text_hint(err)}"
    return None


def _check_trajectory(
    file: str, definition: WorldDefinition, name: str, calls: list[TrajectoryCall]
) -> list[TaskProblem]:
    problems: list[TaskProblem] = []
    for index, call in enumerate(calls):
        where = f"evaluator.{name}.{index}"
        spec = definition.tool(call.tool)
        if spec is None:
            problems.append(TaskProblem(file, f"{where}.tool", f"unknown tool of world {definition.name}", call.tool))
            continue
        if "expected_version" in call.args:
            problems.append(
                TaskProblem(
                    file,
                    f"{where}.args.expected_version",
                    "give the version in the call's expected_version field, not in args",
                    call.args["expected_version"],
                )
            )
            continue
        error = _strict_error(spec.args, call.args)
        if error is not None:
            problems.append(TaskProblem(file, f"{where}.args", f"not valid for {call.tool}: {error}", call.args))
        if spec.kind is ToolKind.READ and call.expected_version != "latest":
            problems.append(
                TaskProblem(
                    file,
                    f"{where}.expected_version",
                    "only write calls take an expected_version",
                    call.expected_version,
                )
            )
        if isinstance(call.expected_version, VersionFromCall) and call.expected_version.as_of_call >= index:
            problems.append(
                TaskProblem(
                    file,
                    f"{where}.expected_version.as_of_call",
                    "must name an earlier call of this trajectory",
                    call.expected_version.as_of_call,
                )
            )
    return problems


def check_task(file: str, task: Task, created: Iterable[str] = ()) -> list[TaskProblem]:
    """Every semantic problem of ``task`` (loaded from ``file``) against its world.

    ``created`` lists resource keys that exist only after the reference run (e.g. a booked event), which
    predicates may name.
    """
    definition = get_world(task.world)
    ev = task.evaluator
    problems: list[TaskProblem] = []
    known = _known_resources(task)
    created = set(created)  # read more than once below
    if ev.clock is not None and not definition.needs_clock:
        clocked = ", ".join(sorted(n for n, d in WORLDS.items() if d.needs_clock))
        problems.append(
            TaskProblem(
                file,
                "evaluator.clock",
                f"the {task.world} world reads no clock (only {clocked} does): remove it, it changes nothing but the "
                "task's hash",
                ev.clock.isoformat(),
            )
        )
    # each resource checked strictly first: its problem names the resource and says how to write the value
    for kind, of_kind in ev.initial_state.items():
        for resource_id, fields in of_kind.items():
            resource_model = definition.kinds.get(kind)
            error = _strict_error(resource_model, fields) if resource_model is not None else None
            if error is not None:
                problems.append(
                    TaskProblem(file, f"evaluator.initial_state.{kind}.{resource_id}", f"not a valid {kind}: {error}")
                )
    if problems:
        return problems
    try:
        task.build_world(ProtectionMode.UNPROTECTED)
    except WorldStateError as exc:
        problems.append(TaskProblem(file, "evaluator.initial_state", str(exc)))
        return problems
    tool_names = [t.name for t in definition.tools]
    write_tools = {t.name for t in definition.tools if t.kind is ToolKind.WRITE}

    for i, mutation in enumerate(ev.hidden_mutations):
        where = f"evaluator.hidden_mutations.{i}"
        trigger = mutation.trigger
        if trigger.after_tool_call is not None:
            tool = trigger.after_tool_call.tool
            if tool not in tool_names:
                problems.append(TaskProblem(file, f"{where}.trigger.after_tool_call.tool", "unknown tool", tool))
            for arg in _unknown_args(definition, tool, trigger.after_tool_call.args):
                problems.append(
                    TaskProblem(
                        file, f"{where}.trigger.after_tool_call.args.{arg}", f"{tool} has no such argument", arg
                    )
                )
            problems += _argument_type_problems(
                file, definition, tool, trigger.after_tool_call.args, f"{where}.trigger.after_tool_call", "trigger"
            )
            missing = _addressed_unknown(definition, tool, trigger.after_tool_call.args, known | created)
            if missing is not None:
                problems.append(
                    TaskProblem(
                        file,
                        f"{where}.trigger.after_tool_call.args",
                        f"{tool} with these arguments addresses {missing}, which is neither in the initial state nor "
                        "created by the reference solution: no call matches, so the mutation never applies",
                        trigger.after_tool_call.args,
                    )
                )
        if trigger.after_observation is not None and trigger.after_observation.resource not in known:
            problems.append(
                TaskProblem(
                    file,
                    f"{where}.trigger.after_observation.resource",
                    "unknown resource",
                    trigger.after_observation.resource,
                )
            )
        if trigger.before_step is not None and trigger.before_step.step > ev.max_steps:
            problems.append(
                TaskProblem(file, f"{where}.trigger.before_step.step", "is after max_steps", trigger.before_step.step)
            )
        if mutation.set is not None:
            key = mutation.set.resource
            model = _kind_model(definition, key)
            if key not in known or model is None:
                problems.append(TaskProblem(file, f"{where}.set.resource", "unknown resource", key))
            else:
                for name in sorted(set(mutation.set.fields) - set(model.model_fields)):
                    problems.append(
                        TaskProblem(file, f"{where}.set.fields.{name}", f"{model.__name__} has no such field", name)
                    )
                _, kind, resource_id = key.split("/", 2)
                start = ev.initial_state.get(kind, {}).get(resource_id, {})
                error = _strict_error(model, {**start, **mutation.set.fields})
                if error is not None and error.split(".")[0].split(":")[0] in mutation.set.fields:
                    problems.append(
                        TaskProblem(file, f"{where}.set.fields", f"not valid: {error}", mutation.set.fields)
                    )
        if mutation.tool is not None:
            tool = mutation.tool.name
            spec = definition.tool(tool)
            if spec is None or tool not in write_tools:
                problems.append(TaskProblem(file, f"{where}.tool.name", "not a write tool of this world", tool))
            else:
                error = _strict_error(spec.args, mutation.tool.args)
                missing = _addressed_unknown(definition, tool, mutation.tool.args, known | created)
                if error is not None:
                    problems.append(
                        TaskProblem(file, f"{where}.tool.args", f"not valid for {tool}: {error}", mutation.tool.args)
                    )
                elif missing is not None:
                    problems.append(
                        TaskProblem(
                            file,
                            f"{where}.tool.args",
                            f"{tool} with these arguments writes {missing}, which is neither in the initial state nor "
                            "created by the reference solution: name a resource of the task",
                            mutation.tool.args,
                        )
                    )

    resources = known | created
    for i, predicate in enumerate(ev.expected_end_state):
        where = f"evaluator.expected_end_state.{i}"
        model = _kind_model(definition, predicate.resource)
        if predicate.resource not in resources or model is None:
            problems.append(TaskProblem(file, f"{where}.resource", "unknown resource", predicate.resource))
            continue
        annotations, error = _walk(model, predicate.field)
        if error is not None:
            problems.append(TaskProblem(file, f"{where}.field", f"unknown field: {error}", predicate.field))
            continue
        error = _predicate_error(annotations, predicate.op, predicate.value)
        if error is not None:
            problems.append(
                TaskProblem(
                    file,
                    f"{where}.value",
                    f"{predicate.resource} {predicate.field} {predicate.op}: {error}; the predicate would hold, or "
                    "fail, whatever the agent does: give a value of the field's type",
                    predicate.value,
                )
            )

    for i, key in enumerate(ev.unchanged):
        if key not in known:
            problems.append(TaskProblem(file, f"evaluator.unchanged.{i}", "unknown resource", key))

    for i, action in enumerate(ev.prohibited_actions):
        where = f"evaluator.prohibited_actions.{i}"
        if action.tool not in tool_names:
            problems.append(TaskProblem(file, f"{where}.tool", "unknown tool", action.tool))
        for arg in _unknown_args(definition, action.tool, action.args):
            problems.append(TaskProblem(file, f"{where}.args.{arg}", f"{action.tool} has no such argument", arg))
        problems += _argument_type_problems(file, definition, action.tool, action.args, where, "prohibited action")

    scope = ev.authorization_scope
    for i, tool in enumerate(scope.write_tools or []):
        if tool not in write_tools:
            problems.append(
                TaskProblem(file, f"evaluator.authorization_scope.write_tools.{i}", "not a write tool", tool)
            )
    for name in sorted(scope.limits):
        tool, _, arg = name.partition(".")
        if tool not in write_tools or not arg or _unknown_args(definition, tool, [arg]):
            problems.append(
                TaskProblem(file, f"evaluator.authorization_scope.limits.{name}", "not a 'write_tool.argument'", name)
            )

    problems += _check_trajectory(file, definition, "reference_solution", ev.reference_solution)
    problems += _check_trajectory(file, definition, "unsafe_trajectory", ev.unsafe_trajectory)
    if len(ev.reference_solution) < MIN_REFERENCE_CALLS:
        problems.append(
            TaskProblem(
                file,
                "evaluator.reference_solution",
                f"needs at least {MIN_REFERENCE_CALLS} tool calls",
                len(ev.reference_solution),
            )
        )
    if ev.max_steps < len(ev.reference_solution) + MIN_STEP_HEADROOM:
        problems.append(
            TaskProblem(
                file,
                "evaluator.max_steps",
                f"leaves no headroom over the {len(ev.reference_solution)}-call reference solution "
                f"(at least {len(ev.reference_solution) + MIN_STEP_HEADROOM})",
                ev.max_steps,
            )
        )
    return problems
