"""The dose-response section: a run on a generated family records each task's horizon, reports success and the
stale-action rate against it per condition with slopes and crossing horizons, and verifies; the horizon is named
when the manifest and the task snapshot disagree; a run on the hand-written suite says in one line that it has no
horizon; a run recorded before horizons were keeps its report as it was.

Acceptance (issue 20): against the scripted server with policy context_trusting, on the superseded_observation
family order-address-shipped, the stale-action curve of last_n (n = 3) is 0 while the listing that shows the change
is inside its window (horizon <= 3) and positive once the horizon pushes it out, while full_history stays at 0 at
every horizon."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.report import StoryUnits, build_report, compare_runs, plan_run, render_comparison, render_power_plan
from contextdelta.report._markdown import _stories_line
from contextdelta.rundir import AGGREGATE_METRICS, BENCHMARK_REPORT, MANIFEST, RunDirectory, TaskInfo, stories_recorded
from contextdelta.tasks import load_directory
from contextdelta.verify import verify_run
from tests.report import runs

# Every test here reads a scripted run over the horizon suite, built once per session (about 15 s).
pytestmark = pytest.mark.slow

BEFORE_HORIZONS = Path(__file__).resolve().parents[1] / "verify" / "fixtures" / "20261201T104738Z-6ea5de"
"""A run directory written before horizons were recorded (see tests/verify/fixtures/README.md)."""


def curve(metrics: dict[str, Any], strategy: str, mode: str, hazard: str | None = None) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        c
        for c in metrics["dose_response"]["curves"]
        if c["condition"] == {"strategy": strategy, "protection_mode": mode} and c["hazard"] == hazard
    ]
    assert len(found) == 1
    return found[0]


def stale_by_horizon(c: dict[str, Any]) -> dict[int, float]:
    return {p["horizon"]: p["rates"]["stale_action"]["estimate"] for p in c["points"]}


def test_last_n_goes_stale_once_the_revealing_listing_leaves_its_window_and_full_history_never_does() -> None:
    path = runs.horizon_run()
    metrics = json.loads((path / AGGREGATE_METRICS).read_text())
    manifest = RunDirectory(path).read_manifest()
    assert manifest.strategy_params.last_n == 3
    dose = metrics["dose_response"]
    assert dose["horizons"] == [1, 2, 4, 8, 16] and dose["hazards"] == ["superseded_observation"]
    window = stale_by_horizon(curve(metrics, "last_n", "unprotected"))
    inside = {h: rate for h, rate in window.items() if h <= manifest.strategy_params.last_n}
    outside = {h: rate for h, rate in window.items() if h > manifest.strategy_params.last_n}
    assert inside == {1: 0.0, 2: 0.0}
    assert set(outside) == {4, 8, 16} and all(rate > 0 for rate in outside.values())
    for mode in ("unprotected", "freshness_contract"):
        assert set(stale_by_horizon(curve(metrics, "full_history", mode)).values()) == {0.0}
    # the contract blocks the stale write whatever the window
    assert set(stale_by_horizon(curve(metrics, "last_n", "freshness_contract")).values()) == {0.0}


def test_the_curve_has_intervals_slopes_and_crossing_horizons() -> None:
    metrics = json.loads((runs.horizon_run() / AGGREGATE_METRICS).read_text())
    window = curve(metrics, "last_n", "unprotected")
    for point in window["points"]:
        assert point["tasks"] == 4 and point["episodes"] == 4
        for rate in point["rates"].values():
            assert rate["n_tasks"] == 4 and rate["low"] <= rate["estimate"] <= rate["high"]
            # every task of the horizon agrees here: an exact Clopper-Pearson bound over its 4 tasks
            assert rate["status"] == "exact_bound"
    # 0 up to h=2 and 1 from h=4: separated, so the maximum-likelihood slope is infinite, never a huge number
    assert window["slopes"]["stale_action"]["status"] == "separated"
    assert window["slopes"]["stale_action"]["estimate"] == "inf"
    assert window["slopes"]["success"]["estimate"] == "-inf"
    crossing = window["stale_crossing"]
    # every task agrees at each horizon, so every resample crosses at h=4: no interval, never [h=4, h=4]
    assert (crossing["horizon"], crossing["low"], crossing["high"], crossing["threshold"]) == (4, None, None, 0.1)
    assert crossing["status"] == "constant" and "every task has the same value" in crossing["note"]
    baseline = curve(metrics, "full_history", "unprotected")
    assert baseline["slopes"]["stale_action"]["status"] == "not_estimable"
    assert baseline["slopes"]["stale_action"]["estimate"] is None
    assert baseline["stale_crossing"]["horizon"] is None and baseline["stale_crossing"]["largest_horizon"] == 16


def test_the_report_prints_the_curves_and_verify_re_derives_them() -> None:
    path = runs.horizon_run()
    report = (path / BENCHMARK_REPORT).read_text()
    section = report.split("## Dose-response: rates against the horizon")[1].split("\n## ")[0]
    assert "Stale-action rate by horizon:" in section and "Success by horizon:" in section
    assert (
        "| last_n / unprotected | 0.0% [0.0%, 60.2%] exact | 0.0% [0.0%, 60.2%] exact | 100.0% [39.8%, 100.0%] exact"
        in section
    )
    assert (
        "| not estimable (separation, rising): the rate is 0 at every horizon below a step and 1 at every horizon "
        "above it, so no finite slope fits (the maximum-likelihood slope is infinite), and every resample is "
        "separated too | h=4 (no interval: at each horizon every task has the same value (20 tasks over 5 horizons), "
        "so the bootstrap cannot vary) |" in section
    )
    assert "[h=4, h=4]" not in section
    assert "inf [" not in section and "+inf" not in section
    assert "not estimable: 0 at every horizon | not reached up to h=16 |" in section
    assert verify_run(path).lines() == ["MATCH"]


def test_a_horizon_run_takes_the_story_as_its_unit_and_says_so() -> None:
    path = runs.horizon_run()
    metrics = json.loads((path / AGGREGATE_METRICS).read_text())
    dose, stories = metrics["dose_response"], metrics["stories"]
    # the suite tells each story at every horizon: tasks / horizons stories of one task per horizon
    assert stories == {
        "tasks": dose["tasks"],
        "stories": dose["tasks"] // len(dose["horizons"]),
        "sizes": {str(len(dose["horizons"])): dose["tasks"] // len(dose["horizons"])},
    }
    report = (path / BENCHMARK_REPORT).read_text()
    limitations = report.split("## Limitations\n")[1].split("\n## ")[0]
    assert (
        f"- Shared stories: the {dose['tasks']} tasks are {stories['stories']} independent stories, and every "
        "interval and test counts stories, not tasks" in limitations
    )
    assert f"tell {stories['stories']} stories of {len(dose['horizons'])} tasks each" in report
    for rq in metrics["research_questions"]:
        for c in rq["comparisons"]:
            assert c["test"]["n_tasks"] == stories["stories"]  # the test's unit
            assert c["difference"]["n_tasks"] == dose["tasks"]  # the effect: a mean over tasks
    assert "Sign-flip test over stories" in report and "Sign-flip test over tasks" not in report
    plain = runs.trusting_run()
    assert "Shared stories" not in (plain / BENCHMARK_REPORT).read_text()
    assert "stories" not in json.loads((plain / AGGREGATE_METRICS).read_text())


def test_the_horizon_comes_from_the_task_snapshot_and_verify_names_a_changed_one(tmp_path: Path) -> None:
    path = runs.copy_run(runs.horizon_run(), tmp_path)
    snapshot, _ = load_directory(path / "tasks")
    manifest = json.loads((path / MANIFEST).read_text())
    assert {t["id"]: t["horizon"] for t in manifest["tasks"]} == {
        t.task.id: t.task.evaluator.family.horizon for t in snapshot if t.task.evaluator.family
    }
    target = manifest["tasks"][0]
    target["horizon"] = target["horizon"] * 2
    (path / MANIFEST).write_text(json.dumps(manifest))
    lines = verify_run(path).lines()
    # the seal names the edited manifest field, the snapshot check what it contradicts
    assert f"{path.name}: run_manifest.json tasks[0].horizon: edited after the run" in "\n".join(lines)
    assert any(
        f"{path.name}: tasks/{target['id']}.horizon: manifest {target['horizon']}, snapshot " in line for line in lines
    )
    # the report follows the recorded horizon, so the aggregates no longer re-derive either
    assert any("aggregate_metrics.json dose_response" in line for line in lines)


def test_the_story_comes_from_the_task_snapshot_and_verify_names_a_changed_one(tmp_path: Path) -> None:
    path = runs.copy_run(runs.horizon_run(), tmp_path)
    snapshot, _ = load_directory(path / "tasks")
    manifest = json.loads((path / MANIFEST).read_text())
    assert {t["id"]: t["story"] for t in manifest["tasks"]} == {
        t.task.id: f"{t.task.evaluator.family.name}#{t.task.evaluator.family.seed}"
        for t in snapshot
        if t.task.evaluator.family
    }
    # a task moved into a story of its own: one unit more, so the tests and intervals no longer re-derive
    target = manifest["tasks"][0]
    target["story"] = None
    (path / MANIFEST).write_text(json.dumps(manifest))
    lines = verify_run(path).lines()
    assert f"{path.name}: run_manifest.json tasks[0].story: edited after the run" in "\n".join(lines)
    assert any(f"{path.name}: tasks/{target['id']}.story: manifest None, snapshot " in line for line in lines)
    assert any(
        "aggregate_metrics.json " in line and "recomputed exact Clopper-Pearson bound with n = 5 stories" in line
        for line in lines
    )


def test_a_run_recorded_before_stories_keeps_its_task_level_statistics(tmp_path: Path) -> None:
    path = runs.copy_run(runs.horizon_run(), tmp_path)
    manifest = RunDirectory(path).read_manifest()
    older = manifest.model_copy(update={"tasks": [TaskInfo(**t.model_dump(exclude={"story"})) for t in manifest.tasks]})
    assert not stories_recorded(older)
    report = build_report(older, RunDirectory(path).read_episodes())
    assert report.metrics.stories is None
    assert "Sign-flip test over tasks" in report.markdown and "- **Stories**" not in report.markdown
    assert "Shared stories across horizons" in report.markdown  # the limitation it could not take into account
    tests = [c.test for q in report.metrics.research_questions for c in q.comparisons]
    assert tests and all(t.n_tasks == report.metrics.dose_response.tasks for t in tests)  # type: ignore[union-attr]


def test_a_run_without_horizons_says_so_in_one_line() -> None:
    path = runs.trusting_run()
    metrics = json.loads((path / AGGREGATE_METRICS).read_text())
    assert "dose_response" not in metrics
    assert all(t["horizon"] is None for t in json.loads((path / MANIFEST).read_text())["tasks"])
    report = (path / BENCHMARK_REPORT).read_text()
    section = report.split("## Dose-response: rates against the horizon\n\n")[1].split("\n## ")[0]
    assert section.strip().splitlines() == [
        "Not applicable: none of this run's 3 tasks has a horizon (generated tasks carry one: `contextdelta "
        "generate-tasks`, the `horizon` suite)."
    ]


def test_a_run_recorded_before_horizons_keeps_its_report(tmp_path: Path) -> None:
    directory = RunDirectory(BEFORE_HORIZONS)
    report = build_report(directory.read_manifest(), directory.read_episodes())
    assert report.metrics.dose_response is None and "Dose-response" not in report.markdown
    result = CliRunner().invoke(app, ["verify", BEFORE_HORIZONS.name, "--results-dir", str(BEFORE_HORIZONS.parent)])
    assert result.exit_code == 0 and result.stdout.splitlines() == ["MATCH"]


def test_compare_and_power_take_the_story_as_the_unit_of_a_horizon_run() -> None:
    path = runs.horizon_run()
    directory = RunDirectory(path)
    manifest, records = directory.read_manifest(), directory.read_episodes()
    stories = json.loads((path / AGGREGATE_METRICS).read_text())["stories"]
    found = compare_runs(manifest, records, manifest, records)
    assert found.stories == stories["stories"]
    text = render_comparison(found)
    assert "discordant stories (a / b higher)" in text and "p (sign-flip over stories)" in text
    assert all(row.comparison.test.n_tasks == stories["stories"] for f in found.families for row in f.comparisons)

    plan = plan_run(manifest, records, 0.5, repeats=[1, 2], max_tasks=200)
    size = max(int(k) for k in stories["sizes"])
    assert plan.story_size == size
    for row in plan.comparisons:
        assert row.pilot_stories == stories["stories"] and row.pilot_tasks == stories["tasks"]
        assert all(v is None or v % size == 0 for v in row.tasks_needed.values())  # whole stories
    assert any("the primary test's unit is the story" in note for note in plan.notes)
    assert "pilot discordant units" in render_power_plan(plan)


@pytest.mark.parametrize(
    ("stories", "expected"),
    [
        (StoryUnits(tasks=2, stories=1, sizes={"2": 1}), "these 2 tasks tell 1 story of 2 tasks: "),
        (StoryUnits(tasks=10, stories=5, sizes={"2": 5}), "these 10 tasks tell 5 stories of 2 tasks each: "),
        (
            StoryUnits(tasks=7, stories=4, sizes={"1": 1, "2": 3}),
            "these 7 tasks tell 4 stories (1 story of 1 task, 3 stories of 2 tasks): ",
        ),
    ],
)
def test_the_methods_line_counts_stories_in_words(stories: StoryUnits, expected: str) -> None:
    metrics = SimpleNamespace(stories=stories)
    (line,) = _stories_line(metrics)  # type: ignore[arg-type]
    assert line.startswith(f"- **Stories**: {expected}")


def test_one_task_with_a_horizon_is_singular() -> None:
    """The section said "1 task of the run have a horizon"."""
    directory = RunDirectory(runs.horizon_run())
    records = directory.read_episodes()
    first = sorted(r.task_id for r in records)[0]
    text = build_report(directory.read_manifest(), [r for r in records if r.task_id == first]).markdown
    assert "1 task of the run has a horizon." in text and "have a horizon" not in text


def test_the_horizon_rule_is_not_claimed_for_agents_that_batch_calls() -> None:
    """The section said the observation is in a last_n context "exactly when the horizon is at most n", which holds
    only for an agent that makes one call a step: several calls in one step are one tool group."""
    text = " ".join((runs.horizon_run() / BENCHMARK_REPORT).read_text().split())
    assert "exactly when the horizon is at most n" not in text
    assert "for an agent that makes one call a step, and longer for one that makes several calls in a step" in text
