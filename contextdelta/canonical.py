"""Canonical JSON and content hashes: the one definition every hash in ContextDelta derives from."""

from __future__ import annotations

import functools
import hashlib
import json
import json.encoder
from collections.abc import Callable
from typing import Any


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
