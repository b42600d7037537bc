"""`fixed`, the one rounding of every printed rate, percentage and mean: half up, any finite size, and the
non-finite as Python prints them (it raised decimal.InvalidOperation beyond 28 digits and on inf)."""

from __future__ import annotations

import pytest

from contextdelta.stats import fixed, rounded_half_even


@pytest.mark.parametrize(
    ("value", "decimals", "signed", "printed"),
    [
        (1e30, 0, False, "1000000000000000000000000000000"),
        (1e26, 3, False, "100000000000000000000000000.000"),
        (float("inf"), 1, False, "inf"),
        (float("-inf"), 0, True, "-inf"),
        (2.5, 0, False, "3"),
        (-2.5, 0, True, "-3"),
        (-0.0001, 1, True, "+0.0"),
    ],
)
def test_fixed_rounds_half_up_at_any_size(value: float, decimals: int, signed: bool, printed: str) -> None:
    assert fixed(value, decimals, signed=signed) == printed


def test_half_even_is_only_the_earlier_versions_rounding_inside_its_context() -> None:
    with rounded_half_even():
        assert fixed(0.125, 0, scale=100.0) == "12" and fixed(2.5, 0, signed=True) == "+2"
    assert fixed(0.125, 0, scale=100.0) == "13"
