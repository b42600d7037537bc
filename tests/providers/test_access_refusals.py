"""Access refusals (a key refused or revoked, no permission, no such model, no quota or credit) and what a failed call
leaves in the record, over real loopback HTTP: the endpoint check and a run's calls classify a refusal alike, a
refusal is never retried, and each failed attempt's status, error and time is kept."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from contextdelta.providers import EndpointBusy, KeyRefused, OpenAIProvider, RetryPolicy
from contextdelta.testing import fetch_stats
from tests.providers.conftest import RawEndpoint, RecordingSleep, ScriptedFactory, complete, episode


def _error(status: int, code: str | None, error_type: str = "invalid_request_error") -> bytes:
    return json.dumps(
        {"error": {"message": f"refused ({status})", "type": error_type, "param": None, "code": code}}
    ).encode()


QUOTA_429 = _error(429, "insufficient_quota", "insufficient_quota")
QUOTA_429_BY_TYPE = _error(429, None, "insufficient_quota")
NO_CREDIT_402 = _error(402, "insufficient_credits", "payment_required")


def _check(endpoint: RawEndpoint, sleep: RecordingSleep) -> str | None:
    async def go() -> str | None:
        async with OpenAIProvider(
            base_url=endpoint.base_url, model="raw", api_key="k", timeout_s=5, sleep=sleep, retry=RetryPolicy()
        ) as provider:
            return await provider.preflight()

    return asyncio.run(go())


@pytest.mark.parametrize(("status", "body"), [(402, NO_CREDIT_402), (429, QUOTA_429), (429, QUOTA_429_BY_TYPE)])
def test_the_endpoint_check_refuses_a_spent_quota_at_once_naming_the_fix(
    status: int, body: bytes, sleep: RecordingSleep
) -> None:
    """A 429 insufficient_quota was retried and then called rate limiting ("wait and run again"), a 402 was blamed on
    --base-url: both say that the account has no credit, after one request."""
    with RawEndpoint([body], status=status, check_too=True) as endpoint:
        problem = _check(endpoint, sleep)
        posts = endpoint.requests
    assert isinstance(problem, KeyRefused) and not isinstance(problem, EndpointBusy)
    assert f"refused the call for lack of quota or credit (HTTP {status}" in problem
    assert "add credit or raise the quota of the key's account at the provider" in problem
    assert "wait" not in problem and "--base-url" not in problem
    assert (posts, sleep.waits) == (1, [])


def test_a_rate_limit_429_is_still_retried(sleep: RecordingSleep) -> None:
    with RawEndpoint([_error(429, "rate_limit_exceeded", "requests")], status=429) as endpoint:
        failure = complete(endpoint, sleep)
        posts = endpoint.requests
    assert posts == 3 and failure.refusal is None
    assert [a.status_code for a in failure.attempts] == [429, 429, 429]


@pytest.mark.parametrize(
    ("status", "body", "refusal", "error"),
    [
        (401, _error(401, "invalid_api_key"), "key", "AuthenticationError"),
        (403, _error(403, None), "permission", "PermissionDeniedError"),
        (404, _error(404, "model_not_found"), "model", "NotFoundError"),
        (402, NO_CREDIT_402, "quota", "APIStatusError"),
        (429, QUOTA_429, "quota", "RateLimitError"),
    ],
)
def test_a_refused_call_is_tried_once_and_says_its_refusal(
    status: int, body: bytes, refusal: str, error: str, sleep: RecordingSleep
) -> None:
    with RawEndpoint([body], status=status) as endpoint:
        failure = complete(endpoint, sleep)
        posts = endpoint.requests
    assert posts == 1 and sleep.waits == []
    assert (failure.status_code, failure.refusal, failure.retries) == (status, refusal, 0)
    (attempt,) = failure.attempts
    assert (attempt.status_code, attempt.error) == (status, error)
    assert attempt.elapsed_s >= 0


def test_a_failed_step_records_each_attempt_its_count_and_time(sleep: RecordingSleep) -> None:
    """The step record of a call that failed after retries said only the last error in words: now each attempt's
    status, error name, code and seconds, the number of attempts and the call's whole time."""
    with RawEndpoint([_error(503, "overloaded", "server_error")], status=503) as endpoint:
        trace = episode(endpoint)
    step = trace.steps[-1]
    assert trace.termination.value == "provider_error" and step.response is None
    failed = step.failed_call
    assert failed is not None
    assert (failed.call, failed.status_code, failed.attempts, failed.refusal) == ("agent", 503, 3, None)
    assert [(a.status_code, a.error, a.code) for a in failed.attempt_failures] == [
        (503, "InternalServerError", "overloaded")
    ] * 3
    assert all(a.elapsed_s >= 0 for a in failed.attempt_failures)
    assert failed.elapsed_s is not None and failed.elapsed_s >= sum(a.elapsed_s for a in failed.attempt_failures)
    assert trace.totals.agent_retries == 2


def test_a_timeout_and_an_unusable_reply_are_recorded_as_attempts(scripted: ScriptedFactory) -> None:
    """No status for an attempt that got no answer; HTTP 200 and InvalidResponseError for one that was no
    completion."""

    async def call(url: str, timeout_s: float) -> Any:
        from contextdelta.providers import ProviderFailure

        policy = RetryPolicy(max_attempts=2, initial_backoff_s=0, jitter_s=0)
        async with OpenAIProvider(base_url=url, model="scripted-oracle", timeout_s=timeout_s, retry=policy) as p:
            try:
                await p.complete([{"role": "user", "content": "hi"}], None)
            except ProviderFailure as failure:
                return failure
        raise AssertionError("the call did not fail")

    with scripted(hang="first:1", no_choices="at:2") as url:
        failure = asyncio.run(call(url, 0.5))
        stats = fetch_stats(url)
    assert stats["requests"] == 2
    assert [(a.status_code, a.error) for a in failure.attempts] == [
        (None, "APITimeoutError"),
        (200, "InvalidResponseError"),
    ]
    assert failure.attempts[0].elapsed_s >= 0.4
