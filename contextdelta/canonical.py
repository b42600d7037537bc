"""Canonical JSON and content hashes: the one definition every hash in ContextDelta derives from."""

from __future__ import annotations

import functools
import hashlib
import json
import json.encoder
import re
from collections.abc import Callable
from typing import Any, TypeVar, cast

J = TypeVar("J")


def _not_serialisable(value: Any) -> Any:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def json_dumps_function(
    *,
    sort_keys: bool = False,
    separators: tuple[str, str] = (", ", ": "),
    ensure_ascii: bool = True,
    allow_nan: bool = True,
) -> Callable[[Any], str]:
    """``json.dumps`` with these arguments, as a function whose C encoder is built once: ``json.dumps`` builds one
    on every call it gets arguments, most of the cost of encoding a small value. No circular-reference check (a
    JSON value has no cycles; one that had would end in RecursionError instead of ValueError)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # a Python without the C accelerator
        return functools.partial(
            json.dumps, sort_keys=sort_keys, separators=separators, ensure_ascii=ensure_ascii, allow_nan=allow_nan
        )
    strings = json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    item_separator, key_separator = separators
    encoder = make(None, _not_serialisable, strings, None, key_separator, item_separator, sort_keys, False, allow_nan)
    return lambda value: "".join(encoder(value, 0))


canonical_json: Callable[[Any], str] = json_dumps_function(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)
"""Serialise a value deterministically: sorted keys, no insignificant whitespace, UTF-8 kept; exactly
``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)``."""


def sha256_hex(text: str | bytes) -> str:
    """SHA-256 of ``text`` (UTF-8 encoded when it is a string) as lowercase hex."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def content_hash(value: Any) -> str:
    """SHA-256 of the canonical JSON of ``value``."""
    return sha256_hex(canonical_json(value))


def json_type(value: Any) -> str:
    """A JSON value's type as JSON names it, with its article: ``a string``, ``an array``, ``null`` ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


MAX_JSON_DEPTH = 200
"""The deepest nesting of arrays and objects a value from outside may have (a model endpoint's response, a tool
call's arguments): a chat completion has about ten levels; much deeper breaks the JSON decoder or any recursive
reader after it."""


def json_depth(value: Any) -> int:
    """How deeply arrays and objects nest in a JSON value (a scalar: 0), found without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


_SURROGATE = re.compile("[\ud800-\udfff]")
"""A UTF-16 surrogate code point: what a JSON ``\\ud800`` escape without its pair decodes to in Python. UTF-8 cannot
encode it, so a string holding one can be neither hashed nor written."""


def _without_surrogates(text: str) -> str:
    # through UTF-16: an adjacent high+low pair becomes the character it encodes, a lone one U+FFFD
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def has_lone_surrogate(value: Any) -> bool:
    """Whether a JSON value holds a string, or a key, with a surrogate code point (UTF-8 cannot encode it).

    Walks the value without recursion, so any depth the JSON decoder produced is safe."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                return True
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def replace_lone_surrogates(value: J) -> J:
    """``value`` with every lone surrogate code point in its strings and keys replaced by U+FFFD (a surrogate pair
    becomes the character it encodes). Dictionaries and lists are changed in place (a freshly decoded value is
    its caller's own); a string comes back as a new string. Walks without recursion."""
    if isinstance(value, str):
        return cast(J, _without_surrogates(value)) if _SURROGATE.search(value) else value
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            for index, item in enumerate(node):
                if isinstance(item, str):
                    if _SURROGATE.search(item):
                        node[index] = _without_surrogates(item)
                elif isinstance(item, (dict, list)):
                    stack.append(item)
        elif isinstance(node, dict):
            if any(isinstance(key, str) and _SURROGATE.search(key) for key in node):
                items = list(node.items())
                node.clear()
                node.update((_without_surrogates(k) if isinstance(k, str) else k, v) for k, v in items)
            for key, item in node.items():
                if isinstance(item, str):
                    if _SURROGATE.search(item):
                        node[key] = _without_surrogates(item)
                elif isinstance(item, (dict, list)):
                    stack.append(item)
    return value
