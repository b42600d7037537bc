"""The parts of a JSON value by path (what a receipt digests), and the value's canonical JSON in the same pass.

A record's ``raw_runs.jsonl`` line is its canonical JSON, and its receipt holds a short digest of each part of it.
Both come from one walk here: each part is encoded once, its digest taken, and the line assembled from the parts'
texts, so a record is neither encoded twice nor parsed back (about half of what writing a record cost).
``sealed_json(value)[0] == canonical_json(value)`` for every JSON value; tests/rundir/test_parts.py checks it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from typing import Any

from contextdelta.canonical import canonical_json

PART_KEY_DEPTH = 4
"""A part is a value reached by at most this many object keys (list indices do not count); deeper values are part
of the one at this depth (``trace.steps[3].response.usage`` holds its token counts)."""
SPLIT_LIST_DEPTH = 2
"""Lists reached by at most this many keys are split into their items (``trace.steps``, ``verdict.details``,
``sessions``); deeper lists (a step's ``messages``) are one part each."""
PART_DIGEST_CHARS = 16
"""Hex digits kept of each part's SHA-256: they only locate an edit; the line's full SHA-256 proves it."""

_encode_string = json.encoder.encode_basestring  # canonical JSON of a string (ensure_ascii off), without dumps


@functools.lru_cache(maxsize=4096)
def _child(path: str, key: str) -> str:
    if key.replace("_", "a").replace("-", "a").isalnum():
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def _canonical(node: Any) -> str:
    """``canonical_json(node)``, with the common leaves done directly (a record has hundreds of parts, most of them
    strings, numbers, empty lists)."""
    kind = type(node)
    if kind is str:
        return _encode_string(node)
    if node is None:
        return "null"
    if node is True:
        return "true"
    if node is False:
        return "false"
    if kind is int:
        return int.__repr__(node)
    if kind is float and math.isfinite(node):
        return float.__repr__(node)  # what json writes for a finite float
    if (kind is list or kind is dict) and not node:
        return "[]" if kind is list else "{}"
    return canonical_json(node)


class _NotPlainJson(Exception):
    """A value the one-pass walk does not assemble itself: an object key that is not a string (canonical JSON
    turns it into one, so the parts are those of the value read back, as ``verify`` finds them in the line)."""


def sealed_json(value: Any) -> tuple[str, dict[str, str]]:
    """``(canonical_json(value), parts_of(value))`` in one pass: every value reached by at most
    :data:`PART_KEY_DEPTH` keys that is a scalar, an empty container or at that depth is a part, with lists down to
    :data:`SPLIT_LIST_DEPTH` keys split into their items; its digest is the first :data:`PART_DIGEST_CHARS` hex
    digits of the SHA-256 of its canonical JSON. A field added to a record is a part without anything to update."""
    out: dict[str, str] = {}
    sha256 = hashlib.sha256

    def walk(node: Any, path: str, keys: int) -> str:
        if isinstance(node, dict) and node and keys < PART_KEY_DEPTH:
            pieces = []
            for key in sorted(node):
                if not isinstance(key, str):
                    raise _NotPlainJson
                text = walk(node[key], _child(path, key), keys + 1)
                pieces.append(f"{_encode_string(key)}:{text}")
            return "{" + ",".join(pieces) + "}"
        if isinstance(node, list) and node and path and keys <= SPLIT_LIST_DEPTH:
            return "[" + ",".join([walk(item, f"{path}[{index}]", keys) for index, item in enumerate(node)]) + "]"
        text = _canonical(node)
        # surrogatepass: a lone surrogate (which no writer puts there) gets a digest, so the seal names its part
        out[path or "(root)"] = sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:PART_DIGEST_CHARS]
        return text

    try:
        return walk(value, "", 0), out
    except _NotPlainJson:
        text = canonical_json(value)
        return text, sealed_json(json.loads(text))[1]


def parts_of(value: Any) -> dict[str, str]:
    """The digest of each part of a JSON value by path (see :func:`sealed_json`): what ``verify`` and the seal
    derive from a line or a manifest read back."""
    return sealed_json(value)[1]
