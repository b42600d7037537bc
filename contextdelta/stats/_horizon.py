"""Dose-response along a horizon: a rate per horizon, its logistic slope, and the horizon at which it first exceeds
a threshold, all from one task-cluster bootstrap.

A curve is one condition's 0/1 outcome on tasks that each have a horizon (a generated task's
``evaluator.family.horizon``), as one `ClusteredSample` per horizon. Three statistics:

- **the rate at each horizon**, exactly as `bootstrap_means` gives it for that horizon's sample (pooled over
  episodes; hierarchical task-cluster interval; an exact Clopper-Pearson bound over the horizon's tasks where every
  task agrees);
- **the logistic slope**: the maximum-likelihood slope of ``logit(rate) = a + b log2(horizon)`` fitted to the
  per-horizon rates, each horizon weighted by its number of tasks. This is the grouped form of a logistic
  regression on the tasks' mean outcomes (each task weight 1, whatever its repeats): repeats never count as
  independent evidence. ``b`` is the change in log-odds per doubling of the horizon. Separated data (the rate at 0
  up to some horizon and at 1 beyond it, or the reverse) have no finite maximum: the slope is reported as
  ``"inf"`` / ``"-inf"``, never as a large number; data without variation (every horizon at 0, or every one at 1)
  or with a single horizon say nothing about a slope: ``not_estimable``;
- **the crossing horizon**: the smallest horizon whose rate exceeds the threshold (strictly), or "not reached".

The intervals come from the same resamples as the per-horizon rates: each horizon's tasks are resampled within
that horizon, then repeats within each task (the horizons and their task counts are the design's), and resample r's
slope and crossing horizon are computed from resample r's per-horizon rates. A resample in which some horizon has
no episode with a value has no slope and no crossing: it is left out and counted. Each horizon draws its own
resample indices (`horizon_params`: a seed derived from the analysis seed and the horizon), so the tasks of
different horizons are resampled independently, whatever their layouts. A generated suite tells the same story at
every horizon (same content seed), so its tasks are correlated across horizons; treating them as independent
makes the slope's interval conservative, never narrower than the data allow. Within a horizon, every curve (each
condition's) shares one draw per layout, as everywhere in this package.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from contextdelta.stats._bootstrap import (
    FloatVector,
    _order_statistic_levels,
    check_binary,
    means_with_replicates,
    resamples_all_equal,
)
from contextdelta.stats._params import DEFAULT_PARAMS, AnalysisParams
from contextdelta.stats._results import (
    Estimate,
    EstimateStatus,
    HorizonCrossing,
    InfiniteEnd,
    LogisticSlope,
    SlopeStatus,
)
from contextdelta.stats._samples import ClusteredSample

K = TypeVar("K", bound=Hashable)
FloatMatrix = npt.NDArray[np.float64]

_PLAIN_STEPS = 25
_CHUNK_ROWS = 1 << 14
_DISTINCT_COMBINATIONS = 8
_MAX_NEWTON_STEPS = 200
_MAX_HALVINGS = 60
_TOLERANCE = 1e-10


@dataclass(frozen=True)
class DoseInput:
    """One curve: a 0/1 outcome's sample per horizon (horizons with no episode may be left out)."""

    samples: Mapping[int, ClusteredSample]
    designs: Mapping[int, ClusteredSample] = field(default_factory=dict)
    """For a horizon's sample with values missing (failed trials of a safety rate): every episode of the
    condition on that horizon's tasks, resampled as `bootstrap_means` does (a ratio estimator)."""
    threshold: float | None = None
    """The rate whose first crossing is reported; None: no crossing."""


@dataclass(frozen=True)
class DoseCurve:
    """A curve's statistics: the rate per horizon, the logistic slope, and the crossing horizon."""

    rates: dict[int, Estimate]
    slope: LogisticSlope
    crossing: HorizonCrossing | None


def logistic_slopes(
    rates: FloatMatrix,
    weights: FloatMatrix,
    x: FloatVector,
    start: tuple[FloatVector, FloatVector] | None = None,
) -> FloatVector:
    """The maximum-likelihood slope of ``logit(p) = a + b x`` for each row of grouped data.

    Row i has, at each ``x[j]``, the rate ``rates[i, j]`` with weight ``weights[i, j]`` (0, or a NaN rate: no data
    there). Returns ``b`` per row: finite; ``+inf`` / ``-inf`` for separated rows (every weight with a rate below 1
    at x-values no larger than every one with a rate above 0, or the reverse); NaN when there is nothing to fit
    (fewer than two x-values with data, or no variation: every rate 0, or every rate 1). ``start``: per row, the
    ``(a, b)`` to start from (NaN: the intercept-only fit), e.g. the point estimate for bootstrap replicates.
    The log-likelihood is strictly concave where the maximum is finite, so the maximum is unique and does not depend
    on the start beyond rounding (a converged row's Newton step is below 1e-10); rows are fitted independently.
    """
    return logistic_fits(rates, weights, x, start)[1]


def logistic_fits(
    rates: FloatMatrix,
    weights: FloatMatrix,
    x: FloatVector,
    start: tuple[FloatVector, FloatVector] | None = None,
) -> tuple[FloatVector, FloatVector]:
    """`logistic_slopes` with the intercepts: ``(a, b)`` per row (``a`` NaN where ``b`` is not finite). Rows are
    fitted in chunks of `_CHUNK_ROWS` (independent rows: the same numbers as all at once, in bounded memory)."""
    rates, weights = np.asarray(rates, dtype=np.float64), np.asarray(weights, dtype=np.float64)
    if rates.shape[0] > _CHUNK_ROWS:
        parts = [
            _fits(
                rates[i : i + _CHUNK_ROWS],
                weights[i : i + _CHUNK_ROWS],
                x,
                None if start is None else (start[0][i : i + _CHUNK_ROWS], start[1][i : i + _CHUNK_ROWS]),
            )
            for i in range(0, rates.shape[0], _CHUNK_ROWS)
        ]
        return np.concatenate([a for a, _ in parts]), np.concatenate([b for _, b in parts])
    return _fits(rates, weights, x, start)


def _fits(
    rates: FloatMatrix,
    weights: FloatMatrix,
    x: FloatVector,
    start: tuple[FloatVector, FloatVector] | None,
) -> tuple[FloatVector, FloatVector]:
    # columns are rows of the data: reductions over the short horizon axis then run over contiguous memory
    p_t = np.asarray(rates, dtype=np.float64).T
    w_t = np.asarray(weights, dtype=np.float64).T
    valid = (w_t > 0) & np.isfinite(p_t)
    w = np.where(valid, w_t, 0.0)
    p = np.where(valid, p_t, 0.0)
    xs = np.asarray(x, dtype=np.float64)[:, None]
    n = p.shape[1]
    a_out, b_out = np.full(n, np.nan), np.full(n, np.nan)
    big = np.inf
    below_one, above_zero = valid & (p < 1.0), valid & (p > 0.0)
    distinct = np.where(valid, xs, big).min(axis=0) < np.where(valid, xs, -big).max(axis=0)
    varies = below_one.any(axis=0) & above_zero.any(axis=0) & distinct
    max_fail, min_fail = np.where(below_one, xs, -big).max(axis=0), np.where(below_one, xs, big).min(axis=0)
    max_succ, min_succ = np.where(above_zero, xs, -big).max(axis=0), np.where(above_zero, xs, big).min(axis=0)
    rising = varies & (max_fail <= min_succ)
    falling = varies & (max_succ <= min_fail) & ~rising
    b_out[rising], b_out[falling] = np.inf, -np.inf
    finite = np.flatnonzero(varies & ~rising & ~falling)
    if finite.size:
        pf, wf = p[:, finite], w[:, finite]
        mean = (wf * pf).sum(axis=0) / wf.sum(axis=0)
        a0, b0 = np.log(mean / (1.0 - mean)), np.zeros(finite.size)
        if start is not None:
            sa, sb = np.asarray(start[0])[finite], np.asarray(start[1])[finite]
            given = np.isfinite(sa) & np.isfinite(sb)
            a0, b0 = np.where(given, sa, a0), np.where(given, sb, b0)
        a_out[finite], b_out[finite] = _newton(pf, wf, xs, a0, b0)
    return a_out, b_out


def _log_likelihood(p: FloatMatrix, w: FloatMatrix, x: FloatMatrix, a: FloatVector, b: FloatVector) -> FloatVector:
    with np.errstate(over="ignore", invalid="ignore"):
        eta = a + b * x
        return np.asarray((w * (p * eta - np.logaddexp(0.0, eta))).sum(axis=0), dtype=np.float64)


def _step(p: FloatMatrix, w: FloatMatrix, x: FloatMatrix, a: FloatVector, b: FloatVector) -> tuple[FloatVector, ...]:
    """The Newton step ``(da, db)`` at ``(a, b)`` of every column (not finite where the iterate ran off: an
    overflowing ``exp`` or a singular Hessian, which `_newton` refits with damped steps)."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        mu = 1.0 / (1.0 + np.exp(-(a + b * x)))
        r = w * (p - mu)
        v = w * mu * (1.0 - mu)
        vx = v * x
        g_a, g_b = r.sum(axis=0), (r * x).sum(axis=0)
        h_aa, h_ab, h_bb = v.sum(axis=0), vx.sum(axis=0), (vx * x).sum(axis=0)
        det = h_aa * h_bb - h_ab * h_ab
        return (h_bb * g_a - h_ab * g_b) / det, (h_aa * g_b - h_ab * g_a) / det


def _converged(da: FloatVector, db: FloatVector, a: FloatVector, b: FloatVector) -> npt.NDArray[np.bool_]:
    return (np.abs(da) <= _TOLERANCE * (1.0 + np.abs(a))) & (np.abs(db) <= _TOLERANCE * (1.0 + np.abs(b)))


def _newton(
    p: FloatMatrix, w: FloatMatrix, x: FloatMatrix, a: FloatVector, b: FloatVector
) -> tuple[FloatVector, FloatVector]:
    """``(a, b)`` of non-separated columns with variation (a finite maximum exists and is unique).

    Plain Newton steps from the given start first (a bootstrap replicate started at its point estimate needs a few);
    a column that has not converged after `_PLAIN_STEPS` or whose iterate stopped being finite is fitted again by
    Newton steps halved until the log-likelihood does not fall, from the intercept-only fit. A column converges when
    its step is below 1e-10 (relative): at the unique maximum of a strictly concave likelihood.
    """
    a_out, b_out = np.full(a.size, np.nan), np.full(a.size, np.nan)
    cols, pc, wc = np.arange(a.size), p, w
    for _ in range(_PLAIN_STEPS):
        if not cols.size:
            break
        da, db = _step(pc, wc, x, a, b)
        finite = np.isfinite(da) & np.isfinite(db)
        done = finite & _converged(da, db, a, b)
        a, b = a + da, b + db
        a_out[cols[done]], b_out[cols[done]] = a[done], b[done]
        keep = finite & ~done
        if not keep.all():
            cols, pc, wc, a, b = cols[keep], pc[:, keep], wc[:, keep], a[keep], b[keep]
    left = np.flatnonzero(np.isnan(b_out))
    if left.size:
        a_out[left], b_out[left] = _damped_newton(p[:, left], w[:, left], x)
    return a_out, b_out


def _damped_newton(p: FloatMatrix, w: FloatMatrix, x: FloatMatrix) -> tuple[FloatVector, FloatVector]:
    """``(a, b)`` by Newton steps halved until the log-likelihood does not fall, from the intercept-only fit."""
    mean = (w * p).sum(axis=0) / w.sum(axis=0)
    a = np.log(mean / (1.0 - mean))
    b = np.zeros_like(a)
    a_out, b_out = a.copy(), b.copy()
    cols = np.arange(a.size)
    current = _log_likelihood(p, w, x, a, b)
    for _ in range(_MAX_NEWTON_STEPS):
        if not cols.size:
            break
        da, db = _step(p, w, x, a, b)
        step = np.ones_like(a)
        reached = _log_likelihood(p, w, x, a + da, b + db)
        pending = np.flatnonzero(~(reached >= current - 1e-13 * np.abs(current)))
        for _ in range(_MAX_HALVINGS):
            if not pending.size:
                break
            step[pending] *= 0.5
            s = step[pending]
            trial = _log_likelihood(
                p[:, pending], w[:, pending], x, a[pending] + s * da[pending], b[pending] + s * db[pending]
            )
            reached[pending] = trial
            pending = pending[~(trial >= current[pending] - 1e-13 * np.abs(current[pending]))]
        if pending.size:  # no ascent found (at the optimum up to rounding): stay
            step[pending] = 0.0
            reached[pending] = current[pending]
        done = _converged(step * da, step * db, a, b)
        a, b, current = a + step * da, b + step * db, reached
        a_out[cols], b_out[cols] = a, b
        if done.any():
            keep = ~done
            cols, p, w, a, b, current = cols[keep], p[:, keep], w[:, keep], a[keep], b[keep], current[keep]
    return a_out, b_out


def _distinct_rows(block: FloatMatrix) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """``(first, inverse)`` of a block's identical rows (NaN equal to NaN): the index of one row of each group,
    and for every row its group's position in ``first`` (``block[first][inverse]`` is ``block``).

    Each column is coded by its distinct values and a row by its codes in mixed radix: one small sort per column
    instead of a sort of whole rows. Where the columns allow far more combinations than there are rows (many tasks
    per horizon), few rows repeat: every row is its own group, and the search stops early (only the time it takes
    depends on this, never the result)."""
    every = np.arange(block.shape[0], dtype=np.intp)
    codes = np.zeros(block.shape[0], dtype=np.int64)
    radix = 1
    for column in block.T:
        values = np.unique(column)  # sorted, one NaN last; searchsorted orders NaN the same way
        if radix * values.size > _DISTINCT_COMBINATIONS * block.shape[0]:
            return every, every
        codes += np.searchsorted(values, column).astype(np.int64) * radix
        radix *= values.size
    groups = np.unique(codes)
    inverse = np.searchsorted(groups, codes).astype(np.intp)
    first = np.empty(groups.size, dtype=np.intp)
    first[inverse] = every  # any row of a group stands for it: its rows are identical
    return first, inverse


def _distinct_rows_per_block(rates: FloatMatrix, rows: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """`_distinct_rows` of each block of ``rows`` rows: the rows to keep (indices into ``rates``, in block order)
    and, for every row of ``rates``, its kept row's position among them."""
    kept: list[npt.NDArray[np.intp]] = []
    inverse = np.empty(rates.shape[0], dtype=np.intp)
    offset = 0
    for begin in range(0, rates.shape[0], rows):
        first, block_inverse = _distinct_rows(rates[begin : begin + rows])
        kept.append(begin + first)
        inverse[begin : begin + rows] = offset + block_inverse
        offset += first.size
    return np.concatenate(kept) if kept else np.zeros(0, dtype=np.intp), inverse


def _extended_quantiles(ordered: FloatVector, levels: npt.NDArray[np.float64]) -> FloatVector:
    """Quantiles (levels 0-100) of sorted values that may hold +-inf, interpolating linearly between order
    statistics as `np.percentile` does; an end next to an infinite order statistic (with weight on it) is that
    infinity."""
    position = levels / 100.0 * (ordered.size - 1)
    below = np.floor(position).astype(np.int64)
    above = np.minimum(below + 1, ordered.size - 1)
    fraction = position - below
    start, end = ordered[below], ordered[above]
    out = np.empty(levels.size)
    for i in range(levels.size):
        s, e, f = float(start[i]), float(end[i]), float(fraction[i])
        if f == 0.0 or s == e:
            out[i] = s
        elif math.isfinite(s) and math.isfinite(e):
            out[i] = s + (e - s) * f
        elif not math.isfinite(s) and not math.isfinite(e):
            out[i] = s if f < 0.5 else e
        else:
            out[i] = s if not math.isfinite(s) else e
    return out


def _as_end(value: float) -> float | InfiniteEnd:
    if value == math.inf:
        return "inf"
    if value == -math.inf:
        return "-inf"
    return float(value)


def _slope(point: float, replicates: FloatVector, rates: dict[int, Estimate], params: AnalysisParams) -> LogisticSlope:
    with_data = {h: e for h, e in rates.items() if e.estimate is not None}
    common = {
        "confidence": params.confidence,
        "n_horizons": len(with_data),
        "n_tasks": sum(e.n_tasks for e in with_data.values()),
        "n_episodes": sum(e.n_episodes for e in with_data.values()),
    }
    if not with_data:
        return LogisticSlope(status=SlopeStatus.NO_DATA, estimate=None, low=None, high=None, note="no data", **common)
    if math.isnan(point):
        values = {e.estimate for e in with_data.values()}
        if len(with_data) < 2:
            note = "one horizon only"
        elif values == {0.0}:
            note = "0 at every horizon"
        elif values == {1.0}:
            note = "1 at every horizon"
        else:
            note = "no variation"
        return LogisticSlope(status=SlopeStatus.NOT_ESTIMABLE, estimate=None, low=None, high=None, note=note, **common)
    defined = replicates[~np.isnan(replicates)]
    left_out = int(replicates.size - defined.size)
    low: float | InfiniteEnd | None = None
    high: float | InfiniteEnd | None = None
    mc_se = None
    if defined.size:
        ordered = np.sort(defined)
        q_low, q_high = params.percentiles
        levels = np.array(
            [
                q_low,
                q_high,
                *_order_statistic_levels(ordered.size, q_low),
                *_order_statistic_levels(ordered.size, q_high),
            ]
        )
        lo, hi, a, b, c, d = _extended_quantiles(ordered, levels).tolist()
        low, high = _as_end(lo), _as_end(hi)
        errors = [(y - x) / 2.0 for x, y in ((a, b), (c, d)) if math.isfinite(x) and math.isfinite(y)]
        mc_se = max(errors) if errors else None
    notes = []
    if not math.isinf(point) and resamples_all_equal(defined):
        # [b, b] would read as certainty: every horizon's tasks agree (a rate at 0 or 1), so no resample moves it
        low = high = mc_se = None
        notes.append("no interval: every resample with a slope gives this one, so the bootstrap cannot vary")
    if math.isinf(point):
        low_side, high_side = ("0", "1") if point > 0 else ("1", "0")
        notes.append(
            f"separated: the rate is {low_side} at every horizon below a step and {high_side} at every horizon above "
            "it (at most one horizon in between), so the maximum-likelihood slope is infinite"
        )
    if left_out and low is not None:  # without an interval, the report's count of them says it
        notes.append(f"{left_out} of {replicates.size} resamples had no slope and were left out of the interval")
    if not defined.size:
        notes.append("no resample had a slope: no interval")
    return LogisticSlope(
        status=SlopeStatus.SEPARATED if math.isinf(point) else SlopeStatus.OK,
        estimate=_as_end(point),
        low=low,
        high=high,
        resamples_left_out=left_out,
        note="; ".join(notes),
        mc_se=mc_se,
        **common,
    )


def _first_crossing(rates: FloatMatrix, horizons: npt.NDArray[np.float64], threshold: float) -> FloatVector:
    """Per row, the smallest horizon whose rate exceeds ``threshold`` (+inf: none does; NaN: a rate is NaN)."""
    above = rates > threshold
    first = np.where(above.any(axis=1), horizons[np.argmax(above, axis=1)], np.inf)
    return np.where(np.isnan(rates).any(axis=1), np.nan, first)


def _crossing(
    point: float,
    replicates: FloatVector,
    horizons: list[int],
    threshold: float,
    params: AnalysisParams,
    rates: Mapping[int, Estimate] | None = None,
) -> HorizonCrossing:
    common = {"threshold": threshold, "confidence": params.confidence}
    if not horizons:
        return HorizonCrossing(status="no_data", horizon=None, low=None, high=None, largest_horizon=None, **common)
    defined = np.sort(replicates[~np.isnan(replicates)])
    if (
        not math.isinf(point)
        and defined.size
        and bool((defined == point).all())
        and (defined.size == replicates.size or resamples_all_equal(defined))
    ):
        # [h, h] would read as certainty: say why every resample gives the same horizon instead
        agree = rates is not None and all(rates[h].status is not EstimateStatus.OK for h in horizons)
        n_tasks = sum(rates[h].n_tasks for h in horizons) if rates is not None else 0
        why = (
            f"at each horizon every task has the same value ({n_tasks} task{'' if n_tasks == 1 else 's'} over "
            f"{len(horizons)} horizon{'' if len(horizons) == 1 else 's'}), so the "
            "bootstrap cannot vary"
            if agree
            else f"all {defined.size} resamples{' with a value' if defined.size < replicates.size else ''} cross at "
            "this horizon of the grid"
        )
        return HorizonCrossing(
            status="constant",
            horizon=int(point),
            low=None,
            high=None,
            largest_horizon=max(horizons),
            resamples_left_out=int(replicates.size - defined.size),
            note=f"no interval: {why}",
            **common,
        )
    low = high = None
    if defined.size:
        q_low, q_high = (q / 100.0 for q in params.percentiles)
        # inverted-CDF quantiles: the smallest order statistic whose empirical CDF reaches the level
        pick_low = defined[max(0, math.ceil(q_low * defined.size) - 1)]
        pick_high = defined[min(defined.size - 1, max(0, math.ceil(q_high * defined.size) - 1))]
        low = None if math.isinf(pick_low) else int(pick_low)
        high = None if math.isinf(pick_high) else int(pick_high)
    return HorizonCrossing(
        status="ok",
        horizon=None if math.isinf(point) else int(point),
        low=low,
        high=high,
        largest_horizon=max(horizons),
        resamples_left_out=int(replicates.size - defined.size),
        **common,
    )


def horizon_params(params: AnalysisParams, horizon: int) -> AnalysisParams:
    """The analysis parameters a horizon's tasks are resampled with: ``params`` with a seed derived from
    (``params.seed``, ``horizon``), so that every horizon draws its own resample indices (the horizons' tasks are
    resampled independently) and the same seed always gives the same draws."""
    state = np.random.SeedSequence([params.seed, horizon]).generate_state(2, dtype=np.uint32)
    return params.model_copy(update={"seed": int(state[0]) << 32 | int(state[1])})


def dose_curves(curves: Mapping[K, DoseInput], params: AnalysisParams = DEFAULT_PARAMS) -> dict[K, DoseCurve]:
    """Every curve's rates per horizon, logistic slope and crossing horizon (see the module docstring), in one
    batch: samples of the same layout share a draw, and every slope is fitted in one vectorised pass.

    Raises:
        ValueError: when a value is not 0/1.
    """
    flat: dict[tuple[K, int], ClusteredSample] = {}
    designs: dict[tuple[K, int], ClusteredSample] = {}
    for key, curve in curves.items():
        for horizon, sample in curve.samples.items():
            check_binary(sample, "a dose-response rate")
            flat[(key, horizon)] = sample
            if horizon in curve.designs:
                designs[(key, horizon)] = curve.designs[horizon]
    grid = sorted({h for curve in curves.values() for h in curve.samples})
    found: dict[tuple[K, int], tuple[Estimate, FloatVector]] = {}
    for horizon in grid:
        mine = {key: sample for key, sample in flat.items() if key[1] == horizon}
        found.update(
            means_with_replicates(
                mine,
                horizon_params(params, horizon),
                bounds=(0.0, 1.0),
                designs={key: d for key, d in designs.items() if key[1] == horizon},
            )
        )
    x = np.log2(np.asarray(grid, dtype=np.float64))
    column = {h: j for j, h in enumerate(grid)}
    keys = list(curves)
    rows = 1 + params.resamples
    rates = np.full((len(keys) * rows, len(grid)), np.nan)
    weights = np.zeros_like(rates)
    used: dict[K, list[int]] = {}
    for i, key in enumerate(keys):
        block = slice(i * rows, (i + 1) * rows)
        used[key] = []
        for horizon, sample in sorted(curves[key].samples.items()):
            estimate, replicates = found[(key, horizon)]
            if estimate.estimate is None:
                continue
            used[key].append(horizon)
            j = column[horizon]
            rates[block, j] = np.concatenate(([estimate.estimate], replicates))
            weights[block, j] = float(sample.n_tasks)
    # the point fits first; each curve's replicates start from its point estimate (a few Newton steps each)
    points = np.arange(0, rates.shape[0], rows)
    point_a, point_b = logistic_fits(rates[points], weights[points], x)
    # within a curve every row has the same weights and start, so rows with the same rates have the same slope:
    # each distinct row is fitted once (replicates of a horizon with few tasks take few values)
    distinct, inverse = _distinct_rows_per_block(rates, rows)
    curve_of = distinct // rows
    slopes = logistic_slopes(rates[distinct], weights[distinct], x, (point_a[curve_of], point_b[curve_of]))[inverse]
    # a resample in which a horizon with data has no episode with a value has no slope (and no crossing)
    missing = (weights > 0) & np.isnan(rates)
    slopes[missing.any(axis=1)] = np.nan
    horizon_values = np.asarray(grid, dtype=np.float64)
    out: dict[K, DoseCurve] = {}
    for i, key in enumerate(keys):
        block = slice(i * rows, (i + 1) * rows)
        curve = curves[key]
        per_horizon = {h: found[(key, h)][0] for h in sorted(curve.samples)}
        slope = _slope(float(slopes[i * rows]), slopes[i * rows + 1 : (i + 1) * rows], per_horizon, params)
        crossing = None
        if curve.threshold is not None and not used[key]:
            crossing = _crossing(math.inf, np.zeros(0), [], curve.threshold, params)
        elif curve.threshold is not None:
            columns = [column[h] for h in used[key]]
            crossed = _first_crossing(rates[block][:, columns], horizon_values[columns], curve.threshold)
            crossing = _crossing(float(crossed[0]), crossed[1:], used[key], curve.threshold, params, per_horizon)
            # a horizon without data below the crossing (every episode there a failed trial) may hold the first one
            blind = [h for h in sorted(curve.samples) if h not in used[key] and h < (crossing.horizon or math.inf)]
            if blind:
                why = (
                    f"h={', h='.join(map(str, blind))} {'has' if len(blind) == 1 else 'have'} no episode with a value, "
                    "so the first crossing may lie there"
                )
                crossing = crossing.model_copy(update={"note": "; ".join(filter(None, [crossing.note, why]))})
        out[key] = DoseCurve(rates=per_horizon, slope=slope, crossing=crossing)
    return out


__all__ = ["DoseCurve", "DoseInput", "dose_curves", "horizon_params", "logistic_fits", "logistic_slopes"]
