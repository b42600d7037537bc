"""Per-endpoint rate control: limits that hold across every worker, and adaptive concurrency (AIMD).

One :class:`EndpointLimiter` per endpoint lives in ONE place (the driver's event loop, or one Ray actor) and every
HTTP attempt to that endpoint, from any process or machine, passes through it (a :class:`CallGate`)::

    ticket = await gate.acquire(estimated_tokens)     # waits for a concurrency slot, a request and the tokens
    ... one HTTP attempt ...
    gate.release(ticket, status, extra_tokens)        # frees the slot; 429/5xx halve the window (AIMD)

Limits (each optional):

- concurrent requests: at most ``max_concurrent_requests`` attempts in flight;
- requests per minute: attempts evenly spaced, at most one every ``60 / requests_per_minute`` seconds (a leaky
  bucket of one request, ``aiolimiter``), so the limit holds in every window, not only on average;
- tokens per minute: a leaky bucket of one second's worth of tokens (``aiolimiter``), charged each attempt's
  estimated prompt tokens before it is sent and the difference to the reported usage after it answered;
- adaptive concurrency (``adaptive``): the concurrency window starts at the concurrent-request limit (or the
  run's concurrency), is halved on a 429 or 5xx answer (once per window: failures of attempts started before
  the last cut do not cut again) and grows by one request per window of successes, back up to where it started.

What the limiter did (waits, throttled answers, window cuts and its lowest point) is a :class:`LimiterStats`,
recorded in the run manifest.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from typing import Protocol

from aiolimiter import AsyncLimiter
from pydantic import BaseModel, ConfigDict, Field

WAIT_THRESHOLD_S = 0.001
"""An acquire that took longer than this counts as a wait in the stats."""


class EndpointLimits(BaseModel):
    """The limits of one endpoint, as configured (recorded in the manifest)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    max_concurrent_requests: int | None = Field(default=None, ge=1, description="Attempts in flight at once.")
    requests_per_minute: float | None = Field(
        default=None,
        ge=1 / 60,
        description="Attempts per minute, evenly spaced; at least one an hour (a lower rate stalls a run).",
    )
    tokens_per_minute: float | None = Field(
        default=None,
        ge=60,
        description="Prompt + completion tokens per minute; at least 60 (one a second; a lower rate stalls a run).",
    )
    adaptive: bool = Field(default=False, description="AIMD: halve the concurrency on 429/5xx, add one per window.")

    @property
    def active(self) -> bool:
        """Whether anything is limited at all (otherwise calls skip the limiter entirely)."""
        return self.adaptive or any(
            v is not None for v in (self.max_concurrent_requests, self.requests_per_minute, self.tokens_per_minute)
        )


class LimiterStats(BaseModel):
    """What one endpoint's limiter did during one session of a run."""

    model_config = ConfigDict(extra="forbid")

    requests: int = Field(default=0, description="HTTP attempts that passed the limiter.")
    tokens: int = Field(default=0, description="Tokens charged (reported usage; the estimate when none).")
    waited: int = Field(default=0, description="Attempts that had to wait for a slot, a request or tokens.")
    wait_s: float = Field(default=0.0, description="Total time attempts waited in the limiter, in seconds.")
    throttled: int = Field(default=0, description="Attempts answered 429.")
    server_errors: int = Field(default=0, description="Attempts answered 5xx.")
    window_cuts: int = Field(default=0, description="Times adaptive concurrency halved its window.")
    window_start: int | None = Field(default=None, description="Concurrency window at the start (null: unlimited).")
    window_min: int | None = Field(default=None, description="Lowest concurrency window reached.")
    window_end: int | None = Field(default=None, description="Concurrency window at the end.")


class CallGate(Protocol):
    """What the provider calls around every HTTP attempt (an in-process limiter or a client of a shared one)."""

    needs_tokens: bool
    """Whether the gate limits tokens (only then is a prompt estimate worth computing)."""

    async def acquire(self, tokens: int) -> int:
        """Wait until one attempt of about ``tokens`` prompt tokens may be sent; returns a ticket for release."""
        ...

    def release(self, ticket: int, status: int | None, extra_tokens: int) -> None:
        """The attempt ended with HTTP ``status`` (None: no answer); ``extra_tokens``: the tokens it used beyond
        the ``tokens`` it acquired (the completion, a low estimate), charged to the next attempts."""
        ...


class EndpointLimiter:
    """The shared limiter of one endpoint (see the module docstring). Lives on one asyncio event loop."""

    def __init__(self, limits: EndpointLimits, *, concurrency: int) -> None:
        """``concurrency``: the run's episode concurrency, the window's ceiling when no request limit is given."""
        self.limits = limits
        self.needs_tokens = limits.tokens_per_minute is not None
        ceiling = limits.max_concurrent_requests
        if ceiling is None and limits.adaptive:
            ceiling = max(1, concurrency)
        self._ceiling = ceiling
        self._window = float(ceiling) if ceiling is not None else math.inf
        self._in_flight = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._generation = 0  # bumped by every cut; a failure of an older attempt does not cut again
        rpm = limits.requests_per_minute
        self._requests = AsyncLimiter(1, 60.0 / rpm) if rpm is not None else None
        tpm = limits.tokens_per_minute
        self._tokens = AsyncLimiter(tpm / 60.0, 1.0) if tpm is not None else None
        self._debt = 0  # tokens used beyond the estimates, charged to the next attempts
        self.stats = LimiterStats(window_start=ceiling, window_min=ceiling, window_end=ceiling)

    @property
    def window(self) -> int | None:
        """The current concurrency window (None: unlimited)."""
        return None if math.isinf(self._window) else max(1, math.floor(self._window))

    async def acquire(self, tokens: int) -> int:
        started = time.perf_counter()
        if self._in_flight >= (self.window or math.inf) or self._waiters:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                if not waiter.cancelled() and waiter.done():
                    self._in_flight -= 1  # granted, then cancelled before use: hand the slot on
                    self._wake()
                elif waiter in self._waiters:
                    self._waiters.remove(waiter)
                raise
        else:
            self._in_flight += 1
        try:
            if self._requests is not None:
                await self._requests.acquire()
            if self._tokens is not None:
                charge, self._debt = tokens + self._debt, 0
                bucket = self._tokens.max_rate
                while charge > 0:  # a charge bigger than the bucket is paid in bucket-sized parts
                    part = min(float(charge), bucket)
                    await self._tokens.acquire(part)
                    charge -= math.ceil(part)
        except BaseException:
            self._in_flight -= 1
            self._wake()
            raise
        waited = time.perf_counter() - started
        self.stats.requests += 1
        self.stats.tokens += tokens
        if waited > WAIT_THRESHOLD_S:
            self.stats.waited += 1
            self.stats.wait_s = round(self.stats.wait_s + waited, 6)
        return self._generation

    def release(self, ticket: int, status: int | None, extra_tokens: int) -> None:
        self._in_flight -= 1
        if extra_tokens > 0:
            self.stats.tokens += extra_tokens
            if self._tokens is not None:
                self._debt += extra_tokens
        if status == 429:
            self.stats.throttled += 1
        elif status is not None and status >= 500:
            self.stats.server_errors += 1
        if self.limits.adaptive and self._ceiling is not None:
            if status == 429 or (status is not None and status >= 500):
                if ticket == self._generation:  # one cut per window of attempts
                    self._generation += 1
                    self._window = max(1.0, self._window / 2)
                    self.stats.window_cuts += 1
                    self.stats.window_min = min(self.stats.window_min or self._ceiling, self.window or 1)
            elif status is not None and status < 400:
                self._window = min(float(self._ceiling), self._window + 1.0 / self._window)
            self.stats.window_end = self.window
        self._wake()

    def _wake(self) -> None:
        limit = self.window or math.inf
        while self._waiters and self._in_flight < limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self._in_flight += 1
                waiter.set_result(None)

    def snapshot(self) -> LimiterStats:
        """A copy of the stats so far."""
        return self.stats.model_copy()


def estimate_tokens(text_length: int) -> int:
    """Prompt tokens of a request body of ``text_length`` characters, estimated as characters / 4."""
    return math.ceil(text_length / 4)
