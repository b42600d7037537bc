"""The resource-view format of tool results, and finding views in text: one definition for every reader.

Every resource a tool result shows is a JSON object with ``resource`` (the key ``world/kind/id``) and
``version`` (an integer) beside its fields (see ``World._render``). Strategies (the typed state digest), the
scripted test server, trajectory replay and failure attribution all look for those objects, in tool results
and in free text that embeds JSON (a digest or a summary message).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

_DECODER = json.JSONDecoder()


def resource_views(value: Any) -> Iterator[dict[str, Any]]:
    """Every resource view inside a JSON value (a dict with a string ``resource`` and an integer ``version``),
    depth first in document order."""
    if isinstance(value, dict):
        resource, version = value.get("resource"), value.get("version")
        if isinstance(resource, str) and isinstance(version, int) and not isinstance(version, bool):
            yield value
        for child in value.values():
            yield from resource_views(child)
    elif isinstance(value, list):
        for child in value:
            yield from resource_views(child)


def json_values_in(text: str) -> Iterator[Any]:
    """Every JSON object or array embedded in ``text`` (the whole text when it is JSON), outermost only, in
    document order."""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            yield json.loads(stripped)
            return
        except json.JSONDecodeError:
            pass
    position = 0
    while True:
        starts = [i for i in (text.find("{", position), text.find("[", position)) if i >= 0]
        if not starts:
            return
        start = min(starts)
        try:
            value, end = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError:
            position = start + 1
            continue
        yield value
        position = end


def shown_version(text: str, key: str) -> int | None:
    """The version of resource ``key`` that one tool result text shows, or None when it does not show it."""
    try:
        parsed = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None
    for view in resource_views(parsed):
        if view["resource"] == key:
            version: int = view["version"]
            return version
    return None


def write_records(value: Any) -> Iterator[dict[str, Any]]:
    """Every record of a write as a typed state digest or a summary states it, inside a JSON value:
    ``{"tool": str, "arguments": {...}, "outcome": str, ...}``."""
    if isinstance(value, dict):
        if (
            isinstance(value.get("tool"), str)
            and isinstance(value.get("arguments"), dict)
            and isinstance(value.get("outcome"), str)
        ):
            yield value
        for child in value.values():
            yield from write_records(child)
    elif isinstance(value, list):
        for child in value:
            yield from write_records(child)
