"""Dose-response statistics: the logistic slope is the maximum-likelihood fit (checked against statsmodels), separated
data give an infinite slope and flat data none, repeats add no weight, the per-horizon rates are exactly
`bootstrap_rates` of each horizon, the crossing horizon and its interval are horizons of the grid (or not
reached), the horizons are resampled independently, and a curve's numbers do not depend on the batch it is
computed in."""

from __future__ import annotations

import math

import numpy as np
import pytest
import statsmodels.api as sm
from hypothesis import given, settings
from hypothesis import strategies as st

from contextdelta.report import crossing_text, slope_text
from contextdelta.stats import (
    AnalysisParams,
    ClusteredSample,
    DoseInput,
    LogisticSlope,
    SlopeStatus,
    bootstrap_rates,
    cluster_by_task,
    dose_curves,
    horizon_params,
    logistic_slopes,
)
from contextdelta.stats._horizon import _distinct_rows_per_block

PARAMS = AnalysisParams(resamples=2_000, seed=3)
HORIZONS = (1, 2, 4, 8, 16)
X = np.log2(np.asarray(HORIZONS, dtype=np.float64))


def statsmodels_slope(rates: np.ndarray, weights: np.ndarray) -> float:
    """The reference fit: a binomial GLM of the grouped rates on log2(horizon) with the weights as frequencies."""
    model = sm.GLM(rates, sm.add_constant(X), family=sm.families.Binomial(), freq_weights=weights)
    return float(model.fit(tol=1e-14, maxiter=200).params[1])


@pytest.mark.filterwarnings("ignore::statsmodels.tools.sm_exceptions.PerfectSeparationWarning")
@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0.02, 0.98), min_size=5, max_size=5),
    st.lists(st.integers(1, 60), min_size=5, max_size=5),
)
def test_the_slope_is_the_maximum_likelihood_fit(rates: list[float], weights: list[int]) -> None:
    p, w = np.asarray(rates), np.asarray(weights, dtype=np.float64)
    (slope,) = logistic_slopes(p[None], w[None], X)
    assert slope == pytest.approx(statsmodels_slope(p, w), rel=1e-8, abs=1e-10)


def test_separated_flat_and_single_horizon_data() -> None:
    rows = np.array(
        [
            [0, 0, 1, 1, 1],  # complete separation, rising
            [0, 0, 0.5, 1, 1],  # quasi-complete: one horizon in between
            [1, 1, 1, 0, 0],  # falling
            [0, 0, 0, 0, 0],  # no variation
            [1, 1, 1, 1, 1],
            [0, 0.5, 0, 0.5, 1],  # overlap: finite
        ],
        dtype=np.float64,
    )
    slopes = logistic_slopes(rows, np.full(rows.shape, 8.0), X)
    assert slopes[:3].tolist() == [math.inf, math.inf, -math.inf]
    assert np.isnan(slopes[3:5]).all()
    assert math.isfinite(slopes[5]) and slopes[5] == pytest.approx(statsmodels_slope(rows[5], np.full(5, 8.0)))
    one_horizon = np.array([[0.3, np.nan, np.nan, np.nan, np.nan]])
    assert np.isnan(logistic_slopes(one_horizon, np.array([[8.0, 0, 0, 0, 0]]), X)).all()


def test_rows_are_fitted_independently() -> None:
    rng = np.random.default_rng(5)
    rates = rng.binomial(20, [0.1, 0.2, 0.4, 0.6, 0.7], size=(300, 5)) / 20.0
    weights = np.full(rates.shape, 20.0)
    together = logistic_slopes(rates, weights, X)
    alone = np.array([logistic_slopes(rates[i : i + 1], weights[i : i + 1], X)[0] for i in range(0, 300, 37)])
    assert together[::37].tolist() == alone.tolist()


def curve_samples(outcomes: dict[int, list[list[float]]]) -> dict[int, ClusteredSample]:
    """Per horizon, a sample of tasks (one list of repeat outcomes per task)."""
    out = {}
    for h, tasks in outcomes.items():
        ids = [f"t{h:02d}-{i}" for i, reps in enumerate(tasks) for _ in reps]
        repeats = [r + 1 for reps in tasks for r in range(len(reps))]
        out[h] = cluster_by_task(ids, repeats, [v for reps in tasks for v in reps])
    return out


RISING = {
    1: [[0.0], [0.0], [0.0], [0.0], [1.0], [0.0]],
    2: [[0.0], [1.0], [0.0], [0.0], [0.0], [0.0]],
    4: [[1.0], [0.0], [1.0], [0.0], [0.0], [1.0]],
    8: [[1.0], [1.0], [0.0], [1.0], [1.0], [0.0]],
    16: [[1.0], [1.0], [1.0], [1.0], [0.0], [1.0]],
}


def test_per_horizon_rates_are_bootstrap_rates_of_each_horizon() -> None:
    samples = curve_samples(RISING)
    found = dose_curves({"c": DoseInput(samples, threshold=0.1)}, PARAMS)["c"]
    assert found.rates == {h: bootstrap_rates({h: s}, horizon_params(PARAMS, h))[h] for h, s in samples.items()}
    # each horizon draws its own indices: equal layouts, different seeds
    assert len({horizon_params(PARAMS, h).seed for h in HORIZONS}) == len(HORIZONS)
    assert horizon_params(PARAMS, 4) == horizon_params(AnalysisParams(resamples=2_000, seed=3), 4)


def test_slope_crossing_and_their_intervals() -> None:
    found = dose_curves({"c": DoseInput(curve_samples(RISING), threshold=0.1)}, PARAMS)["c"]
    rates = np.array([[np.mean(RISING[h]) for h in HORIZONS]])
    expected = logistic_slopes(rates, np.full((1, 5), 6.0), X)[0]
    slope = found.slope
    assert slope.status is SlopeStatus.OK and slope.estimate == pytest.approx(expected, rel=1e-12)
    assert isinstance(slope.low, float) and isinstance(slope.high, float) and slope.low < expected < slope.high
    assert slope.n_horizons == 5 and slope.n_tasks == 30 and slope.n_episodes == 30
    crossing = found.crossing
    assert crossing is not None
    # 1 of 6 tasks at h=1 (16.7%) already exceeds 10%
    assert crossing.horizon == 1 and crossing.low == 1 and crossing.high in HORIZONS
    strict = dose_curves({"c": DoseInput(curve_samples(RISING), threshold=0.5)}, PARAMS)["c"].crossing
    assert strict is not None and strict.horizon == 8 and strict.low in HORIZONS and strict.low <= 8
    never = dose_curves({"c": DoseInput(curve_samples(RISING), threshold=0.9)}, PARAMS)["c"].crossing
    assert never is not None and never.horizon is None and never.high is None and never.largest_horizon == 16


def test_separated_data_report_an_infinite_slope_that_survives_json() -> None:
    steps = {h: [[0.0 if h <= 2 else 1.0]] * 4 for h in HORIZONS}
    found = dose_curves({"c": DoseInput(curve_samples(steps), threshold=0.1)}, PARAMS)["c"]
    slope = found.slope
    assert slope.status is SlopeStatus.SEPARATED and slope.estimate == "inf"
    assert (slope.low, slope.high) == ("inf", "inf") and "separated" in slope.note
    again = LogisticSlope.model_validate_json(slope.model_dump_json())
    assert again == slope and float(again.estimate) == math.inf  # type: ignore[arg-type]
    crossing = found.crossing
    assert crossing is not None and (crossing.horizon, crossing.low, crossing.high) == (4, None, None)
    # every task agrees at each horizon: no interval, never a fake [h=4, h=4]
    assert crossing.status == "constant" and "every task has the same value" in crossing.note
    flat = dose_curves({"c": DoseInput(curve_samples({h: [[0.0]] * 4 for h in HORIZONS}))}, PARAMS)["c"]
    assert flat.slope.status is SlopeStatus.NOT_ESTIMABLE and flat.slope.estimate is None
    assert flat.slope.note == "0 at every horizon" and flat.crossing is None


def test_repeats_add_no_weight() -> None:
    once = curve_samples(RISING)
    twice = curve_samples({h: [reps * 2 for reps in tasks] for h, tasks in RISING.items()})
    a = dose_curves({"c": DoseInput(once)}, PARAMS)["c"].slope
    b = dose_curves({"c": DoseInput(twice)}, PARAMS)["c"].slope
    assert a.estimate == b.estimate and a.n_tasks == b.n_tasks == 30


def test_a_curve_does_not_depend_on_its_batch() -> None:
    other = {h: [[1.0], [0.0], [1.0], [1.0]] for h in (2, 4, 32)}
    alone = dose_curves({"a": DoseInput(curve_samples(RISING), threshold=0.1)}, PARAMS)["a"]
    batch = dose_curves(
        {"b": DoseInput(curve_samples(other), threshold=0.1), "a": DoseInput(curve_samples(RISING), threshold=0.1)},
        PARAMS,
    )["a"]
    assert alone == batch


def test_missing_values_are_resampled_on_the_design() -> None:
    # failed trials: no verdict, so no stale-action value; the design holds every episode
    outcomes = {1: [0.0, 0.0, np.nan, 0.0], 4: [1.0, np.nan, 1.0, 0.0]}
    samples, designs = {}, {}
    for h, values in outcomes.items():
        ids = [f"t{h}-{i}" for i in range(len(values))]
        samples[h] = cluster_by_task(ids, [1] * len(values), values)
        designs[h] = cluster_by_task(ids, [1] * len(values), [0.0] * len(values))
    found = dose_curves({"c": DoseInput(samples, designs, threshold=0.1)}, PARAMS)["c"]
    assert found.rates[1].n_missing == 1 and found.rates[4].estimate == pytest.approx(2 / 3)
    assert found.slope.status is SlopeStatus.SEPARATED and found.slope.n_tasks == 6


def test_the_same_stories_at_every_horizon_are_resampled_independently() -> None:
    # every horizon holds the same outcomes (a generated suite tells the same story at every horizon): the slope is
    # 0, and since the horizons are resampled independently its interval is not collapsed onto 0
    story = [[1.0], [0.0], [1.0], [0.0], [0.0], [1.0]]
    found = dose_curves({"c": DoseInput(curve_samples({h: story for h in HORIZONS}))}, PARAMS)["c"].slope
    assert found.status is SlopeStatus.OK and found.estimate == pytest.approx(0.0, abs=1e-12)
    assert isinstance(found.low, float) and isinstance(found.high, float)
    assert found.low < -0.1 and found.high > 0.1


def test_a_finite_slope_every_resample_reproduces_has_no_interval() -> None:
    # 0%, 100%, 100%, 0%: a finite slope (0), but every horizon's tasks agree, so every resample gives the same slope;
    # it was reported as 0.00 [0.00, 0.00] with a Monte-Carlo error of 0, certainty that four horizons cannot show
    hump = {h: [[0.0 if h in (1, 8) else 1.0]] * 4 for h in (1, 2, 4, 8)}
    found = dose_curves({"c": DoseInput(curve_samples(hump))}, PARAMS)["c"].slope
    assert found.status is SlopeStatus.OK and found.estimate == pytest.approx(0.0, abs=1e-12)
    assert found.low is None and found.high is None and found.mc_se is None
    assert found.note.startswith("no interval: every resample with a slope gives this one")
    assert slope_text(found).startswith("+0.00 (no interval: every resample with a slope gives this one")


def test_a_finite_slope_every_kept_resample_reproduces_has_no_interval() -> None:
    # 100%, 25%, 100%: symmetric, so every resample with a slope gives 0 whatever h=2 draws; 0.00 [0.00, 0.00]
    # read as certainty although some resamples (h=2 drawn without a value) were left out
    tasks = {1: [[1.0]] * 4, 2: [[1.0], [0.0], [0.0], [0.0]], 4: [[1.0]] * 4}
    found = dose_curves({"c": DoseInput(curve_samples(tasks))}, PARAMS)["c"].slope
    assert found.status is SlopeStatus.OK and found.estimate == pytest.approx(0.0, abs=1e-12)
    assert found.resamples_left_out > 0
    assert found.low is None and found.high is None and found.note.startswith("no interval: every resample")
    assert "left out of the interval" not in found.note  # counted once, by the report, not twice


def test_a_horizon_without_data_below_the_crossing_is_named() -> None:
    # every episode at h=1 a failed trial: the first horizon above 10% among the others is h=2, which may not be
    # the first one; it was printed as h=2 with nothing said
    samples = curve_samples({2: [[1.0], [0.0]], 4: [[1.0], [1.0]]})
    empty = ClusteredSample(
        task_ids=("t01-0", "t01-1"),
        repeats=np.zeros((2, 1), dtype=np.int64),
        values=np.zeros((2, 1)),
        counts=np.zeros(2, dtype=np.int64),
        n_missing=2,
    )
    design = curve_samples({1: [[0.0], [0.0]]})[1]
    crossing = dose_curves({"c": DoseInput({1: empty, **samples}, {1: design}, threshold=0.1)}, PARAMS)["c"].crossing
    assert crossing is not None and crossing.horizon == 2
    assert "h=1 has no episode with a value, so the first crossing may lie there" in crossing.note
    assert crossing_text(crossing).endswith("(h=1 has no episode with a value, so the first crossing may lie there)")


def test_a_crossing_every_kept_resample_reproduces_has_no_interval() -> None:
    # h=1: one task at 1, one whose episodes are failed trials; resamples drawing only the latter are left out, every
    # other one crosses at h=1: that was printed "h=1 [h=1, h=1]"
    with_value = cluster_by_task(["a", "a", "b", "b"], [1, 2, 1, 2], [1.0, 1.0, None, None])
    design = cluster_by_task(["a", "a", "b", "b"], [1, 2, 1, 2], [1.0, 1.0, 0.0, 0.0])
    later = curve_samples({2: [[1.0], [1.0]]})
    crossing = dose_curves({"c": DoseInput({1: with_value, **later}, {1: design}, threshold=0.1)}, PARAMS)["c"].crossing
    assert crossing is not None and crossing.horizon == 1 and crossing.status == "constant"
    assert crossing.low is None and crossing.high is None and crossing.resamples_left_out > 0
    assert crossing_text(crossing).startswith("h=1 (no interval:")


def test_repeated_rows_are_grouped_exactly_within_each_block() -> None:
    rng = np.random.default_rng(11)
    rows = 400
    few = rng.integers(0, 2, size=(3 * rows, 5)) / 2.0  # few values per column: many repeated rows
    few[rng.random(few.shape) < 0.05] = np.nan
    kept, inverse = _distinct_rows_per_block(few, rows)
    restored = few[kept][inverse]
    assert ((restored == few) | (np.isnan(restored) & np.isnan(few))).all()  # every row is its group's row
    assert kept.size < few.shape[0] / 2
    for block in range(3):
        mine = np.flatnonzero(kept // rows == block)
        assert (inverse[block * rows : (block + 1) * rows] >= mine.min()).all()  # groups never span blocks
        assert (inverse[block * rows : (block + 1) * rows] <= mine.max()).all()
        values = np.nan_to_num(few[kept[mine]], nan=-1.0)
        assert np.unique(values, axis=0).shape[0] == mine.size  # no group twice
    many = rng.random((rows, 5))  # every row its own: nothing to group
    kept, inverse = _distinct_rows_per_block(many, rows)
    assert kept.tolist() == inverse.tolist() == list(range(rows))
