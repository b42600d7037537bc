"""The Horizon page under ``streamlit.testing.v1.AppTest``: on a run over generated tasks it charts the rate against
the horizon per condition with intervals and tabulates slopes and crossing horizons from the run's aggregate
metrics; the rate and subset pickers switch the chart; a run without horizons says so instead of an empty chart."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

from contextdelta.dashboard.data import load_run
from contextdelta.dashboard.dose_response import ALL_TASKS, dose_gaps, dose_points, dose_subsets, dose_summary_rows
from contextdelta.rundir.layout import RAW_RUNS
from tests.dashboard.conftest import make_malformed, make_running
from tests.dashboard.test_app import no_exception, open_page
from tests.report import runs

# Every test here reads a scripted run over the horizon suite, built once per session (about 15 s).
pytestmark = pytest.mark.slow

PAGE = "views/horizon.py"


@pytest.fixture(scope="module")
def horizon_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results folder holding the horizon run and the hand-written trusting run."""
    folder = tmp_path_factory.mktemp("dashboard-horizon")
    runs.copy_run(runs.horizon_run(), folder)
    runs.copy_run(runs.trusting_run(), folder)
    return folder


def chart_values(app: AppTest) -> list[dict[str, Any]]:
    """The rows of the page's one chart (Streamlit ships them as an Arrow stream beside the spec)."""
    (chart,) = app.get("vega_lite_chart")
    (dataset,) = chart.proto.datasets
    rows: list[dict[str, Any]] = pa.ipc.open_stream(dataset.data.data).read_all().to_pylist()
    return rows


def test_the_horizon_page_charts_the_dose_response(horizon_results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = runs.horizon_run()
    app = open_page(horizon_results, monkeypatch, PAGE, {"run": run.name})
    no_exception(app)
    metrics = load_run(run).metrics
    (chart,) = app.get("vega_lite_chart")
    assert '"errorbar"' in chart.proto.spec and '"line"' in chart.proto.spec and '"log"' in chart.proto.spec
    rows = chart_values(app)
    expected = dose_points(metrics, "stale_action")
    assert {(r["condition"], r["horizon"], r["rate"]) for r in rows} == {
        (p["condition"], p["horizon"], p["rate"]) for p in expected
    }
    window = {r["horizon"]: r["rate"] for r in rows if r["condition"] == "last_n / unprotected"}
    assert window == {1: 0.0, 2: 0.0, 4: 1.0, 8: 1.0, 16: 1.0}
    (table,) = [d.value for d in app.dataframe]
    assert list(table["condition"]) == [row["condition"] for row in dose_summary_rows(metrics)]
    row = table.set_index("condition").loc["last_n / unprotected"]
    assert row["first horizon above 10% stale"].startswith("h=4 (no interval: at each horizon every task has the same")
    assert row["slope per doubling (stale-action rate)"].startswith("not estimable (separation, rising): the rate is 0")
    assert dose_subsets(metrics) == [ALL_TASKS]  # one hazard: no per-hazard curves


def test_the_rate_picker_switches_the_chart(horizon_results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = runs.horizon_run()
    app = open_page(horizon_results, monkeypatch, PAGE, {"run": run.name})
    app.radio(key="cd_horizon_metric").set_value("success").run()
    no_exception(app)
    window = {r["horizon"]: r["rate"] for r in chart_values(app) if r["condition"] == "last_n / unprotected"}
    assert window == {1: 1.0, 2: 1.0, 4: 0.0, 8: 0.0, 16: 0.0}


def test_a_run_without_horizons_says_so(horizon_results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_page(horizon_results, monkeypatch, PAGE, {"run": runs.trusting_run().name})
    no_exception(app)
    assert not app.get("vega_lite_chart")
    assert any("none of its tasks has a horizon" in i.value for i in app.info)


def test_an_empty_folder_a_malformed_run_and_a_run_in_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_page(tmp_path, monkeypatch, PAGE)
    no_exception(app)
    assert any("No run directories" in i.value for i in app.info)
    broken = make_malformed(runs.horizon_run(), tmp_path, "zz-broken-lines")
    app = open_page(tmp_path, monkeypatch, PAGE, {"run": broken.name})
    no_exception(app)
    assert any(f"`{broken.name}` is malformed" in e.value and "raw_runs.jsonl: line 2" in e.value for e in app.error)
    running = make_running(runs.horizon_run(), tmp_path, keep=30)
    app = open_page(tmp_path, monkeypatch, PAGE, {"run": running.name})
    no_exception(app)
    assert any("still in progress" in i.value and "30 of 80" in i.value for i in app.info)
    assert app.get("vega_lite_chart")  # the curves of the episodes so far, recomputed from raw_runs.jsonl


def without_episodes(source: Path, into: Path, drop: str) -> Path:
    """A copy of ``source`` without the episodes whose task id contains ``drop`` under last_n / unprotected (the
    seal then names the change, and the dashboard recomputes the metrics from the episodes left)."""
    target = runs.copy_run(source, into)
    kept = [
        line
        for line in (target / RAW_RUNS).read_text().splitlines(keepends=True)
        if not (
            drop in (record := json.loads(line))["task_id"]
            and record["strategy"] == "last_n"
            and record["protection_mode"] == "unprotected"
        )
    ]
    (target / RAW_RUNS).write_text("".join(kept))
    return target


def test_a_horizon_without_data_breaks_the_line_and_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gapped = without_episodes(runs.horizon_run(), tmp_path, "-h04-")
    app = open_page(tmp_path, monkeypatch, PAGE, {"run": gapped.name})
    no_exception(app)
    (chart,) = app.get("vega_lite_chart")
    rows = [r for r in chart_values(app) if r["condition"] == "last_n / unprotected"]
    # the points either side of h=4 are in different segments, and the line is drawn per segment
    assert {r["horizon"]: r["segment"] for r in rows} == {1: 1, 2: 1, 8: 2, 16: 2}
    assert '"segment"' in chart.proto.spec and '"detail"' in chart.proto.spec
    full = {r["horizon"]: r["segment"] for r in chart_values(app) if r["condition"] == "full_history / unprotected"}
    assert full == {1: 1, 2: 1, 4: 1, 8: 1, 16: 1}
    assert "last_n / unprotected: h=4 (no episodes)" in chart.proto.spec  # the chart's own subtitle
    assert any("No data" in c.value and "h\\=4 \\(no episodes\\)" in c.value for c in app.caption)
    points = dose_points(load_run(gapped).metrics, "success")
    (gap,) = [p for p in points if p["rate"] is None]
    assert (gap["condition"], gap["horizon"], gap["no_data"]) == ("last_n / unprotected", 4, "no episodes")
    assert dose_gaps(points) == ["last_n / unprotected: h=4 (no episodes)"]


def test_a_horizon_run_without_a_finished_episode_says_it_has_none_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = make_running(runs.horizon_run(), tmp_path, keep=0)
    app = open_page(tmp_path, monkeypatch, PAGE, {"run": started.name})
    no_exception(app)
    assert not app.get("vega_lite_chart")
    infos = [i.value for i in app.info]
    assert not any("none of its tasks has a horizon" in i for i in infos), infos  # they have: no episode yet
    assert any(
        i.startswith("Nothing to chart yet: 20 of the run's 20 tasks have a horizon (h=1, 2, 4, 8, 16)") for i in infos
    ), infos


def test_compare_says_the_unit_is_the_story_where_tasks_share_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(runs.horizon_run(), tmp_path / "copy-1")
    shutil.copytree(runs.horizon_run(), tmp_path / "copy-2")
    app = open_page(tmp_path, monkeypatch, "views/compare.py", {"a": "copy-1", "b": "copy-2"})
    no_exception(app)
    facts = next(m.value for m in app.markdown if m.value.startswith("- task set"))
    assert "unit of the intervals and tests: the story (4 stories" in facts, facts
    assert not any("the unit is the task." in c.value for c in app.caption)


def test_a_horizon_none_of_a_hazards_tasks_has_is_no_gap() -> None:
    """A hazard's tasks may not cover every horizon of the run: its curves skip those horizons as the report's
    tables do, instead of naming them as horizons without data."""
    metrics = load_run(runs.horizon_run()).metrics
    dose = metrics.dose_response
    assert dose is not None
    short = [
        c.model_copy(update={"hazard": "superseded_observation", "points": [p for p in c.points if p.horizon != 16]})
        for c in dose.curves
    ]
    edited = metrics.model_copy(update={"dose_response": dose.model_copy(update={"curves": [*dose.curves, *short]})})
    points = dose_points(edited, "success", "superseded_observation")
    assert points and {p["horizon"] for p in points} == {1, 2, 4, 8}
    assert dose_gaps(points) == []
    assert {p["horizon"] for p in dose_points(edited, "success")} == {1, 2, 4, 8, 16}
