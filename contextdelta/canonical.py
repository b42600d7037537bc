"""Canonical JSON and content hashes: the one definition every hash in ContextDelta derives from."""

from __future__ import annotations

import hashlib
import json
import json.encoder
from typing import Any


def _not_serialisable(value: Any) -> Any:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


_JSON_ARGS: dict[str, Any] = {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": False, "allow_nan": False}
# The C encoder json.dumps builds on every call with these arguments, built once (json.dumps constructs an encoder
# per call: most of the cost of encoding a small value). No circular-reference check: a JSON value has no cycles
# (one that had would end in RecursionError instead of ValueError).
_C_ENCODER = (
    json.encoder.c_make_encoder(  # type: ignore[attr-defined]
        None, _not_serialisable, json.encoder.encode_basestring, None, ":", ",", True, False, False
    )
    if getattr(json.encoder, "c_make_encoder", None) is not None
    else None
)


def canonical_json(value: Any) -> str:
    """Serialise ``value`` deterministically: sorted keys, no insignificant whitespace, UTF-8 kept; exactly
    ``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)``."""
    if _C_ENCODER is None:
        return json.dumps(value, **_JSON_ARGS)
    return "".join(_C_ENCODER(value, 0))


def sha256_hex(text: str | bytes) -> str:
    """SHA-256 of ``text`` (UTF-8 encoded when it is a string) as lowercase hex."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def content_hash(value: Any) -> str:
    """SHA-256 of the canonical JSON of ``value``."""
    return sha256_hex(canonical_json(value))
