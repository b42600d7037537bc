"""The printed forms of p-values and differences: what a reader compares with alpha or reads as a size."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from contextdelta.report import pvalue


def _side(value: float, alpha: float) -> int:
    return (value > alpha) - (value < alpha)


@pytest.mark.parametrize(
    ("value", "alpha", "printed"),
    [
        (0.0496, 0.05, "0.0496"),  # two decimals would print 0.05: "significant" next to "0.05"
        (0.0504, 0.05, "0.0504"),
        (0.04999, 0.05, "0.04999"),
        (0.05, 0.05, "0.05"),
        (0.015625, 0.05, "0.016"),
        (0.5, 0.05, "0.5"),
        (0.00996, 0.01, "0.00996"),
        (0.99997, 0.05, "0.99997"),  # never "1" unless it is exactly 1
        (1.0, 0.05, "1"),
        (3.1e-7, 0.05, "3.1e-07"),  # never "0" / "<0.0001"
        (0.0, 0.05, "0"),
        (None, 0.05, "-"),
    ],
)
def test_pvalue_prints_on_the_same_side_of_alpha(value: float | None, alpha: float, printed: str) -> None:
    assert pvalue(value, alpha) == printed


def test_pvalue_side_of_alpha_holds_for_holm_adjusted_values_near_alpha() -> None:
    """Holm-adjusted p-values (checked against statsmodels) close to alpha print on their own side of it."""
    rng = np.random.default_rng(3)
    for alpha in (0.05, 0.01, 0.1):
        raw = alpha / 3 + rng.normal(0.0, alpha / 300, size=(200, 3))
        for row in np.clip(raw, 1e-12, 1.0):
            adjusted = multipletests(row, alpha=alpha, method="holm")[1]
            for value in adjusted:
                text = pvalue(float(value), alpha)
                assert _side(float(text), alpha) == _side(float(value), alpha), (value, text)
                assert float(text) not in (0.0, 1.0)
