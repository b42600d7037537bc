"""How a chat-completions attempt failed on the wire: the vocabulary retries, failure records and the endpoint check
share.

The provider's HTTP goes out through aiohttp (a fraction of the CPU per call of the ``openai`` client's HTTP stack),
so its failures are described here rather than by the ``openai`` exception types. The names and
messages follow the ``openai`` library's (``HTTP 429 RateLimitError: Error code: 429 - {...}``), so a failed
trial reads the same whichever client raised it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

STATUS_NAMES: Mapping[int, str] = {
    400: "BadRequestError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
    404: "NotFoundError",
    409: "ConflictError",
    422: "UnprocessableEntityError",
    429: "RateLimitError",
}
"""The ``openai`` library's exception name for each status (5xx: ``InternalServerError``)."""

MAX_ERROR_MESSAGE_CHARS = 2000
"""The longest error message kept from an error response: its start names the problem, and a server that sends
megabytes (an HTML error page, a dump) would otherwise put them in every failed trial's record, in the failure atlas
and on the terminal."""


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def one_line(text: str) -> str:
    """Text from an endpoint made safe to print and to put in a Markdown table: its line breaks and runs of
    whitespace one space, any other control character (a terminal escape, ESC ``[31m``) written as its escape."""
    return _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", " ".join(text.split()))


def shorten(text: str, limit: int = MAX_ERROR_MESSAGE_CHARS) -> str:
    """``text`` when it has at most ``limit`` characters, else its start and how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [cut: {len(text)} characters in all]"


class EndpointBusy(str):
    """An endpoint check's refusal for an endpoint that is rate-limiting or failing (HTTP 408, 429, 5xx after the
    check's retries): the fix is to wait and run again, not to change ``--base-url``."""

    __slots__ = ()


class KeyRefused(str):
    """An endpoint check's refusal of the API key (HTTP 401 or 403): the fix is the key, not ``--base-url``, which
    answered."""

    __slots__ = ()


class AccessRefusal(StrEnum):
    """An answer that refuses this key access and that no retry changes (the one classification the endpoint check
    and a run's stop rule share): the fix is the key, its rights, the model's name or the account's credit."""

    KEY = "key"
    """HTTP 401: the key is missing, wrong or revoked."""
    PERMISSION = "permission"
    """HTTP 403: the key may not use this model or endpoint."""
    MODEL = "model"
    """HTTP 404 to a chat completion: the endpoint serves no such model (or no longer does)."""
    QUOTA = "quota"
    """HTTP 402, or a 429 whose error code says the quota or credit is spent (``insufficient_quota``): waiting does
    not help, a payment does."""


QUOTA_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached", "insufficient_credits", "quota_exceeded"})
"""Error codes (or types) of an HTTP 429 that says the account's quota or credit is spent, not that it is sending too
fast (OpenAI: ``insufficient_quota``): a retry gets the same answer."""


def access_refusal(status_code: int | None, code: str | None = None) -> AccessRefusal | None:
    """The access refusal an answer's HTTP status (and its error code or type) says, or None for any other answer."""
    if status_code == 401:
        return AccessRefusal.KEY
    if status_code == 403:
        return AccessRefusal.PERMISSION
    if status_code == 404:
        return AccessRefusal.MODEL
    if status_code == 402 or (status_code == 429 and code in QUOTA_CODES):
        return AccessRefusal.QUOTA
    return None


KEY_VARIABLES = "CONTEXTDELTA_API_KEY (or OPENAI_API_KEY, read when it is unset)"


def refusal_fix(refusal: AccessRefusal, model: str) -> str:
    """What the user does about an access refusal of a call for ``model``: the same words before and during a run."""
    if refusal is AccessRefusal.KEY:
        return f"set the endpoint's key in {KEY_VARIABLES}"
    if refusal is AccessRefusal.PERMISSION:
        return f"use a key that may call model {model!r} there, in {KEY_VARIABLES}"
    if refusal is AccessRefusal.MODEL:
        return f"check --model / --summary-model {model!r} (a model this endpoint serves) and --base-url"
    return "add credit or raise the quota of the key's account at the provider"


def refusal_what(refusal: AccessRefusal) -> str:
    """What was refused, as a clause: "refused the API key", "has no model ..."."""
    return {
        AccessRefusal.KEY: "refused the API key",
        AccessRefusal.PERMISSION: "denied the API key permission",
        AccessRefusal.MODEL: "does not serve the model",
        AccessRefusal.QUOTA: "refused the call for lack of quota or credit",
    }[refusal]


def status_refusal(exc: BaseException) -> AccessRefusal | None:
    """The access refusal a failed attempt's HTTP answer says (:func:`access_refusal`), or None."""
    if not isinstance(exc, EndpointStatusError):
        return None
    return access_refusal(exc.status_code, exc.code)


class EndpointError(Exception):
    """A chat-completions attempt that got no usable answer."""

    name = "APIError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class EndpointStatusError(EndpointError):
    """The endpoint answered with an HTTP error status."""

    def __init__(self, status_code: int, headers: Mapping[str, str], text: str) -> None:
        self.status_code = status_code
        self.headers = {key.lower(): value for key, value in headers.items()}
        parsed: Any
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        error = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
        self.body: Any = error if error is not None else (text or None)
        self.code: str | None = None
        if isinstance(error, dict) and error.get("code") is not None:
            self.code = str(error["code"])
        elif isinstance(error, dict) and isinstance(error.get("type"), str) and error["type"] in QUOTA_CODES:
            self.code = error["type"]  # a quota refusal said by its type alone (``"code": null``)
        if parsed is not None:
            message = f"Error code: {status_code} - {parsed}"
        else:
            message = text.strip() or f"Error code: {status_code}"
        super().__init__(one_line(message))  # whole: cut only once secrets are redacted from it (a cut key escapes)

    @property
    def name(self) -> str:  # type: ignore[override]
        if self.status_code >= 500:
            return "InternalServerError"
        return STATUS_NAMES.get(self.status_code, "APIStatusError")


class EndpointConnectionError(EndpointError):
    """The request did not complete: refused, reset, or the connection closed before a whole response."""

    name = "APIConnectionError"


class EndpointCertificateError(EndpointConnectionError):
    """The endpoint's TLS certificate failed verification (self-signed, an unknown CA, expired, another host's). Not
    retried: the same certificate is presented again."""


class EndpointRedirectError(EndpointConnectionError):
    """A redirect that leads to no answer to the request. Not retried: the same request is redirected the same way
    again."""

    name = "RedirectError"


class EndpointRedirectLoop(EndpointRedirectError):
    """The endpoint redirected more times than a client follows (a loop, or a chain to nowhere)."""

    name = "TooManyRedirects"


class EndpointRedirectedAsGet(EndpointRedirectError):
    """The endpoint answered a POST with a 301, 302 or 303 redirect, which an HTTP client follows with a GET and no
    body: whatever answers that GET is no answer to the chat completion (a 404 or 405, a model list, a web page), so
    the redirect itself is the failure, named with where it led."""


class EndpointTimeout(EndpointConnectionError):
    """No whole response within the attempt's time limit."""

    name = "APITimeoutError"

    def __init__(self, message: str = "the request timed out") -> None:
        super().__init__(message)


class EndpointResponseTooLarge(EndpointError):
    """The response body is larger than a response may be (``MAX_RESPONSE_BYTES``); reading stopped there. Not
    retried: an endpoint that sent it once sends it again."""

    name = "ResponseTooLargeError"


__all__ = [
    "MAX_ERROR_MESSAGE_CHARS",
    "QUOTA_CODES",
    "STATUS_NAMES",
    "AccessRefusal",
    "EndpointCertificateError",
    "EndpointConnectionError",
    "EndpointError",
    "EndpointRedirectError",
    "EndpointRedirectLoop",
    "EndpointRedirectedAsGet",
    "EndpointResponseTooLarge",
    "EndpointStatusError",
    "EndpointTimeout",
    "KeyRefused",
    "access_refusal",
    "one_line",
    "refusal_fix",
    "refusal_what",
    "shorten",
    "status_refusal",
]
