"""Canonical JSON is exactly ``json.dumps(sort_keys, compact separators, UTF-8 kept, no NaN)``: every hash in a run
directory and every receipt of an earlier run depends on these bytes, so the encoder built once must not differ
from the one json.dumps builds per call, in output or in what it refuses."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextdelta.canonical import canonical_json, content_hash

SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=40)


def reference(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@given(JSON)
def test_canonical_json_is_json_dumps_with_the_canonical_arguments(value: object) -> None:
    assert canonical_json(value) == reference(value)


@pytest.mark.parametrize(
    "value",
    ['\u2028\x00\x1f"\\\u00e9\U0001f600', 1e16, 1e-05, -0.0, 10**40, (1, "a"), {"b": 1, "a": {"d": [], "c": {}}}],
)
def test_the_values_whose_text_is_easy_to_get_wrong(value: object) -> None:
    assert canonical_json(value) == reference(value)


@pytest.mark.parametrize("value", [math.nan, math.inf, {"a": [math.nan]}, object(), {1: 2, "a": 3}])
def test_what_json_dumps_refuses_is_refused_the_same_way(value: object) -> None:
    with pytest.raises((ValueError, TypeError)) as expected:
        reference(value)
    with pytest.raises(expected.type, match=str(expected.value).replace("(", r"\(").replace(")", r"\)")):
        canonical_json(value)


def test_content_hash_is_the_sha256_of_the_canonical_text() -> None:
    assert content_hash({"b": 1, "a": "\u00e9"}) == "aa58fba8483623bed37c1b02edfccbdd9a53123837c20bfa4cb4049993a2872e"
