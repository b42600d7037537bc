"""The dashboard's Altair charts, built from `contextdelta.dashboard.tables` points (no Streamlit here).

Facets sit far enough apart that the last tick label of one (``100%``) never meets the first of the next, and the
axes' outer labels are flushed inside their facet; the widths fit three facets beside the strategy labels in the
main column of a 1366 px window.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import altair as alt
import pandas as pd

MODE_COLOURS = {"unprotected": "#c0392b", "freshness_contract": "#1f77b4"}
"""Protection mode colours (the legend's order)."""
FACET_SPACING = 36
"""Pixels between facets."""
FACET_WIDTH = 200
"""Width of one facet (px)."""


def _colour(groups: Sequence[str]) -> alt.Color:
    known = [m for m in MODE_COLOURS if m in groups] + [g for g in groups if g not in MODE_COLOURS]
    palette = [MODE_COLOURS.get(g, "#7f7f7f") for g in known]
    return alt.Color(
        "group:N",
        title="protection mode",
        scale=alt.Scale(domain=known, range=palette),
        legend=alt.Legend(orient="bottom"),
    )


def _facet_header() -> alt.Header:
    return alt.Header(title=None, labelFontSize=13, labelFontWeight="bold", labelPadding=6)


def rate_chart(points: list[dict[str, Any]], metrics: Sequence[str]) -> alt.FacetChart:
    """Each condition's rate with its interval, one facet per metric (``metrics``: facet order), strategies down
    the side and the protection modes side by side within each."""
    data = pd.DataFrame(points).rename(columns={"protection_mode": "group"}).dropna(subset=["rate"])
    base = alt.Chart(data).encode(
        y=alt.Y("strategy:N", title=None, sort=list(dict.fromkeys(data["strategy"])), axis=alt.Axis(labelLimit=160)),
        yOffset=alt.YOffset("group:N"),
        color=_colour(list(dict.fromkeys(data["group"]))),
    )
    axis = alt.Axis(format="%", values=[0, 0.25, 0.5, 0.75, 1], labelFlush=True, title=None)
    bars = base.mark_errorbar(ticks=True, thickness=2).encode(
        x=alt.X("low:Q", scale=alt.Scale(domain=[0, 1]), axis=axis), x2="high:Q"
    )
    dots = base.mark_point(filled=True, size=60).encode(
        x=alt.X("rate:Q", scale=alt.Scale(domain=[0, 1])),
        tooltip=["condition", "metric", "interval", "episodes", "tasks", "status"],
    )
    return (
        alt.layer(bars, dots)
        .properties(width=FACET_WIDTH, height=alt.Step(14))
        .facet(column=alt.Column("metric:N", sort=list(metrics), header=_facet_header()), spacing=FACET_SPACING)
    )


def difference_chart(
    points: list[dict[str, Any]], *, title: str, metrics: Sequence[str] = (), width: int = FACET_WIDTH
) -> alt.FacetChart:
    """Differences in percentage points with their intervals and a rule at zero, one facet per metric (in
    ``metrics`` order, then any other); ``label`` down the side, ``group`` (the protection mode) side by side. The
    axis is symmetric around zero, to the next 10 pp beyond the widest interval."""
    data = pd.DataFrame(points).dropna(subset=["difference"])
    for column in ("difference", "low", "high"):
        data[column] = 100 * data[column]
    widest = max(5.0, *(abs(v) for v in (*data["low"], *data["high"])))
    limit = min(100.0, 10 * math.ceil(widest / 10))
    scale = alt.Scale(domain=[-limit, limit])
    base = alt.Chart().encode(
        y=alt.Y("label:N", title=None, sort=list(dict.fromkeys(data["label"])), axis=alt.Axis(labelLimit=160)),
        yOffset=alt.YOffset("group:N"),
        color=_colour(list(dict.fromkeys(data["group"]))),
    )
    axis = alt.Axis(format="+d", labelFlush=True, title=title, tickCount=5)
    bars = base.mark_errorbar(ticks=True, thickness=2).encode(x=alt.X("low:Q", scale=scale, axis=axis), x2="high:Q")
    dots = base.mark_point(filled=True, size=60).encode(
        x=alt.X("difference:Q", scale=scale),
        tooltip=["label", "group", "metric", "interval", "p (Holm)", "tasks", "status"],
    )
    zero = alt.Chart().mark_rule(color="#52606d", strokeDash=[4, 3]).encode(x=alt.datum(0))
    order = [*metrics, *(m for m in dict.fromkeys(data["metric"]) if m not in metrics)]
    return (
        alt.layer(zero, bars, dots, data=data)
        .properties(width=width, height=alt.Step(14))
        .facet(column=alt.Column("metric:N", sort=order, header=_facet_header()), spacing=FACET_SPACING)
    )


def horizon_chart(
    points: list[dict[str, Any]], *, title: str, gaps: Sequence[str] = ()
) -> alt.LayerChart | alt.FacetChart:
    """Rate against the horizon (log2 axis) per condition from `contextdelta.dashboard.dose_response.dose_points`
    rows: each point with its interval, and a line through each unbroken run of horizons with a value (its
    ``segment``), so no line crosses a horizon without data; ``gaps`` (`dose_gaps`) are the chart's subtitle."""
    data = pd.DataFrame(points).dropna(subset=["rate"])
    base = alt.Chart(data).encode(
        x=alt.X("horizon:Q", title="horizon (agent calls)", scale=alt.Scale(type="log", base=2)),
        color=alt.Color("strategy:N", title="strategy", legend=alt.Legend(orient="bottom")),
        strokeDash=alt.StrokeDash("protection_mode:N", title="protection mode"),
    )
    tooltip = ["condition", "horizon", "interval", "tasks", "episodes", "status"]
    bars = base.mark_errorbar(ticks=True).encode(
        y=alt.Y("low:Q", title=title, scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")), y2="high:Q"
    )
    rate = alt.Y("rate:Q", scale=alt.Scale(domain=[0, 1]))
    line = base.mark_line().encode(y=rate, detail=alt.Detail(["condition:N", "segment:Q"]))
    dots = base.mark_point(filled=True).encode(y=rate, shape=alt.Shape("protection_mode:N"), tooltip=tooltip)
    heading = alt.TitleParams(
        text="No data at some horizons (no line is drawn across them):" if gaps else "",
        subtitle=list(gaps),
        anchor="start",
        fontSize=12,
        fontWeight="normal",
    )
    return alt.layer(bars, line, dots).properties(height=360, title=heading)
