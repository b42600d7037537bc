"""Exact McNemar tests on paired episodes and Holm's step-down adjustment for a family of them."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TypeVar

import numpy as np
import numpy.typing as npt
from scipy.stats import binomtest

from contextdelta.stats._results import EstimateStatus, McNemarResult
from contextdelta.stats._samples import PairedSample

K = TypeVar("K", bound=Hashable)


def mcnemar_pvalue(only_a: int, only_b: int) -> float:
    """Exact two-sided McNemar p-value from the discordant counts (binomial, p = 0.5); 1.0 when both are 0."""
    if only_a < 0 or only_b < 0:
        raise ValueError(f"discordant counts must be non-negative, got {only_a}, {only_b}")
    if only_a + only_b == 0:
        return 1.0
    return float(min(1.0, binomtest(only_a, only_a + only_b, 0.5, alternative="two-sided").pvalue))


def mcnemar_exact(sample: PairedSample) -> McNemarResult:
    """Exact McNemar test of a 0/1 outcome between conditions a and b on their (task, repeat) pairs.

    Raises:
        ValueError: when a value is not 0/1.
    """
    mask = sample.mask
    a, b = sample.a[mask], sample.b[mask]
    if not (np.isin(a, (0.0, 1.0)).all() and np.isin(b, (0.0, 1.0)).all()):
        raise ValueError("McNemar needs a 0/1 outcome in both conditions")
    a_on, b_on = a == 1.0, b == 1.0
    only_a, only_b = int((a_on & ~b_on).sum()), int((~a_on & b_on).sum())
    if sample.n_pairs == 0:
        status, note = EstimateStatus.NO_DATA, "no data: no paired episodes; p = 1 by convention"
    elif only_a + only_b == 0:
        status, note = EstimateStatus.OK, "no discordant pairs: p = 1"
    else:
        status, note = EstimateStatus.OK, ""
    return McNemarResult(
        n_pairs=sample.n_pairs,
        n_tasks=sample.n_tasks,
        both=int((a_on & b_on).sum()),
        only_a=only_a,
        only_b=only_b,
        neither=int((~a_on & ~b_on).sum()),
        pvalue=mcnemar_pvalue(only_a, only_b),
        n_unpaired=sample.n_unpaired,
        status=status,
        note=note,
    )


def holm_adjust(pvalues: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Holm step-down adjusted p-values, in the input order.

    With p-values sorted ascending p_(1) <= ... <= p_(m), the adjusted value of p_(i) is
    ``max_{j <= i} min(1, (m - j + 1) * p_(j))``.

    Raises:
        ValueError: when the input is not one-dimensional or holds a value outside [0, 1] (or NaN).
    """
    p = np.asarray(pvalues, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"p-values must be one-dimensional, got shape {p.shape}")
    if not ((p >= 0.0) & (p <= 1.0)).all():
        raise ValueError("p-values must lie in [0, 1]")
    m = p.size
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    adjusted = np.empty(m, dtype=np.float64)
    adjusted[order] = stepped
    return adjusted


def holm_family(results: Mapping[K, McNemarResult]) -> dict[K, McNemarResult]:
    """Copies of a family's McNemar results with ``pvalue_holm`` filled in (the family is ``results``)."""
    keys = list(results)
    adjusted = holm_adjust([results[k].pvalue for k in keys])
    return {k: results[k].model_copy(update={"pvalue_holm": float(v)}) for k, v in zip(keys, adjusted, strict=True)}
