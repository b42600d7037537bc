"""When and how long to retry a failed chat-completions call (tenacity policies built from one value).

Retried: HTTP 408, 429 (not one whose error code says the quota is spent) and 5xx (not 501 and 505, which say the
server does not do what was asked), timeouts
and connection errors (not a redirect that leads nowhere, nor a TLS certificate that fails verification: both
come back the same way). The wait is the server's ``Retry-After``
(``retry-after-ms``, seconds, or an HTTP date) when it sends one, otherwise exponential backoff with jitter.
Attempts are bounded by count and by total wall time; a ``Retry-After`` longer than the time left, or
longer than ``max_retry_after_s``, ends the call at once instead of sleeping past the budget.
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC

from tenacity import RetryCallState, stop_after_attempt, stop_before_delay
from tenacity import wait_exponential_jitter as _wait_exponential_jitter
from tenacity.stop import stop_base
from tenacity.wait import wait_base

from contextdelta.providers.errors import (
    EndpointCertificateError,
    EndpointConnectionError,
    EndpointRedirectError,
    EndpointStatusError,
    status_refusal,
)

RETRYABLE_STATUS = frozenset({408, 429})
"""Retryable 4xx statuses; every 5xx is retryable too, but those of `PERMANENT_5XX`."""
PERMANENT_5XX = frozenset({501, 505})
"""5xx statuses that say the server does not do what was asked (501 Not Implemented: no POST there, as from a
static file server; 505 HTTP Version Not Supported), not that it failed for now: they come back the same way."""


RETRY_BUDGET_PER_TIMEOUT = 1.5
"""A call's retries may take this many times its per-call timeout in all (at least): room for one whole attempt
that times out and a retry."""


@dataclass(frozen=True)
class RetryPolicy:
    """Bounds and backoff of provider retries. ``max_attempts`` counts the first attempt too."""

    max_attempts: int = 6
    max_total_s: float = 180.0
    """No retry starts (nor a wait that would end) later than this many seconds after the first attempt."""
    initial_backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    jitter_s: float = 1.0
    """Up to this many random seconds are added to each exponential backoff wait."""
    max_retry_after_s: float = 120.0
    """A server asking to wait longer than this is not retried."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if min(self.max_total_s, self.initial_backoff_s, self.max_backoff_s, self.jitter_s) < 0:
            raise ValueError("retry times must not be negative")

    @classmethod
    def for_timeout(cls, timeout_s: float, max_attempts: int | None = None) -> RetryPolicy:
        """The default policy for calls of up to ``timeout_s`` seconds each (``--timeout-s``): its total time budget
        is at least 1.5 times the timeout (the default's 180 s for the default 120 s), since an attempt never
        outlives the budget: a smaller one would cut a slow model's call short of the timeout it was given."""
        default = cls()
        return cls(
            max_attempts=default.max_attempts if max_attempts is None else max_attempts,
            max_total_s=max(default.max_total_s, RETRY_BUDGET_PER_TIMEOUT * timeout_s),
        )

    def stop(self, started: float | None = None) -> stop_base:
        """The tenacity stop condition: attempt count, total time, or an over-long Retry-After. The total time
        counts from ``started`` (a ``time.monotonic()`` instant) when given, else from tenacity's first attempt."""
        total: stop_base = (
            stop_before_delay(self.max_total_s) if started is None else _StopBeforeDeadline(started + self.max_total_s)
        )
        return stop_after_attempt(self.max_attempts) | total | _StopOnLongRetryAfter(self.max_retry_after_s)

    def wait(self) -> wait_base:
        """The tenacity wait: the server's Retry-After when given, else exponential backoff with jitter."""
        return _WaitRetryAfterOrBackoff(
            _wait_exponential_jitter(multiplier=self.initial_backoff_s, max=self.max_backoff_s, jitter=self.jitter_s)
        )


NO_RETRY = RetryPolicy(max_attempts=1)
"""A policy that makes exactly one attempt."""


def is_retryable(exc: BaseException) -> bool:
    """Whether a failed attempt is worth repeating: 408/429/5xx (not 501/505, nor a 429 that says the quota is spent:
    an access refusal, `status_refusal`), timeouts and connection errors."""
    if isinstance(exc, EndpointStatusError):
        if status_refusal(exc) is not None:
            return False
        return exc.status_code in RETRYABLE_STATUS or (exc.status_code >= 500 and exc.status_code not in PERMANENT_5XX)
    # EndpointTimeout is a subclass; a redirect error and a certificate error are too, but come back the same way
    # every time
    return isinstance(exc, EndpointConnectionError) and not isinstance(
        exc, EndpointRedirectError | EndpointCertificateError
    )


def retry_after_seconds(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds a response asks the client to wait, from ``retry-after-ms`` or ``retry-after``.

    ``retry-after`` may be a number of seconds or an HTTP date (RFC 9110); a date in the past means 0.
    None when neither header is present or parseable.
    """
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000.0
        except ValueError:
            value = math.nan
        if math.isfinite(value):
            return max(0.0, value)
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        pass
    else:
        return max(0.0, value) if math.isfinite(value) else None
    try:
        when = email.utils.parsedate_to_datetime(raw.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP date is always GMT; be lenient with servers that omit it
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def retry_after_of(exc: BaseException | None) -> float | None:
    """The Retry-After wait carried by a failed attempt's HTTP response, if any."""
    if isinstance(exc, EndpointStatusError):
        return retry_after_seconds(exc.headers)
    return None


class _WaitRetryAfterOrBackoff(wait_base):
    def __init__(self, backoff: wait_base) -> None:
        self._backoff = backoff

    def __call__(self, retry_state: RetryCallState) -> float:
        outcome = retry_state.outcome
        server_wait = retry_after_of(outcome.exception() if outcome is not None else None)
        if server_wait is not None:
            return server_wait
        return float(self._backoff(retry_state))


class _StopBeforeDeadline(stop_base):
    """``stop_before_delay`` from a given instant instead of tenacity's own start."""

    def __init__(self, deadline: float) -> None:
        self._deadline = deadline

    def __call__(self, retry_state: RetryCallState) -> bool:
        now = retry_state.outcome_timestamp if retry_state.outcome_timestamp is not None else time.monotonic()
        return now + retry_state.upcoming_sleep >= self._deadline


class _StopOnLongRetryAfter(stop_base):
    def __init__(self, limit_s: float) -> None:
        self._limit_s = limit_s

    def __call__(self, retry_state: RetryCallState) -> bool:
        outcome = retry_state.outcome
        server_wait = retry_after_of(outcome.exception() if outcome is not None else None)
        return server_wait is not None and server_wait > self._limit_s
