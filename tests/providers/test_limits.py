"""The endpoint limiter: concurrency windows, adaptive concurrency (AIMD) and what it records. No clocks: every
assertion is about order and counts."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from contextdelta.providers import EndpointLimiter, EndpointLimits


def test_no_limit_is_inactive_and_each_limit_activates() -> None:
    assert not EndpointLimits().active
    assert EndpointLimits(adaptive=True).active
    assert EndpointLimits(max_concurrent_requests=2).active
    assert EndpointLimits(requests_per_minute=60).active
    assert EndpointLimits(tokens_per_minute=1000).active


@pytest.mark.parametrize("field", ["max_concurrent_requests", "requests_per_minute", "tokens_per_minute"])
def test_limits_must_be_positive(field: str) -> None:
    with pytest.raises(ValidationError):
        EndpointLimits.model_validate({field: 0})


def test_the_concurrency_limit_holds_and_waiters_are_served_in_order() -> None:
    async def scenario() -> list[str]:
        limiter = EndpointLimiter(EndpointLimits(max_concurrent_requests=2), concurrency=8)
        log: list[str] = []
        tickets = [await limiter.acquire(0), await limiter.acquire(0)]
        third = asyncio.ensure_future(limiter.acquire(0))
        fourth = asyncio.ensure_future(limiter.acquire(0))
        await asyncio.sleep(0)
        log.append(f"waiting={not third.done() and not fourth.done()}")
        limiter.release(tickets[0], 200, 0)
        await asyncio.sleep(0)
        log.append(f"third={third.done()} fourth={fourth.done()}")
        limiter.release(tickets[1], 200, 0)
        await asyncio.sleep(0)
        log.append(f"fourth={fourth.done()}")
        assert limiter.stats.requests == 4
        return log

    assert asyncio.run(scenario()) == ["waiting=True", "third=True fourth=False", "fourth=True"]


def test_adaptive_concurrency_halves_on_429_and_5xx_once_per_window_then_recovers() -> None:
    async def scenario() -> EndpointLimiter:
        limiter = EndpointLimiter(EndpointLimits(adaptive=True), concurrency=8)
        assert limiter.window == 8
        burst = [await limiter.acquire(0) for _ in range(4)]
        for ticket in burst:  # four failures of attempts sent before the first cut: one cut only
            limiter.release(ticket, 429, 0)
        assert limiter.window == 4
        ticket = await limiter.acquire(0)
        limiter.release(ticket, 503, 0)  # sent after the cut: cuts again
        assert limiter.window == 2
        for _ in range(40):  # additive increase: about one per window of successes, up to the start
            ticket = await limiter.acquire(0)
            limiter.release(ticket, 200, 0)
        assert limiter.window == 8
        return limiter

    stats = asyncio.run(scenario()).stats
    assert (stats.throttled, stats.server_errors, stats.window_cuts) == (4, 1, 2)
    assert (stats.window_start, stats.window_min, stats.window_end) == (8, 2, 8)


def test_a_4xx_other_than_429_and_a_lost_connection_do_not_cut_the_window() -> None:
    async def scenario() -> EndpointLimiter:
        limiter = EndpointLimiter(EndpointLimits(adaptive=True, max_concurrent_requests=6), concurrency=2)
        for status in (400, None, 404):
            limiter.release(await limiter.acquire(0), status, 0)
        return limiter

    limiter = asyncio.run(scenario())
    assert limiter.window == 6 and limiter.stats.window_cuts == 0


def test_tokens_used_beyond_the_estimate_are_charged_to_the_next_attempt() -> None:
    async def scenario() -> EndpointLimiter:
        limiter = EndpointLimiter(EndpointLimits(tokens_per_minute=6_000_000), concurrency=2)
        limiter.release(await limiter.acquire(100), 200, 50)
        limiter.release(await limiter.acquire(10), 200, -5)  # fewer than estimated: no refund
        return limiter

    assert asyncio.run(scenario()).stats.tokens == 160


def test_a_cancelled_waiter_gives_its_slot_back() -> None:
    async def scenario() -> int | None:
        limiter = EndpointLimiter(EndpointLimits(max_concurrent_requests=1), concurrency=1)
        first = await limiter.acquire(0)
        waiting = asyncio.ensure_future(limiter.acquire(0))
        await asyncio.sleep(0)
        waiting.cancel()
        await asyncio.sleep(0)
        limiter.release(first, 200, 0)
        again = asyncio.ensure_future(limiter.acquire(0))
        await asyncio.sleep(0)
        assert again.done()
        return limiter.window

    assert asyncio.run(scenario()) == 1
