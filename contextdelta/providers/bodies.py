"""Reading a model endpoint's response body: the size cap and the decoding every reader of one shares (the
provider, and the recording proxy behind ``contextdelta serve``).

A misbehaving server must end as a failed trial, never as a crash, a hang or memory exhausted: a body is read in
chunks and given up past `MAX_RESPONSE_BYTES`; a JSON body nested deeper than `MAX_JSON_DEPTH` is refused (deep
enough to break the decoder, or every recursive reader after it); and lone UTF-16 surrogates (``"\\ud800"``
escapes, which UTF-8 cannot encode) become U+FFFD before anything is recorded or hashed.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from contextdelta.canonical import MAX_JSON_DEPTH, json_depth, replace_lone_surrogates
from contextdelta.providers.errors import EndpointResponseTooLarge

MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""The largest response body read (64 MiB): a chat completion is kilobytes; an endpoint that sends more is broken."""
READ_CHUNK_BYTES = 256 * 1024
"""How much of a body is read at a time."""

_MAYBE_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
"""A ``\\uD800``-``\\uDFFF`` escape, or the bytes of a surrogate written raw: a body without either holds none."""


class NestedTooDeeply(ValueError):
    """A JSON body nested deeper than `MAX_JSON_DEPTH` (or than the decoder can follow)."""


class NumberTooLong(ValueError):
    """A JSON body holding an integer with more digits than Python converts (``sys.get_int_max_str_digits()``,
    4,300 by default): valid JSON that no reader here can take, not a body that is "not JSON"."""


class CappedBody:
    """A response body collected chunk by chunk that refuses to grow past ``limit`` bytes.

    Raises EndpointResponseTooLarge as soon as the declared ``Content-Length`` or the bytes received exceed the
    limit, so that no more is read."""

    def __init__(self, content_length: str | int | None = None, limit: int = MAX_RESPONSE_BYTES) -> None:
        self.limit = limit
        self._parts: list[bytes] = []
        self.size = 0
        try:
            declared = int(content_length) if content_length is not None else None
        except ValueError:
            declared = None
        if declared is not None and declared > limit:
            raise EndpointResponseTooLarge(
                f"the response declares {declared} bytes (Content-Length), more than the {_mib(limit)} a response "
                "may have (MAX_RESPONSE_BYTES); nothing was read"
            )

    def add(self, chunk: bytes) -> None:
        """Take the next chunk; raises EndpointResponseTooLarge when the body passes the limit."""
        self.size += len(chunk)
        if self.size > self.limit:
            raise EndpointResponseTooLarge(
                f"the response body passed the {_mib(self.limit)} a response may have (MAX_RESPONSE_BYTES); "
                f"reading stopped after {self.size} bytes"
            )
        self._parts.append(chunk)

    def value(self) -> bytes:
        """The whole body read so far."""
        return self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)


def load_json_body(body: bytes) -> Any:
    """The JSON value of a response body, with lone surrogates replaced by U+FFFD (`replace_lone_surrogates`).

    Raises NestedTooDeeply for nesting past `MAX_JSON_DEPTH`, NumberTooLong for an integer past Python's digit
    limit, ValueError for a body that is not JSON (nor UTF-8).
    """
    try:
        value = json.loads(body)
    except RecursionError:
        raise NestedTooDeeply(f"a JSON body nested too deeply to decode (over {MAX_JSON_DEPTH} levels)") from None
    except ValueError as exc:
        if "integer string conversion" not in str(exc):  # the decoder's words for an integer past the digit limit
            raise
        limit = sys.get_int_max_str_digits()
        raise NumberTooLong(
            f"a JSON body with a number too long to read (an integer of more than {limit:,} digits)"
        ) from None
    # every level opens with a bracket: a body with few brackets (the common case) cannot be too deep
    if body.count(b"[") + body.count(b"{") > MAX_JSON_DEPTH and json_depth(value) > MAX_JSON_DEPTH:
        raise NestedTooDeeply(f"a JSON body nested more than {MAX_JSON_DEPTH} levels deep")
    return replace_lone_surrogates(value) if _MAYBE_SURROGATE.search(body) else value


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB"
