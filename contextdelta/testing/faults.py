"""Fault injection for the scripted server: which requests fail, and how.

Chat-completions requests are numbered 1, 2, 3, ... in arrival order, server-wide (a counter under a lock, so
concurrent episodes share it). A :class:`RequestSelector` picks request numbers; a :class:`FaultPlan` says
which fault hits which requests. Selector syntax (CLI flags and the Python helper alike):

``N`` or ``first:N``
    the first N requests (``0`` disables)
``every:K``
    every K-th request (K, 2K, 3K, ...)
``at:I,J,...``
    exactly these request numbers
``all``
    every request
``A+B``
    either selector matches, e.g. ``first:2+every:10``

When several faults select one request, the first of these wins: ``hang`` (hold the request and never answer,
like an endpoint that accepts connections and then stalls), ``drop_connection`` (close the socket without a
response), ``fail_500``, ``fail_429`` (with ``Retry-After``), ``fail_context_length`` (HTTP 400
``context_length_exceeded``), ``no_choices`` (HTTP 200 with an empty ``choices`` list). ``slow`` delays the
selected requests by ``slow_ms`` (with ``slow_ms`` set and no ``slow`` selector: every request).
``malformed_args`` (tool-call arguments that are not JSON) and ``unknown_tool`` (a tool name the world does not
have) corrupt an otherwise normal reply that has a tool call. ``no_usage`` answers normally but leaves out the
completion's ``usage``. ``echo_credentials`` plays a hostile or misconfigured endpoint: the reply text (and a 500's
error message) quotes the request's ``Authorization`` and ``api-key`` headers back.

Whole-server misbehaviour (every request, ``GET /v1/models`` included, unless said otherwise):
``require_api_key`` (HTTP 401 without ``Authorization: Bearer <key>``), ``silent`` (accept the connection and
never answer), ``reject_tools`` (chat requests that carry ``tools`` get HTTP 400, like a server started without
tool-call parsing), ``no_models`` (``GET /v1/models`` answers 404, as on servers that list no models), and an
outage: from the ``outage_after``-th chat request on, for ``outage_s`` seconds,
every request gets HTTP 503; then the server answers normally again (a failure burst that ends). A refusal
mid-run: from the ``refuse_from``-th chat request on, every chat request gets ``refuse_status`` (401 a revoked key,
402 no credit, 403 no permission, 404 the model gone, 429 ``insufficient_quota``).

The endpoint check ``run-benchmark`` makes before a run (a chat request whose only tool is
``contextdelta.providers.ENDPOINT_CHECK_TOOL``) is answered but not numbered, so selectors address the run's own
requests; whole-server misbehaviour and selectors of ``all`` reach it too.
"""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt, PositiveInt, field_validator


@dataclass(frozen=True)
class RequestSelector:
    """A set of request numbers (1-based, server-wide)."""

    first: int = 0
    every: int = 0
    at: frozenset[int] = frozenset()
    everything: bool = False

    def matches(self, number: int) -> bool:
        """Whether request ``number`` is selected."""
        return (
            self.everything
            or number <= self.first
            or (self.every > 0 and number % self.every == 0)
            or number in self.at
        )

    def __str__(self) -> str:
        if self.everything:
            return "all"
        parts = []
        if self.first:
            parts.append(f"first:{self.first}")
        if self.every:
            parts.append(f"every:{self.every}")
        if self.at:
            parts.append("at:" + ",".join(str(n) for n in sorted(self.at)))
        return "+".join(parts) or "0"

    @classmethod
    def parse(cls, spec: str | int | RequestSelector) -> RequestSelector:
        """Parse the selector syntax of the module docstring; raises ValueError naming the bad part."""
        if isinstance(spec, RequestSelector):
            return spec
        if isinstance(spec, bool):
            raise ValueError("a request selector is a count or a string, not a boolean")
        if isinstance(spec, int):
            return cls._checked(first=spec)
        first, every, at, everything = 0, 0, set[int](), False
        for part in str(spec).strip().split("+"):
            name, _, value = part.strip().partition(":")
            try:
                if name == "all" and not value:
                    everything = True
                elif name.isdigit() and not value:
                    first = max(first, int(name))
                elif name == "first":
                    first = max(first, int(value))
                elif name == "every":
                    every = int(value)
                elif name == "at":
                    at.update(int(v) for v in value.split(","))  # "at:1,,3" and "at:" are typos: refused
                else:
                    raise ValueError
            except ValueError:
                raise ValueError(
                    f"bad request selector part {part!r} in {spec!r}; use N, first:N, every:K, at:I,J, all, or A+B"
                ) from None
        return cls._checked(first=first, every=every, at=frozenset(at), everything=everything)

    @classmethod
    def _checked(cls, **values: Any) -> RequestSelector:
        selector = cls(**values)
        if selector.first < 0 or selector.every < 0 or any(n < 1 for n in selector.at):
            raise ValueError(f"request selector {selector} has a negative count or a request number below 1")
        return selector


class FaultKind(StrEnum):
    """A fault the server can inject into one request."""

    HANG = "hang"
    DROP_CONNECTION = "drop_connection"
    FAIL_500 = "fail_500"
    FAIL_429 = "fail_429"
    FAIL_CONTEXT_LENGTH = "fail_context_length"
    NO_CHOICES = "no_choices"
    SLOW = "slow"
    MALFORMED_ARGS = "malformed_args"
    UNKNOWN_TOOL = "unknown_tool"
    ECHO_CREDENTIALS = "echo_credentials"
    NO_USAGE = "no_usage"


RESPONSE_FAULTS = (
    FaultKind.HANG,
    FaultKind.DROP_CONNECTION,
    FaultKind.FAIL_500,
    FaultKind.FAIL_429,
    FaultKind.FAIL_CONTEXT_LENGTH,
    FaultKind.NO_CHOICES,
)
"""Faults that replace the reply, in precedence order."""
REPLY_FAULTS = (FaultKind.MALFORMED_ARGS, FaultKind.UNKNOWN_TOOL)
"""Faults that corrupt a reply's tool call."""


class FaultPlan(BaseModel):
    """Which faults hit which requests. Field names are the CLI flags with ``-`` written ``_``."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    drop_connection: RequestSelector | None = None
    fail_500: RequestSelector | None = None
    fail_429: RequestSelector | None = None
    retry_after: NonNegativeFloat | None = Field(
        default=1.0, description="Seconds sent in Retry-After with each 429; None sends no header."
    )
    retry_after_http_date: bool = Field(default=False, description="Send Retry-After as an HTTP date, not seconds.")
    fail_context_length: RequestSelector | None = None
    no_choices: RequestSelector | None = None
    slow: RequestSelector | None = None
    slow_ms: NonNegativeInt = 0
    malformed_args: RequestSelector | None = None
    unknown_tool: RequestSelector | None = None
    echo_credentials: RequestSelector | None = None
    no_usage: RequestSelector | None = Field(
        default=None, description="Answer these normally but without the completion's `usage` field."
    )
    hang: RequestSelector | None = None
    require_api_key: str | None = Field(default=None, description="Answer 401 unless the bearer token is this.")
    silent: bool = Field(default=False, description="Accept connections and never answer any request.")
    reject_tools: bool = Field(default=False, description="Answer 400 to chat requests that carry tools.")
    no_models: bool = Field(default=False, description="Answer 404 to GET /v1/models (no model listing).")
    outage_after: PositiveInt | None = Field(
        default=None, description="The chat request number (1-based) at which an outage of outage_s begins."
    )
    outage_s: NonNegativeFloat = Field(default=0.0, description="How long the outage lasts: every request gets 503.")
    refuse_from: PositiveInt | None = Field(
        default=None,
        description="The chat request number (1-based) from which every chat request is refused with refuse_status "
        "(a key revoked, a model withdrawn, a quota spent mid-run); the endpoint check still passes.",
    )
    refuse_status: Literal[401, 402, 403, 404, 429] = Field(
        default=401,
        description="The refusal refuse_from sends: 401 invalid_api_key, 402 insufficient credit, 403 permission "
        "denied, 404 model_not_found, 429 insufficient_quota.",
    )

    @field_validator(
        "hang",
        "drop_connection",
        "fail_500",
        "fail_429",
        "fail_context_length",
        "no_choices",
        "slow",
        "malformed_args",
        "unknown_tool",
        "echo_credentials",
        "no_usage",
        mode="before",
    )
    @classmethod
    def _selector(cls, value: Any) -> RequestSelector | None:
        if value is None:
            return None
        return RequestSelector.parse(value)

    def selector(self, kind: FaultKind) -> RequestSelector | None:
        """The selector of fault ``kind`` (``slow`` defaults to every request when ``slow_ms`` is set)."""
        chosen: RequestSelector | None = getattr(self, kind.value)
        if kind is FaultKind.SLOW and chosen is None and self.slow_ms > 0:
            return RequestSelector(everything=True)
        return chosen

    def hits(self, number: int) -> list[FaultKind]:
        """Every fault that selects request ``number``."""
        return [kind for kind in FaultKind if (s := self.selector(kind)) is not None and s.matches(number)]

    def response_fault(self, number: int) -> FaultKind | None:
        """The fault that replaces the reply to request ``number``, by precedence, if any."""
        hits = self.hits(number)
        return next((kind for kind in RESPONSE_FAULTS if kind in hits), None)

    def covers_unnumbered(self, kind: FaultKind) -> bool:
        """Whether fault ``kind`` also hits the unnumbered endpoint check (its selector is ``all``)."""
        selector = self.selector(kind)
        return selector is not None and selector.everything

    def retry_after_header(self, now: float | None = None) -> str | None:
        """The Retry-After header value for a 429, or None to send none."""
        if self.retry_after is None:
            return None
        if self.retry_after_http_date:
            return email.utils.formatdate((time.time() if now is None else now) + self.retry_after, usegmt=True)
        return f"{self.retry_after:g}"

    def cli_args(self) -> list[str]:
        """The server command-line flags that recreate this plan."""
        args: list[str] = []
        for kind in FaultKind:
            selector: RequestSelector | None = getattr(self, kind.value)
            if selector is not None:
                args += [f"--{kind.value.replace('_', '-')}", str(selector)]
        if self.slow_ms:
            args += ["--slow-ms", str(self.slow_ms)]
        if self.retry_after is None:
            args.append("--no-retry-after")
        else:
            args += ["--retry-after", f"{self.retry_after:g}"]
        if self.retry_after_http_date:
            args.append("--retry-after-http-date")
        if self.require_api_key is not None:
            args += ["--require-api-key", self.require_api_key]
        switches = (("--silent", self.silent), ("--reject-tools", self.reject_tools), ("--no-models", self.no_models))
        args += [flag for flag, on in switches if on]
        if self.outage_after is not None:
            args += ["--outage-after", str(self.outage_after), "--outage-s", f"{self.outage_s:g}"]
        if self.refuse_from is not None:
            args += ["--refuse-from", str(self.refuse_from), "--refuse-status", str(self.refuse_status)]
        return args

    def refusal(self, number: int) -> tuple[int, str, str, str] | None:
        """(status, message, code, type) of the refusal of chat request ``number``, or None when it is not refused."""
        if self.refuse_from is None or number < self.refuse_from:
            return None
        return REFUSALS[self.refuse_status]


REFUSALS: dict[int, tuple[int, str, str, str]] = {
    401: (
        401,
        "Incorrect API key provided (injected: the key was revoked).",
        "invalid_api_key",
        "invalid_request_error",
    ),
    402: (402, "Insufficient credits (injected).", "insufficient_credits", "payment_required"),
    403: (403, "This key may not use this model (injected).", "permission_denied", "invalid_request_error"),
    404: (
        404,
        "The model does not exist or you do not have access to it (injected).",
        "model_not_found",
        "invalid_request_error",
    ),
    429: (429, "You exceeded your current quota (injected).", "insufficient_quota", "insufficient_quota"),
}
"""The answers of ``refuse_status``, each as the providers that send it word it."""
