"""Failed trials (a run whose server refuses some requests as too long): counted as failures in success, left out
of the safety rates, counted per comparison with a sensitivity row, warned about, and split by termination."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.attribution import FailureMode
from contextdelta.cli import app
from contextdelta.report import AggregateMetrics, compare_runs, plan_run
from contextdelta.report._compare import comparison_table
from contextdelta.rundir import VERDICT_COLUMNS, RunDirectory
from contextdelta.rundir.layout import (
    AGGREGATE_METRICS,
    BENCHMARK_REPORT,
    FAILURE_ATLAS,
    TASK_RESULTS,
    render_task_results,
    task_result_row,
)
from contextdelta.verify import verify_run
from contextdelta.verify._verify import legacy_failure_modes
from tests.report import runs

Row = dict[str, str]


@pytest.fixture(scope="module")
def faulted() -> Path:
    return runs.faulted_run()


def rows(path: Path) -> list[Row]:
    with (path / TASK_RESULTS).open(newline="") as handle:
        return list(csv.DictReader(handle))


def metrics(path: Path) -> AggregateMetrics:
    return AggregateMetrics.model_validate_json((path / AGGREGATE_METRICS).read_text())


@pytest.mark.slow
def test_the_run_has_failed_trials_and_verifies(faulted: Path) -> None:
    failed = [r for r in rows(faulted) if r["failed"] == "true"]
    assert failed and {r["termination_reason"] for r in failed} == {"context_window_exceeded"}
    assert verify_run(faulted).ok


def test_success_counts_failed_trials_as_failures_and_safety_rates_leave_them_out(faulted: Path) -> None:
    by_condition: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in rows(faulted):
        by_condition[(r["strategy"], r["protection_mode"])].append(r)
    m = metrics(faulted)
    for c in m.conditions:
        mine = by_condition[(c.condition.strategy, c.condition.protection_mode)]
        verdict = [r for r in mine if r["failed"] == "false"]
        assert (c.episodes, c.episodes_with_verdict, c.failed_trials) == (
            len(mine),
            len(verdict),
            len(mine) - len(verdict),
        )
        success = c.rates["success"]
        assert success.n_episodes == len(mine)
        assert success.estimate == pytest.approx(sum(r["success"] == "true" for r in mine) / len(mine))
        for metric, column in (("harmful_action", "harmful_action"), ("stale_action", "no_stale_action")):
            rate = c.rates[metric]
            hits = [r for r in verdict if (r[column] == "true") == (metric == "harmful_action")]
            assert rate.n_episodes == len(verdict) and rate.n_missing == len(mine) - len(verdict)
            assert rate.estimate == pytest.approx(len(hits) / len(verdict))
        assert c.failure_modes.get("provider_error", 0) == c.failed_trials
        assert c.failed_trials_by_termination == (
            {"context_window_exceeded": c.failed_trials} if c.failed_trials else None
        )
    assert m.failure_modes["provider_error"] == sum(c.failed_trials for c in m.conditions)
    assert m.failed_trials_by_termination == {"context_window_exceeded": m.episodes.failed_trials}


def atlas_totals(path: Path) -> dict[str, int]:
    """The total column of the atlas's counts table, per failure mode (zeros left out)."""
    out = {}
    for line in (path / FAILURE_ATLAS).read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| `") and int(cells[-1]):
            out[cells[0].strip("`")] = int(cells[-1])
    return out


def test_failure_modes_are_the_atlas_counts_and_failed_trials_are_split_apart(faulted: Path) -> None:
    """aggregate_metrics.json's failure_modes use the atlas's vocabulary (SPEC section 9): its provider_error is the
    atlas's (every failed trial); the terminations of the failed trials are a field of their own."""
    data = json.loads((faulted / AGGREGATE_METRICS).read_text())
    assert data["failure_modes"] == atlas_totals(faulted)
    assert set(data["failure_modes"]) <= {m.value for m in FailureMode}
    assert data["failed_trials_by_termination"] == {"context_window_exceeded": data["episodes"]["failed_trials"]}
    for c in data["conditions"]:
        assert set(c["failure_modes"]) <= {m.value for m in FailureMode}
        assert ("failed_trials_by_termination" in c) == (c["failed_trials"] > 0)


def test_verify_reads_failure_modes_written_before_the_split(faulted: Path, tmp_path: Path) -> None:
    """A report written when failure_modes held the failed trials' terminations verifies MATCH with a note; the
    same numbers under a wrong key are named."""
    path = runs.copy_run(faulted, tmp_path)
    directory = RunDirectory(path)
    data = json.loads((path / AGGREGATE_METRICS).read_text())
    legacy = legacy_failure_modes(data)
    assert "failed_trials_by_termination" not in legacy and "provider_error" not in legacy["failure_modes"]
    (path / AGGREGATE_METRICS).write_text(json.dumps(legacy, indent=2) + "\n")
    assert directory.reseal_files()
    result = verify_run(path)
    assert result.ok, result.divergences
    assert any("predates failed_trials_by_termination" in n for n in result.notes), result.notes
    legacy["failure_modes"]["harness_error"] = legacy["failure_modes"].pop("context_window_exceeded")
    (path / AGGREGATE_METRICS).write_text(json.dumps(legacy, indent=2) + "\n")
    assert directory.reseal_files()
    fields = {d.field for d in verify_run(path).divergences}
    assert f"{AGGREGATE_METRICS} failure_modes.harness_error" in fields, fields


def test_each_comparison_counts_its_failed_pairs_and_has_a_sensitivity_row(faulted: Path) -> None:
    table = rows(faulted)
    failed = {(r["strategy"], r["protection_mode"], r["task_id"], r["repeat"]) for r in table if r["failed"] == "true"}
    m = metrics(faulted)
    compared = [c for q in m.research_questions for c in q.comparisons]
    assert compared
    for c in compared:
        cells = {
            (r["task_id"], r["repeat"])
            for r in table
            if (r["strategy"], r["protection_mode"]) == (c.a.strategy, c.a.protection_mode)
        }
        involved = {
            cell
            for cell in cells
            if (c.a.strategy, c.a.protection_mode, *cell) in failed
            or (c.b.strategy, c.b.protection_mode, *cell) in failed
        }
        assert c.failed_pairs == len(involved)
        assert (c.sensitivity is None) == (not involved)
        if c.sensitivity is not None:
            kept = cells - involved
            assert c.sensitivity.episodes.n_pairs <= len(kept)
            assert c.sensitivity.test.n_tasks == len({task for task, _ in kept})
    text = (faulted / BENCHMARK_REPORT).read_text()
    assert "## Warnings" in text and "**failed_trials**" in text
    assert "failed-trial pairs |" in text  # the sensitivity rows
    warned = [w for w in m.warnings if w.code == "failed_discordance"]
    for c in compared:
        majority = c.test.n_discordant > 0 and 2 * c.failed_discordant_tasks > c.test.n_discordant
        assert majority == any(c.name in w.message for w in warned)


def test_a_sensitivity_row_shows_the_size_of_its_own_holm_family(faulted: Path) -> None:
    """The rows without failed-trial pairs are Holm-adjusted in a family of their own: the report prints that
    family's m next to their adjusted p-value, not the primary family's m of the column header."""
    m = metrics(faulted)
    text = (faulted / BENCHMARK_REPORT).read_text()
    shown = 0
    for q in m.research_questions:
        for c in q.comparisons:
            s = c.sensitivity
            if s is None or s.test.pvalue_holm is None:
                continue
            assert s.test.family_size == len(q.sensitivity_family)
            row = next(line for line in text.splitlines() if line.startswith(f"| ... {c.name} without the "))
            assert f"(m={len(q.sensitivity_family)})" in row.split(" | ")[6]
            assert "of the sensitivity family: " in text
            shown += 1
        if q.sensitivity_family:
            assert f"own {len(q.sensitivity_family)} testable comparison" in text
            assert f"m={len(q.sensitivity_family)}): {'; '.join(q.sensitivity_family)}." in text
    assert shown


def test_a_failed_trial_has_no_verdict_in_any_per_episode_view(faulted: Path, tmp_path: Path) -> None:
    """task_results.csv, the per-episode means, the atlas and the inspect log give a failed trial no verdict: no
    grader passes or fails, no count is 0 (raw_runs.jsonl keeps what the graders found on the partial trajectory)."""
    failed = [r for r in rows(faulted) if r["failed"] == "true"]
    assert failed and all(r["success"] == "false" for r in failed)
    assert all(r[c] == "" for r in failed for c in VERDICT_COLUMNS), failed[0]
    kept = [r for r in rows(faulted) if r["failed"] == "false"]
    assert all(r[c] != "" for r in kept for c in VERDICT_COLUMNS if c not in ("conflict_recovery",))
    for c in metrics(faulted).conditions:
        stale = c.means["stale_action_count"]
        assert (stale.n_episodes, stale.n_missing) == (c.episodes_with_verdict, c.failed_trials)
    atlas = (faulted / FAILURE_ATLAS).read_text()
    assert "(failed trial: no verdict)" in atlas and "(failed trial); failed graders" not in atlas
    log = tmp_path / "run.json"
    assert (
        CliRunner()
        .invoke(
            app,
            ["export", faulted.name, "--results-dir", str(faulted.parent), "--out", str(log), "--format", "inspect"],
        )
        .exit_code
        == 0
    )
    samples = json.loads(log.read_text())["samples"]
    failed_ids = {r["run_id"] for r in failed}
    scored = [s for s in samples if s["metadata"]["run_id"] in failed_ids]
    assert len(scored) == len(failed) and all(set(s["scores"]) == {"success"} for s in scored)
    assert all(s["scores"]["success"]["value"] == 0.0 for s in scored)


def test_verify_accepts_the_earlier_task_results_of_a_failed_trial_and_nothing_else(
    faulted: Path, tmp_path: Path
) -> None:
    """Files written before 0.6.0 filled a failed trial's verdict columns: verify accepts exactly those values."""
    path = runs.copy_run(faulted, tmp_path)
    directory = RunDirectory(path)
    records = directory.read_episodes()
    earlier = sorted(records, key=lambda r: r.run_id)
    text = render_task_results(earlier).splitlines(keepends=True)
    header, body = text[0], text[1:]
    columns = header.strip().split(",")
    old_rows = [task_result_row(r, verdict_of_failed=True) for r in earlier]
    rendered = header + "".join(",".join(row[c] for c in columns) + "\n" for row in old_rows)
    assert rendered != "".join(text) and len(body) == len(old_rows)
    (path / TASK_RESULTS).write_text(rendered)
    assert directory.reseal_files()
    result = verify_run(path)
    assert result.ok, result.divergences
    failed = next(r for r in old_rows if r["failed"] == "true")
    wrong = rendered.replace(
        ",".join(failed[c] for c in columns),
        ",".join(
            ("false" if failed[c] == "true" else "true") if c == "no_stale_action" else failed[c] for c in columns
        ),
        1,
    )
    (path / TASK_RESULTS).write_text(wrong)
    assert directory.reseal_files()
    fields = [d.field for d in verify_run(path).divergences]
    assert f"{TASK_RESULTS} no_stale_action" in fields, fields


def test_compare_counts_failed_pairs_and_has_a_sensitivity_row_without_them(faulted: Path) -> None:
    """The faulted run against the same deterministic policy without faults: the failed trials alone make the
    success difference; without their pairs it is exactly 0."""
    clean = runs.trusting_run()
    a, b = RunDirectory(faulted), RunDirectory(clean)
    report = compare_runs(a.read_manifest(), a.read_episodes(), b.read_manifest(), b.read_episodes())
    failed = {
        (r["strategy"], r["protection_mode"], r["task_id"], r["repeat"]) for r in rows(faulted) if r["failed"] == "true"
    }
    assert any(note.startswith(f"failed trials: {len(failed)} in a, 0 in b") for note in report.notes), report.notes
    success = next(f for f in report.families if f.metric == "success")
    counted = 0
    for row in success.comparisons:
        mine = sum(1 for key in failed if key[:2] == (row.condition.strategy, row.condition.protection_mode))
        assert row.failed_pairs == mine
        counted += mine
        if mine:
            assert row.sensitivity is not None and row.sensitivity.difference.estimate == 0.0
            assert row.comparison.difference.estimate is not None and row.comparison.difference.estimate <= 0
        else:
            assert row.sensitivity is None
    assert counted == len(failed) > 0
    headers, cells = comparison_table(success)
    assert headers[-1] == "failed-trial pairs; without them: difference, p (Holm, m of their own family)"
    for cell, r in zip(cells, success.comparisons, strict=True):
        if r.sensitivity is not None and r.sensitivity.test.testable:
            assert cell[-1].endswith(f"(m={r.sensitivity.test.family_size})")
    assert any(
        cell[-1].startswith(f"{r.failed_pairs}; +0.0") or cell[-1].startswith(f"{r.failed_pairs}; 0")
        for cell, r in zip(cells, success.comparisons, strict=True)
        if r.failed_pairs
    )


def test_compare_notes_every_setting_that_changes_what_an_episode_is() -> None:
    directory = RunDirectory(runs.oracle_pair_run())
    manifest, records = directory.read_manifest(), directory.read_episodes()
    same = compare_runs(manifest, records, manifest, records)
    assert same.notes[0] == "a and b are the same run: every difference is 0 by construction"
    other = manifest.model_copy(
        update={"run_group_id": "other", "max_steps": 4, "repeats": 1, "seed": manifest.seed + 1}
    )
    notes = compare_runs(manifest, records, other, records).notes
    assert "step limit differs (each task's own vs 4)" in notes
    assert "repeats differ (2 vs 1): task means average different numbers of repeats" in notes
    assert any(n.startswith(f"run seeds differ ({manifest.seed} vs {manifest.seed + 1}") for n in notes), notes
    assert not any("same run" in n for n in notes)


def tokens(row: Row) -> int:
    return int(row["agent_prompt_tokens"]) + int(row["agent_completion_tokens"])


def test_token_reduction_leaves_out_the_pairs_with_a_failed_trial(faulted: Path) -> None:
    """A failed trial stops early: its few tokens would pass for a saving of the strategy."""
    found = rows(faulted)
    failed_keys = {(r["task_id"], r["repeat"], r["protection_mode"]) for r in found if r["failed"] == "true"}
    for reduction in metrics(faulted).token_reduction:
        mode = reduction.condition.protection_mode
        mine = {
            (r["task_id"], r["repeat"]): r
            for r in found
            if (r["strategy"], r["protection_mode"]) == (reduction.condition.strategy, mode)
        }
        base = {
            (r["task_id"], r["repeat"]): r
            for r in found
            if (r["strategy"], r["protection_mode"]) == ("full_history", mode)
        }
        kept = [k for k in mine if k in base and (*k, mode) not in failed_keys]
        expected = 1 - sum(tokens(mine[k]) for k in kept) / sum(tokens(base[k]) for k in kept)
        assert reduction.agent_tokens.estimate == pytest.approx(expected)
        assert reduction.agent_tokens.n_episodes == len(kept)
    assert failed_keys


def test_a_power_plan_from_a_pilot_with_failed_trials_and_few_tasks_says_so(faulted: Path) -> None:
    directory = RunDirectory(faulted)
    plan = plan_run(directory.read_manifest(), directory.read_episodes(), 0.3, repeats=[2], max_tasks=64)
    failed = sum(1 for r in rows(faulted) if r["failed"] == "true")
    assert any(note.startswith(f"the pilot has {failed} failed trials") for note in plan.notes), plan.notes
    assert any(note.startswith("the pilot has 3 tasks") for note in plan.notes), plan.notes


def test_the_report_says_how_failed_trials_enter_the_flip_rate(faulted: Path) -> None:
    text = " ".join((faulted / BENCHMARK_REPORT).read_text().split())
    assert "Failed trials count as failures in the flip rate of success" in text
    clean = " ".join((runs.trusting_run() / BENCHMARK_REPORT).read_text().split())
    assert "Failed trials count as failures in the flip rate" not in clean


def test_replay_and_attribute_give_a_failed_trial_no_grader_findings(faulted: Path) -> None:
    from contextdelta.attribution import attribute_run
    from contextdelta.replay import render_episode

    records = RunDirectory(faulted).read_episodes()
    failed = [r for r in records if r.failed]
    assert failed
    for attribution in attribute_run([r for r in records if r.failed]):
        assert attribution.failed_trial and attribution.failed_graders == []
    text = render_episode(failed[0]).plain
    assert "failed trial: no verdict" in text and "why: " not in text


def test_a_difference_that_rounds_to_zero_prints_as_plus_zero() -> None:
    from contextdelta.report._format import pp
    from contextdelta.stats import Estimate, EstimateStatus

    tiny = Estimate(
        estimate=-0.001, low=-0.2, high=-0.0004, confidence=0.95, n_tasks=3, n_episodes=6, status=EstimateStatus.OK
    )
    assert pp(tiny, 0) == "+0 [-20, +0] pp"
