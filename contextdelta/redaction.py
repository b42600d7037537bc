"""Redaction of credentials before anything is stored, written or logged: by the recording proxy, and by the
provider, which redacts what an endpoint echoes (an ``Authorization`` or ``api-key`` header, the key itself)
before a response reaches the agent loop, and so before any run file, report, log or trace-store row.

Three layers: values under credential-like keys are replaced whole; every known secret (the proxy token, the
upstream key, the bearer token a client sent, a password in the upstream URL) is cut out of every string; and
strings that look like API keys, bearer headers or a URL's ``user:password@`` are masked even when nobody declared
them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any

REDACTED = "[REDACTED]"

_SECRET_KEY = re.compile(
    r"^(.*[_\-])?(api[_\-]?key|apikey|authorization|proxy[_\-]?authorization|password|passwd|secret|"
    r"access[_\-]?token|refresh[_\-]?token|auth[_\-]?token|id[_\-]?token|session[_\-]?token|bearer|credentials?)$",
    re.IGNORECASE,
)
_KEY_LIKE = re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{12,}")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}")
_KEY_HEADER = re.compile(r"""(?i)\b((?:x-)?api[_\-]?key["']?\s*[:=]\s*["']?)([^\s"',;]{8,})""")
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s:@'\"]+:[^/\s@'\"]+@")
"""``scheme://user:password@``: the user and password go (the host stays, as `redact_url` keeps it)."""
# any of the four above, in one search: most strings hold none, and one search costs a fraction of four subs
_ANY_PATTERN = re.compile(
    r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{12,}"
    r"|(?i:\b(?:bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,})"
    r"""|(?i:\b(?:x-)?api[_\-]?key["']?\s*[:=]\s*["']?[^\s"',;]{8,})"""
    r"""|(?i:\b[a-z][a-z0-9+.\-]*://[^/\s:@'"]+:[^/\s@'"]+@)"""
)


@functools.lru_cache(maxsize=4096)
def is_secret_key(name: str) -> bool:
    """Whether a mapping key names a credential (``api_key``, ``Authorization``, ``client_secret`` ...); memoised:
    the same few keys come back in every response."""
    return bool(_SECRET_KEY.match(name))


class Redactor:
    """Removes credentials from JSON values and text. Secrets shorter than 4 characters are ignored (a one-letter
    "secret" would shred every string)."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._secrets: set[str] = set()
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str | None) -> None:
        """Also cut ``secret`` out of everything redacted from now on."""
        if secret and len(secret) >= 4:
            self._secrets.add(secret)

    def text(self, value: str, extra: Iterable[str] = ()) -> str:
        """``value`` with every known secret and every key-, bearer- or api-key-header-looking string masked."""
        secrets = self._secrets | {s for s in extra if s and len(s) >= 4} if extra else self._secrets
        if not any(secret in value for secret in secrets) and not _ANY_PATTERN.search(value):
            return value  # nothing to mask (the common case, on the provider's hot path)
        for secret in sorted(secrets, key=len, reverse=True):
            value = value.replace(secret, REDACTED)
        value = _KEY_LIKE.sub(REDACTED, value)
        value = _KEY_HEADER.sub(lambda m: f"{m.group(1)}{REDACTED}", value)
        value = _URL_CREDENTIALS.sub(lambda m: f"{m.group(1)}{REDACTED}@", value)
        return _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", value)

    def json(self, value: Any, extra: Iterable[str] = ()) -> Any:
        """A copy of a JSON value with credential keys' values and secrets in strings masked."""
        return self._clean(value, tuple(extra))

    def _clean(self, node: Any, extra: tuple[str, ...]) -> Any:
        # a method, not a closure that calls itself: such a closure is a reference cycle, garbage for the cyclic
        # collector on every model call
        if isinstance(node, str):
            return self.text(node, extra)
        if isinstance(node, dict):
            return {
                k: REDACTED
                if isinstance(k, str) and is_secret_key(k) and v not in (None, "")
                else self._clean(v, extra)
                for k, v in node.items()
            }
        if isinstance(node, list):
            return [self._clean(v, extra) for v in node]
        return node
