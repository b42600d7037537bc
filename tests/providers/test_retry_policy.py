"""Which failures are retried and how long the server asks us to wait."""

from __future__ import annotations

import email.utils

import pytest

from contextdelta.providers import (
    EndpointConnectionError,
    EndpointStatusError,
    EndpointTimeout,
    RetryPolicy,
    is_retryable,
    retry_after_seconds,
)


def status_error(status: int) -> EndpointStatusError:
    return EndpointStatusError(status, {}, f'{{"error": {{"message": "HTTP {status}"}}}}')


@pytest.mark.parametrize(
    ("status", "retry"),
    [
        (400, False),
        (401, False),
        (404, False),
        (408, True),
        (409, False),
        (422, False),
        (429, True),
        (500, True),
        (501, False),  # Not Implemented: the server takes no POST there, now or later
        (502, True),
        (503, True),
        (504, True),
        (505, False),  # HTTP Version Not Supported
        (599, True),
    ],
)
def test_retryable_statuses(status: int, retry: bool) -> None:
    assert is_retryable(status_error(status)) is retry


def test_timeouts_and_connection_errors_are_retryable() -> None:
    assert is_retryable(EndpointTimeout())
    assert is_retryable(EndpointConnectionError("Connection error."))
    assert not is_retryable(ValueError("x"))


def test_retry_after_forms() -> None:
    now = 1_000_000.0
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after": "1.5"}) == 1.5
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"retry-after": email.utils.formatdate(now + 20, usegmt=True)}, now=now) == 20.0
    assert retry_after_seconds({"retry-after": email.utils.formatdate(now - 20, usegmt=True)}, now=now) == 0.0
    assert retry_after_seconds({"retry-after": "-4"}) == 0.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None
    assert retry_after_seconds(None) is None


def test_policy_validation() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="negative"):
        RetryPolicy(max_total_s=-1)


@pytest.mark.parametrize(
    ("status", "name"),
    [(400, "BadRequestError"), (401, "AuthenticationError"), (429, "RateLimitError"), (503, "InternalServerError")],
)
def test_status_errors_read_like_the_openai_library_s(status: int, name: str) -> None:
    error = EndpointStatusError(status, {"Retry-After": "2"}, '{"error": {"message": "nope", "code": "x_code"}}')
    assert error.name == name
    assert error.message == f"Error code: {status} - {{'error': {{'message': 'nope', 'code': 'x_code'}}}}"
    assert error.body == {"message": "nope", "code": "x_code"} and error.code == "x_code"
    assert error.headers == {"retry-after": "2"}
    plain = EndpointStatusError(status, {}, "upstream gone\n")
    assert plain.message == "upstream gone" and plain.body == "upstream gone\n" and plain.code is None
