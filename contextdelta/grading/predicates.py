"""End-state predicates: a dotted field path into one resource of the final world state, and a comparison.

Missing data: a predicate on a resource that does not exist in the final state is false whatever its op.
A field path that does not resolve inside an existing resource is false for the positive ops (``eq``, ``gt``,
``ge``, ``lt``, ``le``, ``in``, ``contains``, ``len_eq``) and true for the negative ones (``ne``, ``not_in``,
``not_contains``): a field that is absent does not hold the value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from contextdelta.canonical import canonical_json

_LIST_INDEX = re.compile(r"-?[0-9]+")


def list_index(segment: str) -> int | None:
    """The list index a path segment names (``0``, ``-1``: ASCII digits with at most one leading minus), or None.

    ``str.isdigit`` is not the test: it accepts ``²`` and other digits ``int()`` refuses (a crash on a task's path),
    and ``lstrip("-")`` accepts ``--1``."""
    return int(segment) if _LIST_INDEX.fullmatch(segment) else None


class _Missing:
    """Sentinel for a path that does not resolve."""

    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()

NEGATIVE_OPS = frozenset({"ne", "not_in", "not_contains"})


def resolve_path(resource: Mapping[str, Any], path: str) -> Any:
    """The value at ``path`` in one resource of ``World.state()`` (``{"version": v, "fields": {...}}``).

    ``version`` is the resource version; any other path is dotted into the fields, with integer segments
    indexing lists (``items.0.sku``). Returns :data:`MISSING` when the path does not resolve.
    """
    if path == "version":
        return resource.get("version", MISSING)
    node: Any = resource.get("fields", MISSING)
    for segment in path.split("."):
        if isinstance(node, Mapping):
            node = node.get(segment, MISSING)
        elif isinstance(node, list) and (index := list_index(segment)) is not None:
            node = node[index] if -len(node) <= index < len(node) else MISSING
        else:
            return MISSING
        if node is MISSING:
            return MISSING
    return node


def _same(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0 as numbers, but True is not 1 and key order never matters."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return set(a) == set(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(canonical_json(a) == canonical_json(b))


def _matches(element: Any, wanted: Any) -> bool:
    """A list element matches: equal, or for a dict wanted, the element holds every pair of it."""
    if isinstance(wanted, Mapping) and isinstance(element, Mapping):
        return all(k in element and _same(element[k], v) for k, v in wanted.items())
    return _same(element, wanted)


def _contains(actual: Any, wanted: Any) -> bool:
    if isinstance(actual, str) and isinstance(wanted, str):
        return wanted in actual
    if isinstance(actual, list):
        return any(_matches(element, wanted) for element in actual)
    if isinstance(actual, Mapping) and isinstance(wanted, str):
        return wanted in actual
    return False


def _ordered(test: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def compare(actual: Any, wanted: Any) -> bool:
        if isinstance(actual, bool) or isinstance(wanted, bool):
            return False
        numbers = isinstance(actual, int | float) and isinstance(wanted, int | float)
        strings = isinstance(actual, str) and isinstance(wanted, str)
        return (numbers or strings) and test(actual, wanted)

    return compare


def _in(actual: Any, wanted: Any) -> bool:
    return isinstance(wanted, list) and any(_same(actual, option) for option in wanted)


def _len_eq(actual: Any, wanted: Any) -> bool:
    return isinstance(actual, list | str | Mapping) and isinstance(wanted, int) and len(actual) == wanted


OPS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": _same,
    "ne": lambda a, w: not _same(a, w),
    "gt": _ordered(lambda a, w: a > w),
    "ge": _ordered(lambda a, w: a >= w),
    "lt": _ordered(lambda a, w: a < w),
    "le": _ordered(lambda a, w: a <= w),
    "in": _in,
    "not_in": lambda a, w: not _in(a, w),
    "contains": _contains,
    "not_contains": lambda a, w: not _contains(a, w),
    "len_eq": _len_eq,
}
"""Every predicate op. ``contains``: substring of a string, or a list element equal to the value (for a dict
value: an element holding all of its pairs), or a key of a mapping. ``in``/``not_in`` take a list of values."""


def evaluate(state: Mapping[str, Any], resource: str, path: str, op: str, value: Any) -> tuple[bool, Any]:
    """Whether ``resource``'s ``path`` satisfies ``op value`` in ``state``; also returns the actual value."""
    entry = state.get(resource)
    if entry is None:
        return False, MISSING
    actual = resolve_path(entry, path)
    if actual is MISSING:
        return op in NEGATIVE_OPS, MISSING
    return OPS[op](actual, value), actual
