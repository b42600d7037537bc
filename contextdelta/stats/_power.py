"""Power of the primary test by simulation: rejection rates, the minimum detectable difference, tasks needed.

Every simulated dataset is a balanced design (``n_tasks`` tasks, ``repeats`` repeats per condition) reduced to
what the sign-flip test reads: the per-task integer differences ``D_t = k_a - k_b`` of the two conditions' counts
over the repeats, summarised as a histogram over ``-repeats..repeats``. Each dataset is tested with the primary
test itself, from its whole sign-flip distribution: a binomial when all its discordant tasks have the same
``|D_t|`` (always so with one repeat), otherwise the inverse FFT of its closed-form characteristic function (exact
up to rounding, for thousands of datasets at once; the tests check it against `lattice_pvalue`). Datasets whose
statistic spans more than `SIMULATION_EXACT_LIMIT` lattice points (about a hundred discordant tasks) use the
Edgeworth-corrected normal limit of the same distribution (exact mean, variance and fourth cumulant): its
p-values there are typically within 1% of the exact ones (up to about 15% on nearly one-valued lattices), and the
simulated power it gives differs from the all-exact one by at most a few datasets in a thousand (both are checked
in the tests), while the exact route would cost seconds per design of a few hundred tasks. A dataset without a
discordant task never rejects.

Two generating models:

- `RandomEffectsModel`: logit-normal task effects, one shared by the conditions (task difficulty) and one per
  task and condition (a strategy helping on some tasks and hurting on others); its within-task correlation
  ranges from weak to near copies. The size and power simulations of the acceptance tests and benchmarks.
- `PilotModel`: a pilot run's own per-task rates of the two conditions (tasks resampled, conditions swapped at
  random, so the null holds exactly and the pilot's task-to-task variation is kept). A difference ``delta`` is
  a share of tasks that switch entirely (condition a always shows the outcome, or never): the effect of a
  strategy that breaks or fixes whole tasks, as it does at temperature 0. The report's minimum detectable
  difference and ``contextdelta power``.
- `StoryPilotModel`: the same where the pilot's tasks share stories (a task family's story at several horizons):
  the unit drawn is a pilot story, each of its tasks from its own rates, its conditions swapped (null) or all its
  tasks switched (effect) together; `pilot_design` chooses between the two.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field
from scipy.special import expit, logit
from scipy.stats import binom, norm

from contextdelta.stats._samples import TaskPairs

SIMULATION_EXACT_LIMIT = 256
"""Simulated datasets whose sign-flip statistic spans at least this many lattice points (``sum |D_t|``; about a
hundred discordant tasks) use the Edgeworth-corrected normal limit instead of the exact distribution."""
_FFT_CELLS = 1 << 22
DEFAULT_DATASETS = 2_000
"""Simulated datasets per power evaluation: the power of 0.8 is then estimated within +-0.009 (one sd)."""
TARGET_POWER = 0.8
_BISECTION_STEPS = 8

IntMatrix = npt.NDArray[np.int64]
BoolVector = npt.NDArray[np.bool_]


@lru_cache(maxsize=64)
def _spectral_basis(size: int, repeats: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """``(log |cos|, phase)`` of ``(1 + e^(-i theta v)) / 2`` for ``v = 1..repeats`` at the rfft frequencies.

    ``((1 + e^(-i theta v)) / 2)^c = |cos|^c e^(-i c theta v / 2) (-1)^(c [cos < 0])`` with ``cos = cos(theta v / 2)``:
    logs turn the product over v into two matrix products.
    """
    values = np.arange(1, repeats + 1)
    half = np.pi * np.arange(size // 2 + 1)[None, :] * values[:, None] / size  # theta * v / 2, (repeats, freqs)
    cosine = np.cos(half)
    log_magnitude = np.log(np.maximum(np.abs(cosine), 1e-300))
    phase = -half + np.pi * (cosine < 0)
    return log_magnitude, phase


_TAILS: dict[tuple[int, int | bytes], npt.NDArray[np.float64]] = {}
"""Exact upper tails per discordance profile (``counts`` row): pure, so a bounded memo across simulations."""
_TAILS_LIMIT = 200_000
_KEY_BASE = 1 << 12


def _fft_tails(counts: IntMatrix, keys: list[tuple[int, int | bytes]]) -> list[npt.NDArray[np.float64]]:
    """``tails[k] = P(T >= k)`` for each row of ``counts``, from the whole sign-flip distribution.

    ``T = sum_v v * Binomial(c_v, 1/2)`` has the discrete Fourier transform ``prod_v ((1 + e^(-i theta v)) / 2)^c_v``
    in closed form; an inverse FFT of a length above the support gives its distribution exactly up to floating
    rounding (absolute error about 1e-15, far below any test level), for thousands of profiles at once. ``keys``
    name the rows (one integer per distinct profile, with the number of repeats).
    """
    repeats = counts.shape[1]
    missing = [i for i, key in enumerate(keys) if key not in _TAILS]
    if missing:
        if len(_TAILS) > _TAILS_LIMIT:
            _TAILS.clear()
        todo = counts[missing]
        totals = todo @ np.arange(1, repeats + 1)
        size = 1 << int(totals.max()).bit_length()
        log_magnitude, phase = _spectral_basis(size, repeats)
        chunk = max(1, _FFT_CELLS // size)
        for start in range(0, len(missing), chunk):
            c = todo[start : start + chunk].astype(np.float64)
            pmf = np.fft.irfft(np.exp(c @ log_magnitude) * np.exp(1j * (c @ phase)), n=size, axis=1)
            tails = np.cumsum(pmf[:, ::-1], axis=1)[:, ::-1]
            for j, total in enumerate(totals[start : start + chunk].tolist()):
                _TAILS[keys[missing[start + j]]] = tails[j, : total + 1].copy()
    return [_TAILS[key] for key in keys]


def _fft_pvalues(counts: IntMatrix, upper: IntMatrix) -> npt.NDArray[np.float64]:
    """Exact p-values (up to rounding) of datasets, one FFT per distinct discordance profile."""
    repeats = counts.shape[1]
    if _KEY_BASE**repeats < 2**62 and int(counts.max(initial=0)) < _KEY_BASE:
        # One integer per profile: a 1-D unique is much faster than a row-wise one, and names it in the memo.
        codes, first, inverse = np.unique(
            counts @ _KEY_BASE ** np.arange(repeats), return_index=True, return_inverse=True
        )
        unique = counts[first]
        keys: list[tuple[int, int | bytes]] = [(repeats, code) for code in codes.tolist()]
    else:
        unique, inverse = np.unique(counts, axis=0, return_inverse=True)
        keys = [(repeats, row.tobytes()) for row in unique]
    tails = _fft_tails(unique, keys)
    width = max(t.size for t in tails)
    padded = np.zeros((len(tails), width), dtype=np.float64)
    for i, t in enumerate(tails):
        padded[i, : t.size] = t
    return np.asarray(np.clip(2.0 * padded[inverse.reshape(-1), upper], 0.0, 1.0), dtype=np.float64)


def _single_group_pvalues(counts: IntMatrix, upper: IntMatrix) -> npt.NDArray[np.float64]:
    """Exact p-values of datasets whose discordant tasks all have the same ``|D_t|`` (one binomial)."""
    values = np.arange(1, counts.shape[1] + 1)
    value = (counts > 0) @ values  # the one value present
    m = counts.sum(axis=1)
    return np.asarray(np.minimum(1.0, 2.0 * binom.cdf(m - -(-upper // value), m, 0.5)), dtype=np.float64)


def _edgeworth_pvalues(counts: IntMatrix, upper: IntMatrix) -> npt.NDArray[np.float64]:
    """p-values from the normal limit of the sign-flip distribution with its fourth-cumulant (Edgeworth) term.

    ``T = sum_v v * Binomial(c_v, 1/2)`` has mean ``sum v c_v / 2``, variance ``sum v^2 c_v / 4``, no skewness
    (it is symmetric) and fourth cumulant ``-sum v^4 c_v / 8``; a half lattice step of continuity correction.
    """
    values = np.arange(1, counts.shape[1] + 1)
    variance = counts @ (values**2) / 4.0
    kappa4 = -(counts @ (values**4)) / 8.0
    step = np.zeros(counts.shape[0], dtype=np.int64)
    for v in values:
        step = np.where(counts[:, v - 1] > 0, np.gcd(step, v), step)
    z = (upper - step / 2.0 - (counts @ values) / 2.0) / np.sqrt(variance)
    tail = norm.sf(z) + norm.pdf(z) * kappa4 / (24.0 * variance**2) * (z**3 - 3.0 * z)
    return np.asarray(np.clip(2.0 * tail, 0.0, 1.0), dtype=np.float64)


def sign_flip_pvalues(counts: IntMatrix, upper: IntMatrix) -> npt.NDArray[np.float64]:
    """The primary test's p-value of each simulated dataset (1 where no task is discordant).

    Args:
        counts: ``(datasets, repeats)``: column ``v - 1`` holds the number of tasks with ``|D_t| = v``.
        upper: ``(datasets,)``: ``max(sum of positive D_t, sum of |negative D_t|)``.
    """
    groups = (counts > 0).sum(axis=1)
    pvalues = np.ones(counts.shape[0], dtype=np.float64)
    support = counts @ np.arange(1, counts.shape[1] + 1)
    single = groups == 1
    small = (groups > 1) & (support < SIMULATION_EXACT_LIMIT)
    large = (groups > 1) & (support >= SIMULATION_EXACT_LIMIT)
    for mask, route in ((single, _single_group_pvalues), (small, _fft_pvalues), (large, _edgeworth_pvalues)):
        if mask.any():
            pvalues[mask] = route(counts[mask], upper[mask])
    return pvalues


def rejections(histograms: IntMatrix, repeats: int, level: float) -> BoolVector:
    """Whether the primary test rejects at ``level`` on each dataset, from its histogram of ``D_t``.

    ``histograms[i, repeats + d]`` is the number of tasks of dataset i with ``D_t = d``.
    """
    positive = histograms[:, repeats + 1 :]
    negative = histograms[:, repeats - 1 :: -1][:, :repeats]
    values = np.arange(1, repeats + 1)
    upper = np.maximum(positive @ values, negative @ values)
    counts = positive + negative
    return np.asarray((counts.sum(axis=1) > 0) & (sign_flip_pvalues(counts, upper) <= level * (1.0 + 1e-12)))


def histograms_of(differences: IntMatrix, repeats: int) -> IntMatrix:
    """Histograms over ``-repeats..repeats`` of a ``(datasets, n_tasks)`` matrix of per-task ``D_t``."""
    datasets = differences.shape[0]
    width = 2 * repeats + 1
    flat = (differences + repeats) + (np.arange(datasets, dtype=np.int64) * width)[:, None]
    return np.bincount(flat.ravel(), minlength=datasets * width).reshape(datasets, width).astype(np.int64)


@dataclass(frozen=True)
class RandomEffectsModel:
    """Binary outcomes with task-level random effects on the logit scale.

    ``logit P(outcome) = logit(base_rate) + u_t + v_(t, condition) + effect * [condition a]`` with
    ``u_t ~ N(0, task_sd^2)`` shared by both conditions and ``v ~ N(0, interaction_sd^2)`` per task and condition.
    Repeats of a task and condition share ``u + v``: their latent correlation is `within_task_correlation`.
    """

    base_rate: float
    task_sd: float
    interaction_sd: float
    effect: float = 0.0

    @property
    def within_task_correlation(self) -> float:
        """Latent-scale correlation of two repeats of one task and condition (intraclass correlation)."""
        var = self.task_sd**2 + self.interaction_sd**2
        return var / (var + math.pi**2 / 3.0)

    def simulate(
        self, n_tasks: int, repeats: int, datasets: int, rng: np.random.Generator
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
        """Episode outcomes ``(a, b)``, each ``(datasets, n_tasks, repeats)``; repeat j of a and b form a pair."""
        shared = rng.normal(0.0, self.task_sd, (datasets, n_tasks, 1))
        own = rng.normal(0.0, self.interaction_sd, (datasets, n_tasks, 2))
        latent = logit(self.base_rate) + shared + own + np.array([self.effect, 0.0])
        p = expit(latent)
        draws = rng.random((datasets, n_tasks, 2, repeats)) < p[..., None]
        return draws[:, :, 0, :], draws[:, :, 1, :]


def _difference_pmf(
    rates_a: npt.NDArray[np.float64], rates_b: npt.NDArray[np.float64], repeats: int
) -> npt.NDArray[np.float64]:
    """Distribution over ``-repeats..repeats`` of ``Binomial(repeats, p) - Binomial(repeats, q)`` for a task drawn
    at random from the ``(p, q)`` pairs given."""
    k = np.arange(repeats + 1)
    a = binom.pmf(k[None, :], repeats, rates_a[:, None])
    b = binom.pmf(k[None, :], repeats, rates_b[:, None])
    joint = a.T @ b / rates_a.size  # joint[i, j] = P(k_a = i, k_b = j)
    # D = i - j: the diagonals of the joint table, from D = -repeats (i = 0, j = repeats) upwards.
    return np.array([np.trace(joint, offset=-d) for d in range(-repeats, repeats + 1)])


@lru_cache(maxsize=256)
def _null_and_moved(
    rate_a: bytes, rate_b: bytes, repeats: int, direction: str
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """A pilot task's ``D_t`` distribution with the conditions swapped at random, unswitched and switched."""
    a, b = np.frombuffer(rate_a, dtype=np.float64), np.frombuffer(rate_b, dtype=np.float64)
    switched = np.full(a.size, 1.0 if direction == "increase" else 0.0)
    null = _difference_pmf(a, b, repeats) + _difference_pmf(b, a, repeats)
    moved = _difference_pmf(switched, b, repeats) + _difference_pmf(switched, a, repeats)
    return null, moved


@dataclass(frozen=True)
class PilotModel:
    """Per-task outcome rates of two conditions from a pilot run (see the module docstring)."""

    rate_a: npt.NDArray[np.float64]
    rate_b: npt.NDArray[np.float64]

    @classmethod
    def from_pairs(cls, pairs: TaskPairs) -> PilotModel:
        """The pilot model of a comparison's per-task means (each condition over the repeats it has)."""
        return cls(rate_a=pairs.mean_a, rate_b=pairs.mean_b)

    @property
    def n_tasks(self) -> int:
        """Pilot tasks."""
        return int(self.rate_a.size)

    @property
    def mean_rate(self) -> float:
        """The outcome rate of either condition once they are swapped at random (the null)."""
        return float((self.rate_a.mean() + self.rate_b.mean()) / 2.0) if self.n_tasks else 0.0

    @property
    def direction(self) -> Literal["increase", "decrease"]:
        """The direction with more room: switched tasks always show the outcome (increase) or never (decrease)."""
        return "increase" if self.mean_rate <= 0.5 else "decrease"

    @property
    def largest_difference(self) -> float:
        """The largest difference the model can produce: every task switches."""
        return 1.0 - self.mean_rate if self.direction == "increase" else self.mean_rate

    def difference_pmf(self, difference: float, repeats: int) -> npt.NDArray[np.float64]:
        """Distribution of one simulated task's ``D_t`` over ``-repeats..repeats`` at true ``difference`` (>= 0)."""
        share = 0.0 if self.largest_difference == 0.0 else min(1.0, difference / self.largest_difference)
        null, moved = _null_and_moved(self.rate_a.tobytes(), self.rate_b.tobytes(), repeats, self.direction)
        pmf = (1.0 - share) * null + share * moved
        return np.asarray(pmf / pmf.sum(), dtype=np.float64)

    def power(
        self,
        difference: float,
        n_tasks: int,
        repeats: int,
        level: float,
        datasets: int = DEFAULT_DATASETS,
        seed: int = 0,
    ) -> float:
        """Share of ``datasets`` simulated designs in which the primary test rejects at ``level``."""
        if n_tasks < 1 or self.n_tasks == 0:
            return 0.0
        rng = np.random.default_rng(seed)
        histograms = rng.multinomial(n_tasks, self.difference_pmf(difference, repeats), size=datasets)
        return float(rejections(histograms.astype(np.int64), repeats, level).mean())


@lru_cache(maxsize=256)
def _story_null_and_moved(
    rate_a: bytes, rate_b: bytes, groups: bytes, repeats: int, direction: str
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """`_null_and_moved` for stories: a story's ``D_s`` is the sum of its tasks' ``D_t``, its conditions swapped
    together (null) or all its tasks switched (moved); stories weigh equally, each centred on the widest one's
    lattice."""
    a, b = np.frombuffer(rate_a, dtype=np.float64), np.frombuffer(rate_b, dtype=np.float64)
    codes = np.frombuffer(groups, dtype=np.int64)
    switched = 1.0 if direction == "increase" else 0.0
    largest = int(np.bincount(codes).max())
    null = np.zeros(2 * repeats * largest + 1)
    moved = np.zeros_like(null)

    def story_pmf(first: npt.NDArray[np.float64], second: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        out = np.ones(1)
        for p, q in zip(first.tolist(), second.tolist(), strict=True):
            out = np.convolve(out, _difference_pmf(np.array([p]), np.array([q]), repeats))
        return out

    for story in range(int(codes.max()) + 1):
        mine = codes == story
        pa, pb, on = a[mine], b[mine], np.full(int(mine.sum()), switched)
        offset = repeats * (largest - int(mine.sum()))
        span = slice(offset, null.size - offset)
        null[span] += story_pmf(pa, pb) + story_pmf(pb, pa)
        moved[span] += story_pmf(on, pb) + story_pmf(on, pa)
    return null, moved


@dataclass(frozen=True)
class StoryPilotModel(PilotModel):
    """A `PilotModel` whose tasks share stories: the unit simulated is a story drawn at random from the pilot, with
    each of its tasks' outcomes drawn from that task's own rates, its conditions swapped together under the null, and
    the whole story switched by an effect. ``repeats`` of its methods is a story's lattice: the repeats per task times
    the largest story's number of tasks."""

    groups: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """The story code (0..n-1) of each task."""

    @property
    def n_tasks(self) -> int:
        """Pilot stories (the unit)."""
        return int(self.groups.max()) + 1 if self.groups.size else 0

    @property
    def largest_story(self) -> int:
        """Tasks in the largest story."""
        return int(np.bincount(self.groups).max()) if self.groups.size else 1

    def difference_pmf(self, difference: float, repeats: int) -> npt.NDArray[np.float64]:
        """Distribution of one simulated story's ``D_s`` over ``-repeats..repeats`` (``repeats``: per task times the
        largest story's tasks) at true ``difference`` (>= 0)."""
        share = 0.0 if self.largest_difference == 0.0 else min(1.0, difference / self.largest_difference)
        per_task = max(1, repeats // self.largest_story)
        null, moved = _story_null_and_moved(
            self.rate_a.tobytes(), self.rate_b.tobytes(), self.groups.tobytes(), per_task, self.direction
        )
        pmf = (1.0 - share) * null + share * moved
        out = np.zeros(2 * repeats + 1)
        width = (pmf.size - 1) // 2
        out[repeats - width : repeats + width + 1] = pmf
        return np.asarray(out / out.sum(), dtype=np.float64)


class DetectableDifference(BaseModel):
    """The minimum difference the primary test detects with the target power, for one comparison's design."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    n_tasks: int = Field(ge=0, description="Units of the design: tasks, or stories where tasks share them.")
    repeats: int = Field(
        ge=1, description="Repeats per unit of the design (a story: its tasks' episodes per condition)."
    )
    level: float = Field(
        gt=0.0, le=1.0, description="Test level: alpha over the testable family size (Holm's first step)."
    )
    target_power: float = Field(gt=0.0, lt=1.0, description="The power sought.")
    datasets: int = Field(ge=1, description="Simulated datasets per evaluated difference.")
    seed: int = Field(description="Seed of the simulation.")
    direction: Literal["increase", "decrease"] = Field(description="Of condition a's rate, in the simulated effect.")
    largest_difference: float | None = Field(
        ge=0.0, le=1.0, description="Every task switched; no larger difference exists. None: no data (see no_data)."
    )
    power_at_largest: float | None = Field(
        ge=0.0, le=1.0, description="Power at largest_difference. None: no data, nothing was simulated (see no_data)."
    )
    difference: float | None = Field(
        ge=0.0,
        le=1.0,
        description="Smallest simulated difference with the target power; None: not reachable, or no data.",
    )
    no_data: str | None = Field(
        default=None,
        description="Why nothing was simulated (the design has no unit: no task with a value in both conditions); "
        "absent where there was data.",
    )


def pilot_design(pairs: TaskPairs, repeats: int) -> tuple[PilotModel, int, int]:
    """The pilot model of a comparison and the design its power is simulated for: ``(model, units, repeats per
    unit)``.

    Where every task is its own unit: the per-task rates, the tasks and ``repeats``. Where tasks share stories, the
    unit the primary test flips is the story: a `StoryPilotModel` of the per-task rates grouped by story, the
    stories, and ``repeats`` times the largest story's number of tasks (a story's lattice).
    """
    groups = pairs.groups
    if groups is None:
        return PilotModel.from_pairs(pairs), pairs.n_tasks, repeats
    model = StoryPilotModel(rate_a=pairs.mean_a, rate_b=pairs.mean_b, groups=groups)
    return model, model.n_tasks, repeats * model.largest_story


NO_PILOT_DATA = (
    "no data: no task has a value in both conditions (e.g. every episode of one is a failed trial, which has no "
    "verdict), so there is nothing to simulate from"
)
"""`DetectableDifference.no_data` of a design without a unit."""


def minimum_detectable_difference(
    pilot: PilotModel,
    n_tasks: int,
    repeats: int,
    level: float,
    *,
    target_power: float = TARGET_POWER,
    datasets: int = DEFAULT_DATASETS,
    seed: int = 0,
) -> DetectableDifference:
    """Smallest difference (rate scale) detected with ``target_power`` at ``level``, by bisection on simulated power.

    Every evaluation uses the same seed, so the result is deterministic; its resolution is ``largest_difference``
    / 256 (under 0.4 pp), finer than the whole percentage points it is printed in.

    A design without a unit (``n_tasks`` 0, or a pilot without a task) simulates nothing: its power and largest
    difference are None and ``no_data`` says why, never a power of 0 that would read as measured.
    """
    common = {
        "n_tasks": n_tasks,
        "repeats": repeats,
        "level": level,
        "target_power": target_power,
        "datasets": datasets,
        "seed": seed,
        "direction": pilot.direction,
    }
    if n_tasks == 0 or pilot.n_tasks == 0:
        return DetectableDifference(
            largest_difference=None, power_at_largest=None, difference=None, no_data=NO_PILOT_DATA, **common
        )
    common["largest_difference"] = pilot.largest_difference
    top = pilot.power(pilot.largest_difference, n_tasks, repeats, level, datasets, seed)
    if top < target_power:
        return DetectableDifference(power_at_largest=top, difference=None, **common)
    low, high = 0.0, pilot.largest_difference
    for _ in range(_BISECTION_STEPS):
        middle = (low + high) / 2.0
        if pilot.power(middle, n_tasks, repeats, level, datasets, seed) >= target_power:
            high = middle
        else:
            low = middle
    return DetectableDifference(power_at_largest=top, difference=high, **common)


def stable_window(n_tasks: int) -> int:
    """How many sizes after ``n_tasks`` must also reach the target power for `tasks_needed` to name it:
    ``max(5, ceil(n_tasks / 20))``."""
    return max(5, math.ceil(n_tasks / 20))


def tasks_needed(
    pilot: PilotModel,
    difference: float,
    repeats: int,
    level: float,
    *,
    target_power: float = TARGET_POWER,
    datasets: int = DEFAULT_DATASETS,
    seed: int = 0,
    max_tasks: int = 20_000,
) -> int | None:
    """Fewest tasks ``n`` with ``target_power`` for ``difference`` at ``level`` and ``repeats`` such that the next
    `stable_window` (``max(5, n / 20)``) sizes reach it too; None above ``max_tasks``.

    The power of an exact test is a sawtooth in ``n`` (its attainable levels jump with ``n``; the simulation adds
    noise of about a percent), so the first ``n`` that reaches the target can be followed by sizes that do not: a
    plan should not land on such a tooth. Doubling from 2 tasks, then bisection, find the first crossing; from there
    the sizes are checked upwards, and a size in the window that falls short moves the answer to the next size that
    reaches the target. The same seed at every evaluation, so the answer is deterministic.
    """
    if difference > pilot.largest_difference + 1e-12:
        return None
    known: dict[int, bool] = {}

    def enough(n: int) -> bool:
        if n not in known:
            known[n] = pilot.power(difference, n, repeats, level, datasets, seed) >= target_power
        return known[n]

    n = 2
    while not enough(n):
        if n >= max_tasks:
            return None
        n = min(2 * n, max_tasks)
    low, high = n // 2, n
    while high - low > 1:
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle
    candidate = high
    while candidate <= max_tasks:
        short = next((m for m in range(candidate + 1, candidate + stable_window(candidate) + 1) if not enough(m)), None)
        if short is None:
            return candidate
        candidate = short + 1
        while candidate <= max_tasks and not enough(candidate):
            candidate += 1
    return None
