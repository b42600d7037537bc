"""The redactor's fast path (one search for "anything to mask?") never changes what it returns."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextdelta.redaction import _BEARER, _KEY_HEADER, _KEY_LIKE, REDACTED, Redactor

SECRET = "s3cret-value-42"
PIECES = [
    "sk-abcdefghijklmnop",
    "Bearer abcdefgh123",
    "basic QWxhZGRpbjpvcGVu",
    "api_key: 'abcdefgh1'",
    "X-API-KEY=zzzzzzzzzz",
    SECRET,
    "plain words",
    " ",
    "\n",
    "sk-short",
    "bearer x",
]


def slow(value: str, secrets: set[str]) -> str:
    """The redactor's rule written out in full (no shortcut)."""
    for secret in sorted(secrets, key=len, reverse=True):
        value = value.replace(secret, REDACTED)
    value = _KEY_LIKE.sub(REDACTED, value)
    value = _KEY_HEADER.sub(lambda m: f"{m.group(1)}{REDACTED}", value)
    return _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", value)


@given(st.lists(st.sampled_from(PIECES) | st.text(max_size=12), max_size=8))
def test_the_fast_path_returns_what_the_full_rule_returns(parts: list[str]) -> None:
    text = "".join(parts)
    assert Redactor([SECRET]).text(text) == slow(text, {SECRET})
    assert Redactor().text(text, extra=[SECRET]) == slow(text, {SECRET})


def test_a_string_with_nothing_to_mask_is_returned_as_is() -> None:
    text = "order A-1042 refunded 8900 cents"
    assert Redactor([SECRET]).text(text) is text
    assert re.search(re.escape(REDACTED), Redactor([SECRET]).text(f"key {SECRET}"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "AGENT_BASE_URL=https://bob:hunter2secret@proxy.example/v1 run",
            "AGENT_BASE_URL=https://[REDACTED]@proxy.example/v1 run",
        ),
        ("postgresql+psycopg://u:pw@127.0.0.1:5432/x", "postgresql+psycopg://[REDACTED]@127.0.0.1:5432/x"),
        ("http://host:8000/v1 and user@example.com", "http://host:8000/v1 and user@example.com"),
    ],
)
def test_credentials_in_a_url_are_masked_without_being_declared(text: str, expected: str) -> None:
    assert Redactor().text(text) == expected
