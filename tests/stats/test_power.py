"""Size and power of the primary test by seeded, vectorised simulation (the acceptance simulation of issue 19), the
simulation's own p-value routes against the exact test, and the pilot-based planning functions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

import contextdelta.stats._power as power
from contextdelta.stats import (
    SIMULATION_EXACT_LIMIT,
    TARGET_POWER,
    PilotModel,
    RandomEffectsModel,
    histograms_of,
    minimum_detectable_difference,
    rejections,
    tasks_needed,
)
from contextdelta.stats._power import stable_window
from contextdelta.stats._signflip import lattice_pvalue

N_TASKS, REPEATS, DATASETS, ALPHA = 24, 3, 2_000, 0.05
# Total task-level latent SD on the logit scale, split evenly between the task effect and the task x condition
# effect: within-task correlation from 0.03 (repeats nearly independent) to 0.95 (repeats near copies).
SETTINGS = [0.3, 1.0, 2.0, 4.0, 8.0]


def model(total_sd: float, effect: float = 0.0) -> RandomEffectsModel:
    return RandomEffectsModel(
        base_rate=0.3, task_sd=total_sd / math.sqrt(2), interaction_sd=total_sd / math.sqrt(2), effect=effect
    )


def simulate(total_sd: float, effect: float, seed: int) -> tuple[float, float, float]:
    """(sign-flip rejection rate, episode-level McNemar rejection rate, mean true difference) over DATASETS."""
    a, b = model(total_sd, effect).simulate(N_TASKS, REPEATS, DATASETS, np.random.default_rng(seed))
    d = a.sum(axis=2).astype(np.int64) - b.sum(axis=2)
    primary = rejections(histograms_of(d, REPEATS), REPEATS, ALPHA).mean()
    only_a, only_b = (a & ~b).sum(axis=(1, 2)), (~a & b).sum(axis=(1, 2))
    mcnemar = np.where(
        only_a + only_b > 0, np.minimum(1.0, 2 * binom.cdf(np.minimum(only_a, only_b), only_a + only_b, 0.5)), 1.0
    )
    return float(primary), float((mcnemar <= ALPHA).mean()), float((a.mean(axis=(1, 2)) - b.mean(axis=(1, 2))).mean())


def test_correlation_settings_run_from_weak_to_strong() -> None:
    correlations = [model(sd).within_task_correlation for sd in SETTINGS]
    assert correlations == sorted(correlations) and correlations[0] < 0.05 and correlations[-1] > 0.9


@pytest.mark.parametrize("total_sd", SETTINGS)
def test_primary_test_holds_its_level_without_a_true_difference(total_sd: float) -> None:
    primary, mcnemar, difference = simulate(total_sd, 0.0, seed=int(10 * total_sd))
    assert primary <= 0.065
    assert abs(difference) < 0.01
    if model(total_sd).within_task_correlation > 0.8:
        # What issue 19 found: counting repeats as independent pairs rejects far above the nominal 5%.
        assert mcnemar > 0.1


@pytest.mark.parametrize("total_sd", [0.3, 1.0, 2.0])
def test_primary_test_has_power_against_a_true_task_level_difference(total_sd: float) -> None:
    primary, _, difference = simulate(total_sd, 1.5, seed=int(10 * total_sd) + 1)
    assert difference > 0.2
    assert primary > 0.5


@pytest.mark.slow
def test_simulated_pvalues_equal_the_exact_test() -> None:
    rng = np.random.default_rng(3)
    counts = np.array([rng.multinomial(int(rng.integers(2, 80)), rng.dirichlet([1, 1, 1])) for _ in range(3000)])
    totals = counts @ np.arange(1, 4)
    upper = np.array([int(rng.integers((t + 1) // 2, t + 1)) for t in totals], dtype=np.int64)
    exact = [
        lattice_pvalue(tuple((v, int(c)) for v, c in zip((1, 2, 3), row, strict=True) if c), int(u))
        for row, u in zip(counts, upper, strict=True)
    ]
    np.testing.assert_allclose(power.sign_flip_pvalues(counts.astype(np.int64), upper), exact, rtol=0, atol=1e-12)


def test_edgeworth_limit_is_close_to_the_exact_distribution_where_it_is_used() -> None:
    rng = np.random.default_rng(4)
    errors = []
    for repeats in (2, 3, 5):
        values = np.arange(1, repeats + 1)
        for _ in range(600):
            c = rng.multinomial(int(rng.integers(60, 400)), rng.dirichlet(np.full(repeats, 0.5)))
            total = int(c @ values)
            if (c > 0).sum() < 2 or not SIMULATION_EXACT_LIMIT <= total < 2 * SIMULATION_EXACT_LIMIT:
                continue
            upper = np.array([int(total / 2 + rng.uniform(1.0, 4.0) * math.sqrt(c @ values**2) / 2)], dtype=np.int64)
            exact = power._fft_pvalues(c[None].astype(np.int64), upper)[0]
            approx = power._edgeworth_pvalues(c[None].astype(np.int64), upper)[0]
            if 5e-4 < exact < 0.2:
                errors.append(abs(approx / exact - 1))
    assert len(errors) > 200
    assert max(errors) < 0.25 and float(np.median(errors)) < 0.005


def test_simulated_power_is_the_same_with_the_exact_route_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    pilot = PilotModel(rate_a=rng.choice([0, 1 / 3, 2 / 3, 1], 240), rate_b=rng.choice([0, 1 / 3, 2 / 3, 1], 240))
    differences = (0.05, 0.1, 0.15)
    hybrid = [pilot.power(d, 240, 3, 0.0125, seed=3) for d in differences]
    monkeypatch.setattr(power, "SIMULATION_EXACT_LIMIT", 1 << 30)
    exact = [pilot.power(d, 240, 3, 0.0125, seed=3) for d in differences]
    assert max(abs(h - e) for h, e in zip(hybrid, exact, strict=True)) <= 0.002  # 4 datasets in 2,000


def test_pilot_null_keeps_the_level_and_power_grows_with_the_difference() -> None:
    rng = np.random.default_rng(5)
    pilot = PilotModel(rate_a=rng.choice([0, 1 / 3, 2 / 3, 1], 24), rate_b=rng.choice([0, 1 / 3, 2 / 3, 1], 24))
    assert pilot.power(0.0, 24, 3, 0.05, datasets=4000, seed=1) <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 4000)
    curve = [pilot.power(d, 24, 3, 0.05, seed=2) for d in (0.0, 0.1, 0.2, 0.4)]
    assert curve == sorted(curve) and curve[-1] > 0.8


def analytic_power(n_tasks: int, share: float, level: float) -> float:
    """No discordance in the pilot (every task 0 in both conditions), switched tasks are all 1 in condition a:
    the test rejects when k switched tasks give 2 * 2^-k <= level."""
    needed = math.ceil(math.log2(2 / level))
    return float(binom.sf(needed - 1, n_tasks, share))


def test_planning_matches_the_closed_form_of_a_pilot_without_discordance() -> None:
    pilot = PilotModel(rate_a=np.zeros(24), rate_b=np.zeros(24))
    assert (pilot.direction, pilot.largest_difference) == ("increase", 1.0)
    level = 0.05 / 4
    found = minimum_detectable_difference(pilot, 24, 3, level, seed=3)
    assert found.difference is not None
    closed = min(s / 1000 for s in range(1, 1001) if analytic_power(24, s / 1000, level) >= 0.8)
    assert found.difference == pytest.approx(closed, abs=0.03)
    n = tasks_needed(pilot, 0.10, 3, level, seed=3)
    closed_n = min(n for n in range(2, 400) if analytic_power(n, 0.10, level) >= 0.8)
    assert n is not None and abs(n - closed_n) <= max(3, closed_n // 10)
    assert tasks_needed(pilot, 0.10, 3, level, seed=3) == n  # seeded: the same answer every time


def test_tasks_needed_is_the_first_size_whose_next_sizes_keep_the_power() -> None:
    """Power is a sawtooth in the number of tasks: here it first reaches 80% at 140 tasks and falls short again at
    141. The answer is the first n from which the next max(5, n/20) sizes also reach 80%, found by brute force."""
    pilot = PilotModel(
        rate_a=np.array([1, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 1], dtype=np.float64),
        rate_b=np.array([0, 0, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0], dtype=np.float64),
    )
    powers = {n: pilot.power(0.2, n, 1, 0.05) for n in range(1, 200)}
    reaches = {n: p >= TARGET_POWER for n, p in powers.items()}
    first_crossing = min(n for n, ok in reaches.items() if ok)
    stable = min(n for n in range(1, 190) if all(reaches[m] for m in range(n, n + max(5, math.ceil(n / 20)) + 1)))
    assert not all(reaches[m] for m in range(first_crossing, first_crossing + 6))  # the tooth
    assert stable > first_crossing
    assert tasks_needed(pilot, 0.2, 1, 0.05) == stable
    assert stable_window(stable) == max(5, math.ceil(stable / 20))


def test_unreachable_differences_say_so() -> None:
    pilot = PilotModel(rate_a=np.full(4, 0.5), rate_b=np.full(4, 0.5))
    result = minimum_detectable_difference(pilot, 4, 1, 0.05 / 6)
    assert result.power_at_largest is not None  # a measured power (the design has tasks)
    assert result.difference is None and result.power_at_largest < 0.8  # 4 tasks: the smallest p is 2 * 2^-4
    assert tasks_needed(pilot, 0.6, 1, 0.05) is None


def test_a_design_without_a_unit_simulates_nothing_and_says_why() -> None:
    """A comparison with no task in both conditions recorded power_at_largest 0.0 (and largest_difference 1.0), a
    number that reads as a measured power of 0: no data is None, with the reason."""
    empty = PilotModel(rate_a=np.zeros(0), rate_b=np.zeros(0))
    for pilot, n in ((empty, 0), (empty, 5), (PilotModel(rate_a=np.full(4, 0.3), rate_b=np.full(4, 0.3)), 0)):
        result = minimum_detectable_difference(pilot, n, 2, 0.05)
        assert (result.power_at_largest, result.largest_difference, result.difference) == (None, None, None)
        assert result.no_data is not None and result.no_data.startswith("no data: no task has a value in both")
    assert (
        minimum_detectable_difference(PilotModel(rate_a=np.full(4, 0.5), rate_b=np.full(4, 0.5)), 4, 1, 0.05).no_data
        is None
    )
