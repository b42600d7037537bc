"""The primary paired test: an exact sign-flip permutation test over tasks.

Per task t the difference ``d_t`` of the two conditions' means over the task's repeats. Under the null hypothesis
the conditions are exchangeable within each task, so each ``d_t`` is as likely to carry either sign and every one
of the ``2^m`` sign patterns of the ``m`` discordant tasks (``d_t != 0``) is equally likely. The two-sided p-value
is the share of patterns with ``|sum d| >= |observed sum d|``.

How the share is computed (all three give the same p-value up to the Monte-Carlo error of the last one):

1. **Lattice convolution (exact).** For integer-valued outcomes (0/1, counts) every ``d_t`` is a multiple of
   ``1/L`` (``L`` the least common multiple of the repeat counts), so ``D_t = L d_t`` is an integer and, with
   ``T`` the sum of ``|D_t|`` over the tasks whose sign is +, ``sum D = 2T - sum|D|``. ``T`` is a sum of independent
   ``|D_t| * Bernoulli(1/2)``, whose distribution is the convolution of one binomial per distinct ``|D_t|``: the
   complete distribution over all ``2^m`` patterns, in polynomial time, for any ``m``. When every discordant task
   has the same ``|D_t|`` (always so with one repeat and a 0/1 outcome) it is one binomial and the p-value is
   ``min(1, 2 * binom.cdf(min(n+, n-), m, 1/2))``: the exact McNemar test on tasks, by the same scipy call
   statsmodels makes.
2. **Enumeration (exact).** Otherwise, with at most `ENUMERATION_LIMIT` discordant tasks, every pattern is listed.
3. **Monte Carlo.** Otherwise `MONTE_CARLO_PATTERNS` seeded random patterns, ``p = (1 + k) / (1 + B)`` (a valid
   p-value), with its standard error.

Where tasks share stories (a task family's story told at several horizons), the unit is the story: its tasks'
differences are added (``D_s``, the sum of its ``d_t``) and flipped together, since under the null the conditions
are exchangeable for the story as a whole and its tasks are not independent of one another. The statistic, the sum
of every ``d_t``, is the same; the counts (discordant, positive, negative) are then of stories.

``scipy.stats.permutation_test(..., permutation_type="samples")`` computes the same exact p-value by enumeration
and is the reference in the tests; it takes seconds at 18 discordant tasks, too slow for a report with dozens of
comparisons, hence the convolution.

**Unequal sides.** Flipping a task's sign swaps its two sides as blocks, a symmetry of the null only when both sides
have the same number of episodes: with 4 repeats against 1 at a low rate, ``d_t`` is mostly a small positive number and
now and then a large negative one, and flipping the signs of such differences (40 tasks, task rates from Beta(0.3, 3),
no true difference) rejected 1.8% of 10,000 datasets at alpha 0.01 and 0.4% at alpha 0.001. A task whose sides differ in
size (a failed trial left out of one condition, a resumed run) is therefore tested on equally many episodes per side:
the repeats both sides have (both episodes of such a pair share their sampling seed), then each side's earliest other
repeats, ``min(n_a, n_b)`` in all, where the swap is a symmetry again; its other episodes still count in the effect and
its interval. No task leaves the test for it: a task enters a paired comparison when each side has an episode with a
value (`pair_by_task`), in the test, the effect and power alike. Copying every repeat changes nothing, as before:
repeats are not evidence of their own. `pair_by_task` builds these balanced pairs (`TaskPairs.balanced`,
`TaskPairs.tested`); pairs built by hand without them are tested as they are.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import numpy.typing as npt
from scipy.stats import binom

from contextdelta.stats._results import SignFlipMethod, SignFlipTest
from contextdelta.stats._samples import TaskPairs

ENUMERATION_LIMIT = 20
"""At most this many discordant tasks are enumerated pattern by pattern when the lattice route is unavailable."""
MONTE_CARLO_PATTERNS = 100_000
"""Random sign patterns drawn when neither exact route is affordable."""
_LATTICE_WORK_LIMIT = 200_000_000
"""Multiply-adds the lattice convolution may take before the test falls back to enumeration or Monte Carlo."""
_MAX_LATTICE_SCALE = 1 << 31
_PATTERN_CHUNK = 1 << 16

Groups = tuple[tuple[int, int], ...]
"""``((value, count), ...)``: how many discordant tasks have each integer ``|D_t|``, values ascending."""


@lru_cache(maxsize=8192)
def _upper_tails(groups: Groups) -> npt.NDArray[np.float64]:
    """``tails[k] = P(T >= k)`` for ``T = sum over groups of value * Binomial(count, 1/2)``; read-only."""
    pmf = np.ones(1, dtype=np.float64)
    for value, count in groups:
        kernel = binom.pmf(np.arange(count + 1), count, 0.5)
        out = np.zeros(pmf.size + value * count, dtype=np.float64)
        # Adding value * j keeps an index's residue modulo value: each residue class is a dense convolution.
        for residue in range(min(value, pmf.size)):
            out[residue::value] = np.convolve(pmf[residue::value], kernel)
        pmf = out
    tails = np.cumsum(pmf[::-1])[::-1]
    tails.setflags(write=False)
    return tails


def _lattice_work(groups: Groups) -> int:
    size, work = 1, 0
    for value, count in groups:
        work += size * (count + 1)
        size += value * count
    return work


def lattice_pvalue(groups: Groups, upper: int) -> float:
    """Two-sided sign-flip p-value on an integer lattice.

    Args:
        groups: the discordant tasks' ``|D_t|`` values and how many tasks have each (see `Groups`).
        upper: ``max(sum of D_t over positive tasks, sum of |D_t| over negative tasks)``.
    """
    if len(groups) == 1:
        value, count = groups[0]
        # One binomial: the exact McNemar form, min(1, 2 * P(Binomial <= the smaller side)).
        smaller = count - -(-upper // value)  # P(value * B >= upper) = P(B <= count - ceil(upper / value))
        return float(min(1.0, 2.0 * binom.cdf(smaller, count, 0.5)))
    return float(min(1.0, 2.0 * _upper_tails(groups)[upper]))


def lattice_differences(pairs: TaskPairs) -> tuple[npt.NDArray[np.int64], int] | None:
    """The per-task differences as exact fractions ``numerators / denominator`` in lowest terms over all tasks, or
    None when the values are not integers (or the lattice is too fine to hold in 64-bit integers).

    Lowest terms make the representation canonical: copying every repeat gives the same numbers.
    """
    if not pairs.integral or pairs.n_tasks == 0:
        return None
    scale = int(np.lcm.reduce(np.concatenate((pairs.n_a, pairs.n_b))))
    if scale > _MAX_LATTICE_SCALE or max(float(pairs.sum_a.max()), float(pairs.sum_b.max())) * scale > 2**53:
        return None
    sum_a, sum_b = pairs.sum_a.astype(np.int64), pairs.sum_b.astype(np.int64)
    numerators = sum_a * (scale // pairs.n_a) - sum_b * (scale // pairs.n_b)
    common = math.gcd(int(np.gcd.reduce(np.abs(numerators))), scale)
    return numerators // common, scale // common


def _by_unit(pairs: TaskPairs, values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Per-task values added up per story (the test's unit); the values themselves where every task is its own."""
    groups = pairs.groups
    if groups is None:
        return values
    return np.bincount(groups, weights=values, minlength=int(groups.max()) + 1).astype(np.float64)


def unit_differences(pairs: TaskPairs) -> tuple[tuple[str, ...], npt.NDArray[np.float64]]:
    """The test's units (stories where tasks share them, else tasks) and each one's difference: the sum of its
    tasks' differences of means (a task's own difference where it is its own unit)."""
    if pairs.clusters is None:
        return pairs.task_ids, pairs.differences
    exact = lattice_differences(pairs)
    # from the exact lattice where there is one: a story whose tasks cancel is exactly 0, not a rounding residue
    summed = (
        _by_unit(pairs, pairs.differences) if exact is None else _by_unit(pairs, exact[0].astype(np.float64)) / exact[1]
    )
    return tuple(sorted(set(pairs.clusters))), summed


def _lattice(pairs: TaskPairs) -> npt.NDArray[np.int64] | None:
    """The per-unit differences as integers on their common lattice, divided by their gcd (the test is
    scale-free)."""
    found = lattice_differences(pairs)
    if found is None:
        return None
    lattice = found[0]
    groups = pairs.groups
    if groups is not None:
        per_story = np.zeros(int(groups.max()) + 1, dtype=np.int64)
        np.add.at(per_story, groups, lattice)
        lattice = per_story
    nonzero = np.abs(lattice[lattice != 0])
    return lattice // int(np.gcd.reduce(nonzero)) if nonzero.size else lattice


def _groups(lattice: npt.NDArray[np.int64]) -> Groups:
    values, counts = np.unique(np.abs(lattice[lattice != 0]), return_counts=True)
    return tuple((int(v), int(c)) for v, c in zip(values, counts, strict=True))


def _enumerated_pvalue(magnitudes: npt.NDArray[np.float64], observed: float) -> float:
    """Share of all 2^m sign patterns with ``|sum| >= |observed|`` (m = magnitudes.size <= ENUMERATION_LIMIT)."""
    m = magnitudes.size
    bits = np.arange(m, dtype=np.int64)
    tolerance = 1e-9 * max(1.0, abs(observed))
    hits = 0
    for start in range(0, 1 << m, _PATTERN_CHUNK):
        patterns = np.arange(start, min(start + _PATTERN_CHUNK, 1 << m), dtype=np.int64)
        signs = ((patterns[:, None] >> bits) & 1) * 2.0 - 1.0
        hits += int((np.abs(signs @ magnitudes) >= abs(observed) - tolerance).sum())
    return hits / float(1 << m)


def _monte_carlo_pvalue(magnitudes: npt.NDArray[np.float64], observed: float, seed: int) -> tuple[float, float]:
    """``(p, standard error)`` from `MONTE_CARLO_PATTERNS` seeded random sign patterns, ``p = (1 + k) / (1 + B)``."""
    rng = np.random.default_rng(seed)
    tolerance = 1e-9 * max(1.0, abs(observed))
    chunk = max(1, (1 << 22) // magnitudes.size)
    hits = 0
    for start in range(0, MONTE_CARLO_PATTERNS, chunk):
        size = min(chunk, MONTE_CARLO_PATTERNS - start)
        signs = rng.integers(0, 2, size=(size, magnitudes.size), dtype=np.int8) * 2.0 - 1.0
        hits += int((np.abs(signs @ magnitudes) >= abs(observed) - tolerance).sum())
    p = (1.0 + hits) / (1.0 + MONTE_CARLO_PATTERNS)
    return p, math.sqrt(p * (1.0 - p) / MONTE_CARLO_PATTERNS)


def sign_flip_test(pairs: TaskPairs, seed: int = 0) -> SignFlipTest:
    """The two-sided sign-flip permutation test over tasks (stories, where tasks share them) of ``pairs`` (see the
    module docstring).

    ``seed`` is used only on the Monte-Carlo route. A comparison without a discordant unit is not testable: its
    p-value is None and it leaves its Holm family. Where some task's two sides differ in size the test takes
    ``pairs.tested`` (see the module docstring).
    """
    pairs = pairs.tested
    lattice = _lattice(pairs)
    d = unit_differences(pairs)[1]
    positive, negative = d > 0, d < 0
    common = {
        "n_tasks": pairs.n_units,
        "n_discordant": int(positive.sum() + negative.sum()),
        "n_positive": int(positive.sum()),
        "n_negative": int(negative.sum()),
        "statistic": float(d.sum()),
    }
    if common["n_discordant"] == 0:
        return SignFlipTest(method=SignFlipMethod.NOT_TESTABLE, pvalue=None, **common)
    if lattice is not None:
        groups = _groups(lattice)
        if len(groups) == 1 or _lattice_work(groups) <= _LATTICE_WORK_LIMIT:
            upper = max(int(lattice[lattice > 0].sum()), int(-lattice[lattice < 0].sum()))
            return SignFlipTest(method=SignFlipMethod.EXACT, pvalue=lattice_pvalue(groups, upper), **common)
    magnitudes = np.abs(d[d != 0])
    if magnitudes.size <= ENUMERATION_LIMIT:
        return SignFlipTest(
            method=SignFlipMethod.EXACT, pvalue=_enumerated_pvalue(magnitudes, float(d.sum())), **common
        )
    p, se = _monte_carlo_pvalue(magnitudes, float(d.sum()), seed)
    return SignFlipTest(
        method=SignFlipMethod.MONTE_CARLO,
        pvalue=p,
        sign_patterns=MONTE_CARLO_PATTERNS,
        seed=seed,
        pvalue_mc_se=se,
        **common,
    )
