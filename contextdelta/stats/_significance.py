"""Holm's step-down adjustment over a family of task-level tests, and the episode-level 2x2 description."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from contextdelta.stats._results import PairTable, SignFlipTest
from contextdelta.stats._samples import PairedSample

K = TypeVar("K", bound=Hashable)


def pair_table(sample: PairedSample) -> PairTable:
    """The 2x2 table of a 0/1 outcome on (task, repeat) pairs (a description; the test is task-level).

    Raises:
        ValueError: when a value is not 0/1.
    """
    mask = sample.mask
    a, b = sample.a[mask], sample.b[mask]
    if not (np.isin(a, (0.0, 1.0)).all() and np.isin(b, (0.0, 1.0)).all()):
        raise ValueError("a 2x2 table needs a 0/1 outcome in both conditions")
    a_on, b_on = a == 1.0, b == 1.0
    return PairTable(
        n_pairs=sample.n_pairs,
        n_tasks=sample.n_tasks,
        both=int((a_on & b_on).sum()),
        only_a=int((a_on & ~b_on).sum()),
        only_b=int((~a_on & b_on).sum()),
        neither=int((~a_on & ~b_on).sum()),
        n_unpaired=sample.n_unpaired,
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


def holm_family(tests: Mapping[K, SignFlipTest]) -> dict[K, SignFlipTest]:
    """Copies of a family's tests with ``pvalue_holm`` and ``family_size`` filled in.

    Only testable members form the family: a comparison without a discordant task cannot reject whatever the
    data, so counting it would only make the others' adjustment stricter. Its copy keeps ``pvalue_holm`` None.
    """
    testable = {k: t.pvalue for k, t in tests.items() if t.testable and t.pvalue is not None}
    adjusted = holm_adjust(list(testable.values()))
    out = dict(tests)
    for key, value in zip(testable, adjusted, strict=True):
        out[key] = tests[key].model_copy(update={"pvalue_holm": float(value), "family_size": len(testable)})
    return out
