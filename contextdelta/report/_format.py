"""Small formatting helpers shared by the Markdown renderers and the dashboard (no NaN ever reaches a table).

Percentages are printed at the precision the report's Monte-Carlo error allows (``decimals``, from
``AnalysisInfo.rate_decimals``); an exact bound is labelled ``exact``. Every printed rate, percentage and difference
is rounded half up by `fixed` (``contextdelta.stats.fixed``, re-exported here): 12.5% at whole points is "13%".
"""

from __future__ import annotations

from collections.abc import Sequence

from contextdelta._words import plural as plural  # re-exported: the report package's sentences use it
from contextdelta.stats import (
    FLIP_NEEDS_REPEATS,
    Estimate,
    HorizonCrossing,
    LogisticSlope,
    SignFlipMethod,
    SignFlipTest,
    SlopeStatus,
    printed_decimals,
)
from contextdelta.stats import fixed as fixed  # re-exported: the report's renderers round through it

NO_BLOCKED_WRITE = "no data: not applicable, no write was blocked (conflict recovery is graded only after one)"
"""The note of a conflict-recovery rate over episodes with a verdict none of which had a blocked write."""
_NO_DATA_CELLS = {
    FLIP_NEEDS_REPEATS: f"no data ({FLIP_NEEDS_REPEATS})",
    NO_BLOCKED_WRITE: "n/a (no write was blocked)",
}
"""Part of a no-data estimate's note -> its table cell: why there is no number, in a few words."""


def pct(estimate: Estimate, decimals: int = 1) -> str:
    """A rate as ``"29% [12%, 50%]"`` (``exact`` appended for an exact bound), or ``"no data"`` / ``"undefined"``;
    a flip rate of tasks with one repeat each is ``"no data (needs at least 2 repeats per task)"``, a conflict-recovery
    rate without a blocked write ``"n/a (no write was blocked)"``."""
    if estimate.estimate is None:
        found = next((text for part, text in _NO_DATA_CELLS.items() if part in estimate.note), None)
        if found is not None:
            return found
    text = estimate.format(digits=decimals, scale=100.0, suffix="%")
    return f"{text} exact" if estimate.is_exact else text


def rate_with_count(estimate: Estimate, decimals: int = 1) -> str:
    """A rate with the episodes behind it: ``"2/7 = 28.6% [12.0%, 50.0%]"`` (k episodes with the outcome of the n
    with a value), or `pct`'s ``"no data"`` / ``"undefined"``."""
    if estimate.estimate is None or estimate.n_episodes == 0:
        return pct(estimate, decimals)
    k = round(estimate.estimate * estimate.n_episodes)
    return f"{k}/{estimate.n_episodes} = {pct(estimate, decimals)}"


def counted(estimate: Estimate, decimals: int = 1, tasks: int | None = None, episodes: int | None = None) -> str:
    """`pct` with the estimate's task and episode counts, unless they equal the ``tasks``/``episodes`` its table
    row already states."""
    text = pct(estimate, decimals)
    if estimate.has_value and (estimate.n_tasks, estimate.n_episodes) != (tasks, episodes):
        text += f" ({plural(estimate.n_tasks, 'task')}, {plural(estimate.n_episodes, 'episode')})"
    return text


def pp(estimate: Estimate, decimals: int = 1) -> str:
    """A difference of rates in percentage points, ``"-8 [-21, +0] pp"`` (``exact`` for an exact bound)."""
    if estimate.estimate is None:
        return estimate.format()
    if estimate.low is None or estimate.high is None:
        return f"{signed_pp(estimate.estimate, decimals)} pp (no interval: {estimate.no_interval})"
    point, low, high = (signed_pp(v, decimals) for v in (estimate.estimate, estimate.low, estimate.high))
    return f"{point} [{low}, {high}] pp" + (" exact" if estimate.is_exact else "")


def pp_change(value: float, decimals: int) -> str:
    """The size and direction of a difference of rates: ``"8 pp higher"``, ``"1.5 pp lower"``; one that is not 0
    but rounds to it at ``decimals`` is ``"less than 0.5 pp higher"`` (never ``"0 pp higher"``); exactly 0 is
    ``"no different"``."""
    if value == 0:
        return "no different"
    direction = "higher" if value > 0 else "lower"
    size = fixed(abs(value), decimals, scale=100.0)
    if float(size) == 0:
        return f"less than {0.5 * 10.0**-decimals:g} pp {direction}"
    return f"{size} pp {direction}"


def signed_pp(value: float, decimals: int) -> str:
    """A difference of rates (``value``) in percentage points with its sign; one that rounds to zero is ``+0``
    whichever side of zero it lies on."""
    return fixed(value, decimals, scale=100.0, signed=True)


def percent(value: float, decimals: int = 0) -> str:
    """A share as whole (or ``decimals``) percentage points, rounded half up: ``0.125`` -> ``"13"``."""
    return fixed(value, decimals, scale=100.0)


def num(estimate: Estimate, digits: int = 0) -> str:
    """A mean as ``"1234 [1100, 1400]"``."""
    return estimate.format(digits=max(0, digits))


def _end(value: float | str, decimals: int) -> str:
    """A slope or an interval end: ``+1.23``, ``+inf``, ``-inf``."""
    if value == "inf":
        return "+inf"
    if value == "-inf":
        return "-inf"
    return fixed(float(value), decimals, signed=True)  # a value that rounds to 0 is +0.00, never -0.00


def slope_text(slope: LogisticSlope) -> str:
    """A logistic slope with its interval: ``"+1.23 [+0.80, +1.71]"``, or ``"not estimable: ..."`` with the reason:
    separated rates (``"not estimable (separation, rising): ..."``) have an infinite maximum-likelihood slope, which
    is printed as the words that say why, never as ``+inf [+inf, +inf]``."""
    if slope.status is SlopeStatus.NO_DATA:
        return "no data"
    if slope.status is SlopeStatus.NOT_ESTIMABLE:
        return f"not estimable: {slope.note}"
    if slope.status is SlopeStatus.SEPARATED:
        rising = slope.estimate == "inf"
        return (
            f"not estimable (separation, {'rising' if rising else 'falling'}): the rate is {0 if rising else 1} at "
            f"every horizon below a step and {1 if rising else 0} at every horizon above it, so no finite slope fits "
            "(the maximum-likelihood slope is infinite), and every resample is separated too"
            if slope.low == slope.high == slope.estimate
            else f"not estimable (separation): {slope.note}"
        )
    d = printed_decimals(slope.mc_se, scale=1.0, max_decimals=2)
    assert slope.estimate is not None  # ok
    text = _end(slope.estimate, d)
    if slope.low is not None and slope.high is not None:
        text += f" [{_end(slope.low, d)}, {_end(slope.high, d)}]"
    else:
        text += (
            f" ({slope.note})" if slope.note.startswith("no interval:") else " (no interval: no resample had a slope)"
        )
    if slope.resamples_left_out:
        text += f" ({plural(slope.resamples_left_out, 'resample')} without a slope left out)"
    return text


def crossing_text(crossing: HorizonCrossing) -> str:
    """The first horizon above the threshold with its interval: ``"h=4 [h=4, h=8]"``, ``"not reached up to h=16"``."""
    if crossing.status == "no_data":
        return "no data"

    def at(horizon: int | None) -> str:
        return "not reached" if horizon is None else f"h={horizon}"

    if crossing.status == "constant":
        text = f"{at(crossing.horizon)} ({crossing.note})"
    elif crossing.horizon is None and crossing.low is None and crossing.high is None:
        text = f"not reached up to h={crossing.largest_horizon}"
    else:
        text = f"{at(crossing.horizon)} [{at(crossing.low)}, {at(crossing.high)}]"
    if crossing.resamples_left_out:
        text += f" ({plural(crossing.resamples_left_out, 'resample')} left out)"
    if crossing.note and crossing.status != "constant":
        text += f" ({crossing.note})"
    return text


def pvalue(value: float | None, alpha: float) -> str:
    """A p-value with as many significant digits (at least two) as it takes for the printed number to lie on the
    same side of ``alpha`` as the exact one, and to read as 0 or 1 only when it is exactly that: ``"0.016"``,
    ``"0.0496"`` (never ``"0.05"`` at alpha 0.05), ``"0.00012"``, ``"3.1e-07"``, ``"0.99997"``; ``"-"`` for none.

    The one formatter of every printed p-value (the report, ``compare``, the dashboard), so a reader who compares
    a printed p with alpha reaches the verdict the report states.
    """
    if value is None:
        return "-"
    if value in (0.0, 1.0):
        return f"{value:g}"
    side = _side(value, alpha)
    for digits in range(2, 18):
        text = f"{value:.{digits}g}"
        printed = float(text)
        if printed not in (0.0, 1.0) and _side(printed, alpha) == side:
            return text
    return repr(value)  # 17 significant digits always round-trip; kept for the type checker


def _side(value: float, alpha: float) -> int:
    """-1 below ``alpha``, 0 at it, +1 above it."""
    return (value > alpha) - (value < alpha)


def primary_pvalue(test: SignFlipTest, alpha: float) -> str:
    """The primary test's p-value (`pvalue`) with its method: ``"0.016"``, ``"0.012 (Monte Carlo, +-0.00031)"``,
    ``"not testable"``."""
    if not test.testable:
        return "not testable"
    if test.method is SignFlipMethod.MONTE_CARLO and test.pvalue_mc_se is not None:
        return f"{pvalue(test.pvalue, alpha)} (Monte Carlo, +-{test.pvalue_mc_se:.2g})"
    return pvalue(test.pvalue, alpha)


def holm_pvalue(test: SignFlipTest, alpha: float) -> str:
    """A Holm-adjusted p-value with the size of the family it was adjusted in: ``"0.031 (m=3)"``, ``"-"`` when the
    test left its family. For a row whose family differs from its column's (a sensitivity row)."""
    if test.pvalue_holm is None:
        return "-"
    return f"{pvalue(test.pvalue_holm, alpha)} (m={test.family_size})"


def cell(text: object) -> str:
    """A Markdown table cell: pipes escaped, newlines flattened."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """A Markdown table as lines."""
    out = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    out.extend("| " + " | ".join(cell(c) for c in row) + " |" for row in rows)
    return out


def fence(text: str) -> list[str]:
    """A fenced code block that cannot be closed early by the text."""
    return ["```text", text.replace("```", "'''"), "```"]
