"""The dashboard's data layer and episode timeline, on real run directories from the scripted server."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

import pytest

from contextdelta.attribution import attribute_run
from contextdelta.canonical import canonical_json
from contextdelta.dashboard import launch
from contextdelta.dashboard.data import (
    ATLAS_FILTERS,
    EPISODE_FILTERS,
    MALFORMED,
    NO_FAILURE,
    OUTCOMES,
    RowFilter,
    RunLoadError,
    attempt_rows,
    default_episode,
    episode_search_fields,
    failure_mode_counts,
    filter_from_query,
    filter_options,
    filter_query,
    filter_rows,
    list_runs,
    load_comparison,
    load_episode,
    load_run,
    results_dir_problem,
    run_signature,
    runs_rows,
    search_episodes,
    search_terms,
)
from contextdelta.dashboard.timeline import episode_timeline
from contextdelta.report import metrics_json
from contextdelta.rundir.layout import AGGREGATE_METRICS, MANIFEST, RAW_RUNS
from contextdelta.rundir.records import EpisodeRecord
from tests.dashboard.conftest import make_malformed, make_running
from tests.report import runs


@pytest.fixture(scope="module")
def trusting_records(trusting_run: Path) -> dict[str, EpisodeRecord]:
    return runs.records(trusting_run)


@pytest.fixture(scope="module")
def unsafe_records(unsafe_run: Path) -> dict[str, EpisodeRecord]:
    return runs.records(unsafe_run)


# ---- the results folder ---------------------------------------------------------------------------------------


def test_results_dir_problem_names_missing_empty_and_non_folder(tmp_path: Path, results: Path) -> None:
    assert "does not exist" in (results_dir_problem(tmp_path / "nope") or "")
    assert "No run directories" in (results_dir_problem(tmp_path) or "")
    (tmp_path / "notes.txt").write_text("x")
    assert "not a folder" in (results_dir_problem(tmp_path / "notes.txt") or "")
    assert results_dir_problem(results) is None


def test_list_runs_reads_each_manifest_newest_first_and_flags_broken_ones(
    tmp_path: Path, trusting_run: Path, unsafe_run: Path, trusting_records: dict[str, EpisodeRecord]
) -> None:
    runs.copy_run(trusting_run, tmp_path)
    runs.copy_run(unsafe_run, tmp_path)
    (tmp_path / "no-manifest").mkdir()
    (tmp_path / "bad-json").mkdir()
    (tmp_path / "bad-json" / "run_manifest.json").write_text("{not json")
    (tmp_path / ".hidden").mkdir()
    summaries = list_runs(tmp_path)
    by_id = {s.run_group_id: s for s in summaries}
    assert set(by_id) == {trusting_run.name, unsafe_run.name, "no-manifest", "bad-json"}
    readable = [s for s in summaries if s.readable]
    assert [s.run_group_id for s in readable] == sorted((trusting_run.name, unsafe_run.name), reverse=True)
    trusting = by_id[trusting_run.name]
    assert trusting.status == "complete" and trusting.model == "scripted-context_trusting"
    assert trusting.finished == trusting.planned == len(trusting_records) == 48
    succeeded = sum(r.success and not r.failed for r in trusting_records.values())
    assert trusting.succeeded == succeeded and trusting.success_rate == pytest.approx(succeeded / 48)
    manifest = json.loads((trusting_run / "run_manifest.json").read_text())
    assert trusting.suite_sha256 == manifest["hashes"]["suite_sha256"]
    for name in ("no-manifest", "bad-json"):
        assert by_id[name].status == MALFORMED and not by_id[name].readable
    assert "missing" in (by_id["no-manifest"].error or "")
    assert "run_manifest.json" in (by_id["bad-json"].error or "")
    rows = runs_rows(summaries)
    assert [r["run group"] for r in rows] == [s.run_group_id for s in readable]
    row = next(r for r in rows if r["run group"] == trusting_run.name)
    assert row["episodes"] == "48 / 48" and row["suite hash"] == manifest["hashes"]["suite_sha256"][:12]
    assert row["success"] == round(100 * succeeded / 48, 1)


def test_a_running_run_counts_complete_lines_and_leaves_success_unknown(tmp_path: Path, unsafe_run: Path) -> None:
    make_running(unsafe_run, tmp_path, keep=5)
    (summary,) = list_runs(tmp_path)
    assert summary.status == "running" and summary.in_progress
    assert summary.finished == 5 and summary.planned == 24
    assert summary.succeeded is None and summary.success_rate is None


def test_run_signature_changes_when_an_episode_is_appended(tmp_path: Path, unsafe_run: Path) -> None:
    target = runs.copy_run(unsafe_run, tmp_path)
    before = run_signature(target)
    assert before == run_signature(target)
    with (target / RAW_RUNS).open("a") as handle:
        handle.write("\n")
    assert run_signature(target) != before


# ---- loading a run ------------------------------------------------------------------------------------------------


def test_load_run_uses_the_recorded_metrics_and_attributes_every_failure(
    trusting_run: Path, trusting_records: dict[str, EpisodeRecord]
) -> None:
    data = load_run(trusting_run)
    assert data.metrics_source == AGGREGATE_METRICS and not data.in_progress
    recorded = json.loads((trusting_run / AGGREGATE_METRICS).read_text())
    assert metrics_json(data.metrics) == recorded  # the document as written (absent sections left out)
    expected = attribute_run(sorted(trusting_records.values(), key=lambda r: r.run_id))
    assert [(f.run_id, f.failure_mode) for f in data.failures] == [(a.run_id, a.mode.value) for a in expected]
    assert len(data.episodes) == 48
    for failure in data.failures:
        record = trusting_records[failure.run_id]
        assert (failure.world, failure.task_id, failure.hazard) == (record.world, record.task_id, record.hazard)
        assert (failure.strategy, failure.protection_mode) == (record.strategy, record.protection_mode)
    never = [f for f in data.failures if f.failure_mode == "never_refreshed"]
    assert never and all(f.mutation and f.action for f in never)


def test_load_run_recomputes_the_metrics_of_a_run_in_progress(tmp_path: Path, unsafe_run: Path) -> None:
    data = load_run(make_running(unsafe_run, tmp_path, keep=7))
    assert data.in_progress and data.metrics_source.startswith("recomputed")
    assert len(data.episodes) == 7 and data.metrics.episodes.finished == 7
    assert sum(c.episodes for c in data.metrics.conditions) == 7


def test_a_complete_run_edited_to_say_running_is_named_as_changed(tmp_path: Path, unsafe_run: Path) -> None:
    """Editing the status (complete -> running) must not switch the seal check off and pass edited episodes as a
    run in progress."""
    target = runs.copy_run(unsafe_run, tmp_path)
    manifest = json.loads((target / MANIFEST).read_text())
    manifest["status"] = "running"
    (target / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    data = load_run(target)
    assert any("run_manifest.json status: edited after the run" in line for line in data.changed), data.changed


def test_load_run_recomputes_when_the_recorded_metrics_are_unreadable(tmp_path: Path, unsafe_run: Path) -> None:
    target = runs.copy_run(unsafe_run, tmp_path)
    (target / AGGREGATE_METRICS).write_text("{}")
    data = load_run(target)
    assert data.metrics_source.startswith("recomputed")
    recorded = json.loads((unsafe_run / AGGREGATE_METRICS).read_text())
    assert metrics_json(data.metrics)["conditions"] == recorded["conditions"]  # as the report writes it


def test_load_run_names_the_malformed_line(tmp_path: Path, unsafe_run: Path) -> None:
    target = make_malformed(unsafe_run, tmp_path, "broken-run")
    with pytest.raises(RunLoadError, match=r"raw_runs\.jsonl: line 2"):
        load_run(target)
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunLoadError, match=r"run_manifest\.json: missing"):
        load_run(tmp_path / "empty")


@pytest.mark.slow
def test_load_episode_validates_one_line(unsafe_run: Path, unsafe_records: dict[str, EpisodeRecord]) -> None:
    run_id = sorted(unsafe_records)[5]
    assert load_episode(unsafe_run, run_id) == unsafe_records[run_id]
    with pytest.raises(RunLoadError, match="no episode 'nope'"):
        load_episode(unsafe_run, "nope")


def test_default_episode_prefers_a_failure_with_a_hidden_mutation(trusting_run: Path) -> None:
    data = load_run(trusting_run)
    first = default_episode(data.episodes)
    assert first is not None and not first.success and first.hidden_mutations > 0
    assert default_episode(()) is None


# ---- the atlas and episode filters ----------------------------------------------------------------------------


def test_filters_narrow_the_atlas_to_the_matching_failures(
    unsafe_run: Path, unsafe_records: dict[str, EpisodeRecord]
) -> None:
    failures = load_run(unsafe_run).failures
    assert filter_rows(failures, RowFilter()) == list(failures)
    modes = {a.run_id: a.mode.value for a in attribute_run(list(unsafe_records.values()))}
    for f in ATLAS_FILTERS:
        for value in filter_options(failures)[f.param]:
            shown = filter_rows(failures, RowFilter({f.param: (value,)}))
            expected = sorted(
                run_id
                for run_id, mode in modes.items()
                if (mode if f.param == "mode" else str(getattr(unsafe_records[run_id], f.attribute))) == value
            )
            assert [r.run_id for r in shown] == expected, (f.param, value)
    both = filter_rows(failures, RowFilter({"mode": ("unauthorized_write",), "protection": ("unprotected",)}))
    assert both and all(r.failure_mode == "unauthorized_write" and r.protection_mode == "unprotected" for r in both)
    two_modes = filter_rows(failures, RowFilter({"mode": ("unauthorized_write", "ignored_visible_change")}))
    assert len(two_modes) == sum(m in ("unauthorized_write", "ignored_visible_change") for m in modes.values())


def test_filter_options_order_modes_as_the_atlas_does(unsafe_run: Path) -> None:
    options = filter_options(load_run(unsafe_run).failures)
    assert options["mode"] == [
        "unauthorized_write",
        "context_dropped_fresh_observation",
        "context_dropped_own_write",
        "ignored_visible_change",
    ]
    assert options["protection"] == ["freshness_contract", "unprotected"]
    assert options["world"] == ["calendar", "order"]


def test_query_parameters_round_trip_and_unknown_values_are_reported() -> None:
    options = {"mode": ["never_refreshed", "end_state_miss"], "world": ["order", "config"], "task": ["a", "b"]}
    parsed, ignored = filter_from_query(
        {"mode": ["never_refreshed", "bogus"], "world": "order,config", "task": "", "run": "x"}, options
    )
    assert parsed == RowFilter({"mode": ("never_refreshed",), "world": ("order", "config")})
    assert ignored == ["mode=bogus"]
    assert filter_query(parsed) == {"mode": ["never_refreshed"], "world": ["order", "config"]}
    assert filter_from_query(filter_query(parsed), options) == (parsed, [])
    assert not RowFilter({"mode": ()}).active and parsed.active


def test_failure_mode_counts_add_up(trusting_run: Path) -> None:
    failures = load_run(trusting_run).failures
    table = failure_mode_counts(failures)
    assert {row["failure mode"]: row["total"] for row in table} == Counter(f.failure_mode for f in failures)
    for row in table:
        assert sum(v for k, v in row.items() if k not in ("failure mode", "total")) == row["total"]


def test_every_episode_is_filterable_by_each_episode_filter(
    trusting_run: Path, trusting_records: dict[str, EpisodeRecord]
) -> None:
    data = load_run(trusting_run)
    episodes = data.episodes
    assert [e.run_id for e in episodes] == sorted(trusting_records)  # successes too, not only the failures
    modes = {a.run_id: a.mode.value for a in attribute_run(list(trusting_records.values()))}

    def expected_value(param: str, record: EpisodeRecord) -> str:
        if param == "outcome":
            return "failed trial" if record.failed else ("success" if record.success else "fail")
        if param == "mode":
            return modes.get(record.run_id, NO_FAILURE)
        attribute = {"protection": "protection_mode", "task": "task_id"}.get(param, param)
        return str(getattr(record, attribute))

    options = filter_options(episodes, EPISODE_FILTERS)
    assert options["outcome"] == [
        o for o in OUTCOMES if o in {expected_value("outcome", r) for r in trusting_records.values()}
    ]
    assert options["mode"][-1] == NO_FAILURE and "never_refreshed" in options["mode"]
    for f in EPISODE_FILTERS:
        assert options[f.param], f.param
        for value in options[f.param]:
            shown = filter_rows(episodes, RowFilter({f.param: (value,)}, EPISODE_FILTERS))
            wanted = sorted(r for r, record in trusting_records.items() if expected_value(f.param, record) == value)
            assert [e.run_id for e in shown] == wanted, (f.param, value)
    successes = filter_rows(episodes, RowFilter({"outcome": ("success",)}, EPISODE_FILTERS))
    assert successes and all(e.success and e.failure_mode is None for e in successes)
    both = RowFilter({"outcome": ("fail",), "strategy": ("last_n",), "protection": ("unprotected",)}, EPISODE_FILTERS)
    assert [e.run_id for e in filter_rows(episodes, both)] == sorted(
        r.run_id
        for r in trusting_records.values()
        if not r.success and (r.strategy, r.protection_mode) == ("last_n", "unprotected")
    )
    parsed, ignored = filter_from_query({"outcome": "fail,success", "mode": "nope"}, options, EPISODE_FILTERS)
    assert parsed == RowFilter({"outcome": ("fail", "success")}, EPISODE_FILTERS) and ignored == ["mode=nope"]
    assert filter_query(parsed) == {"outcome": ["fail", "success"]}


def test_episode_rows_carry_outcome_and_failure_mode(trusting_run: Path) -> None:
    for e in load_run(trusting_run).episodes:
        row = e.row()
        assert row["episode"] == e.run_id and row["outcome"] == e.outcome
        assert row["failure mode"] == (e.failure_mode or "")
        assert (row["task"], row["strategy"], row["protection mode"], row["repeat"]) == (
            e.task_id,
            e.strategy,
            e.protection_mode,
            e.repeat,
        )


# ---- text search ------------------------------------------------------------------------------------------------


def test_search_terms_are_words_or_quoted_phrases_case_folded() -> None:
    assert search_terms('Refund  "B-2210 if"  refund') == ["refund", "b-2210 if"]
    assert search_terms('an "unbalanced quote') == ["an", '"unbalanced', "quote"]
    assert search_terms("   ") == []


def test_search_fields_cover_the_instruction_replies_calls_results_and_strategy_text(
    unsafe_records: dict[str, EpisodeRecord],
) -> None:
    record = unsafe_records["cal-onsite-loop.typed_state_digest.unprotected.r1"]
    fields = episode_search_fields(record)
    where = [f.where for f in fields]
    assert where[0] == "instruction" and fields[0].text == record.trace.initial_messages[1]["content"]
    assert not any(f.text == record.trace.initial_messages[0]["content"] for f in fields)  # the system prompt
    calls = [
        (s.step, c, e) for s in record.trace.steps for c, e in zip(s.tool_calls, s.evaluator.tool_events, strict=True)
    ]
    assert calls
    for step, call, event in calls:
        assert f"step {step} call #{event.seq} {call.name}" in where
        result = next(f for f in fields if f.where == f"step {step} result of #{event.seq} {call.name}")
        assert result.text == call.result
    written = [f for f in fields if f.where.endswith("written by the strategy")]
    inserted = [s.messages[i]["content"] for s in record.trace.steps for i in s.context.inserted]
    assert written and [f.text for f in written] == inserted
    assert all(f.folded == f.text.casefold() for f in fields)


def test_search_finds_every_episode_that_holds_all_terms_and_nothing_else(
    trusting_run: Path, trusting_records: dict[str, EpisodeRecord]
) -> None:
    index = load_run(trusting_run).search
    assert set(index) == set(trusting_records)

    def holding(*terms: str) -> list[str]:
        return sorted(
            run_id
            for run_id, fields in index.items()
            if all(any(t.casefold() in f.text.casefold() for f in fields) for t in terms)
        )

    # a phrase of one task's instruction: exactly that task's episodes
    hits = search_episodes(index, '"Sonnenallee 114"')
    assert sorted(hits) == sorted(r for r, rec in trusting_records.items() if rec.task_id == "order-desk-cancel")
    assert {h.where for h in hits.values()} == {"instruction"}
    assert all("Sonnenallee 114" in h.snippet for h in hits.values())  # original case kept
    # a tool name: the episodes that called it (case does not matter)
    called = sorted(
        r
        for r, rec in trusting_records.items()
        if any(c.name == "issue_refund" for s in rec.trace.steps for c in s.tool_calls)
    )
    assert called and sorted(search_episodes(index, "ISSUE_REFUND")) == called
    # every term must occur, each anywhere in the episode
    assert sorted(search_episodes(index, "grinder A-1017")) == holding("grinder", "A-1017") != []
    assert search_episodes(index, "grinder Sonnenallee") == {}
    # a quoted phrase matches only contiguous text
    assert search_episodes(index, '"Sonnenallee Weber"') == {}
    # restricted to given episodes, in their order
    some = list(reversed(called))[:2]
    assert list(search_episodes(index, "issue_refund", some)) == some
    assert search_episodes(index, "") == {}
    hit = search_episodes(index, "issue_refund")[called[0]]
    assert hit.fields >= 1 and "issue_refund" in hit.snippet.casefold()


# ---- two run groups ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_load_comparison_is_compare_runs_on_both_directories(trusting_run: Path, unsafe_run: Path) -> None:
    from contextdelta.report import NotComparable, compare_runs
    from contextdelta.rundir.layout import RunDirectory

    pair = runs.oracle_pair_run()
    got = load_comparison(trusting_run, pair)
    a, b = RunDirectory(trusting_run), RunDirectory(pair)
    assert got == compare_runs(a.read_manifest(), a.read_episodes(), b.read_manifest(), b.read_episodes())
    assert [k.label for k in got.shared_conditions] == ["full_history / unprotected", "last_n / unprotected"]
    with pytest.raises(NotComparable) as refused:
        load_comparison(trusting_run, unsafe_run)
    assert any(reason.startswith("task set differs") for reason in refused.value.reasons)


def test_load_comparison_names_a_malformed_directory(tmp_path: Path, unsafe_run: Path) -> None:
    broken = make_malformed(unsafe_run, tmp_path, "broken-run")
    with pytest.raises(RunLoadError, match=r"raw_runs\.jsonl: line 2"):
        load_comparison(unsafe_run, broken)


# ---- the episode timeline -------------------------------------------------------------------------------------


def test_timeline_puts_each_hidden_mutation_right_after_the_call_that_triggered_it(
    trusting_records: dict[str, EpisodeRecord],
) -> None:
    record = trusting_records["order-desk-cancel.last_n.unprotected.r2"]
    (mutation,) = record.trace.mutation_events()
    timeline = episode_timeline(record)
    for step in timeline.steps:
        ids = [m.mutation_id for m in step.mutations]
        assert ids == ([mutation.mutation_id] if step.step == mutation.step else [])
    step = timeline.steps[mutation.step - 1]
    kinds = [(i.kind, i.call.seq if i.call else i.mutation.after_seq if i.mutation else None) for i in step.items]
    position = kinds.index(("mutation", mutation.after_seq))
    assert kinds[position - 1] == ("call", mutation.after_seq)
    view = step.mutations[0]
    before, after = mutation.versions_before, mutation.versions_after
    assert view.changes == tuple((r, before[r], after[r]) for r in mutation.resources)
    assert mutation.mutation_id in view.text and "after call #" in view.text


def test_timeline_moves_before_step_mutations_to_the_top_of_their_step(
    trusting_records: dict[str, EpisodeRecord],
) -> None:
    record = trusting_records["order-desk-cancel.last_n.unprotected.r2"]
    (mutation,) = record.trace.mutation_events()
    steps = [s.model_copy(deep=True) for s in record.trace.steps]
    moved = mutation.model_copy(update={"after_seq": None, "trigger": "before_step", "step": mutation.step + 1})
    steps[mutation.step - 1].evaluator.mutations_after_calls = []
    steps[mutation.step].evaluator.mutations_before_step = [moved]
    edited = record.model_copy(update={"trace": record.trace.model_copy(update={"steps": steps})})
    timeline = episode_timeline(edited)
    step = timeline.steps[mutation.step]
    assert [m.mutation_id for m in step.mutations_before] == [mutation.mutation_id]
    assert step.mutations_before[0].where == f"before step {mutation.step + 1}"
    assert not any(i.kind == "mutation" for s in timeline.steps for i in s.items)


def test_timeline_marks_removed_history_and_inserted_messages(unsafe_records: dict[str, EpisodeRecord]) -> None:
    for record in unsafe_records.values():
        timeline = episode_timeline(record)
        for raw, step in zip(record.trace.steps, timeline.steps, strict=True):
            removed = set(raw.context.removed)
            assert len(step.history) == raw.context.canonical_message_count
            assert {m.index for m in step.history if m.status == "removed"} == removed
            assert {m.index for m in step.history if m.status == "pinned"} == {0, 1}
            assert len(step.sent) == len(raw.messages)
            assert {m.index for m in step.sent if m.status == "inserted"} == set(raw.context.inserted)
            kept = [m.history_index for m in step.sent if m.status != "inserted"]
            assert kept == [i for i in range(raw.context.canonical_message_count) if i not in removed]
    digest = episode_timeline(unsafe_records["cal-onsite-loop.typed_state_digest.unprotected.r1"])
    assert any(m.status == "inserted" for s in digest.steps for m in s.sent)


def test_timeline_shows_observed_versus_current_version_at_each_write(
    trusting_records: dict[str, EpisodeRecord],
) -> None:
    record = trusting_records["cfg-rate-limit-double.full_history.unprotected.r1"]
    attribution = next(a for a in attribute_run([record]))
    timeline = episode_timeline(record, attribution)
    events = {e.seq: e for e in record.trace.tool_events()}
    stale = {f.seq for f in record.verdict.event_flags if f.stale}
    assert stale
    writes = [c for s in timeline.steps for c in s.calls if c.is_write]
    assert writes
    for call in writes:
        event = events[call.seq]
        assert call.observed_version == event.observed_version
        assert call.version_at_execution == event.version_at_execution
        assert ("stale" in call.flags) == (call.seq in stale)
        if call.seq in stale:
            assert call.behind
    assert attribution.action is not None
    assert [s.step for s in timeline.steps if s.decisive] == [attribution.action.step]
    assert not timeline.success and ("no_stale_action", False) in timeline.graders


# ---- the launcher ---------------------------------------------------------------------------------------------


def test_streamlit_command_keeps_streamlit_local_and_quiet(tmp_path: Path) -> None:
    command = launch.streamlit_command(tmp_path / "results", host="127.0.0.1", port=8600)
    assert command[:5] == [sys.executable, "-m", "contextdelta.dashboard", "run", str(launch.APP_SCRIPT)]
    options = dict(zip(command[5:-3:2], command[6:-3:2], strict=True))
    assert options == {
        "--server.address": "127.0.0.1",
        "--server.port": "8600",
        "--server.headless": "true",
        "--browser.gatherUsageStats": "false",
        "--client.showErrorLinks": "false",
        "--global.developmentMode": "false",
        "--server.fileWatcherType": "none",
        "--server.runOnSave": "false",
        "--client.toolbarMode": "viewer",
    }
    assert command[-3:] == ["--", "--results-dir", str((tmp_path / "results").resolve())]
    migrated = launch.streamlit_command(tmp_path / "results", host="127.0.0.1", port=8600, store_migrated=True)
    assert migrated == [*command, "--store-migrated"]
    assert launch.store_migrated([str(launch.APP_SCRIPT), *migrated[migrated.index("--") + 1 :]])
    assert not launch.store_migrated([str(launch.APP_SCRIPT), *command[-2:]])
    assert not launch.store_migrated(["pytest", "--store-migrated"])  # someone else's argv
    assert launch.command_results_dir(migrated[4:]) == (tmp_path / "results").resolve()
    assert launch.command_results_dir(["run", "app.py"]) is None
    env = launch.streamlit_env({"PATH": "/bin"}, database_url="sqlite:///x.db")
    assert env == {
        "PATH": "/bin",
        "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
        "CONTEXTDELTA_DATABASE_URL": "sqlite:///x.db",
    }


def test_the_app_reads_its_results_dir_from_its_arguments_then_the_environment(tmp_path: Path) -> None:
    app = str(launch.APP_SCRIPT)
    assert launch.resolve_results_dir([app, "--results-dir", str(tmp_path)], {}) == tmp_path
    assert launch.resolve_results_dir([app], {"CONTEXTDELTA_RESULTS_DIR": "/data/r"}) == Path("/data/r")
    # someone else's argv (pytest, AppTest) is not the app's
    assert launch.script_results_dir(["pytest", "--results-dir", "/x"]) is None
    assert launch.resolve_results_dir(["pytest", "--results-dir", "/x"], {"CONTEXTDELTA_RESULTS_DIR": "/y"}) == Path(
        "/y"
    )
    assert launch.resolve_results_dir(["pytest"], {}) == Path(os.environ["CONTEXTDELTA_RESULTS_DIR"])


def test_a_run_changed_after_its_run_is_flagged_and_its_numbers_recomputed(trusting_run: Path, tmp_path: Path) -> None:
    """An edited aggregate_metrics.json is never shown: the seal names the change, and the numbers come from the
    episodes (as `report` and `verify` do)."""
    assert load_run(trusting_run).changed == ()
    path = runs.copy_run(trusting_run, tmp_path)
    data = json.loads((path / AGGREGATE_METRICS).read_text())
    truth = data["conditions"][0]["rates"]["success"]["estimate"]
    data["conditions"][0]["rates"]["success"]["estimate"] = 0.99
    (path / AGGREGATE_METRICS).write_text(json.dumps(data))
    loaded = load_run(path)
    assert loaded.changed and AGGREGATE_METRICS in loaded.changed[0]
    assert loaded.metrics.conditions[0].rates["success"].estimate == truth != 0.99
    assert loaded.metrics_source.startswith("recomputed from")


def test_a_complete_run_that_lost_episodes_says_how_many_it_holds(tmp_path: Path) -> None:
    """A complete run whose raw_runs.jsonl lost its second half showed its figures with no word that half its
    episodes are gone (the export says so in an error log); the notice now names the count and `verify`."""
    from contextdelta.dashboard.data import load_run, partial_notice

    path = runs.copy_run(runs.oracle_pair_run(), tmp_path)
    raw = path / "raw_runs.jsonl"
    lines = raw.read_text().splitlines(keepends=True)
    raw.write_text("".join(lines[: len(lines) // 2]))
    data = load_run(path)
    assert data.partial is not None
    assert "is complete, but its directory holds 6 of the 12 episodes its run finished" in data.partial
    assert f"`contextdelta verify {path.name}`" in data.partial
    assert partial_notice(load_run(runs.oracle_pair_run()).manifest, 12, "x") is None


def test_a_killed_run_edited_since_is_loaded_as_changed_and_an_unedited_one_is_not(
    trusting_run: Path, tmp_path: Path
) -> None:
    """Only a complete run's seal was checked: a killed run whose recorded verdict was flipped showed the edited
    numbers as they stood. Now it is marked changed (the dashboard names the edit); a killed run left as the kill
    left it is not."""
    path = make_running(trusting_run, tmp_path, keep=3)
    assert load_run(path).changed == ()
    raw = path / RAW_RUNS
    lines = raw.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[0])
    record["verdict"]["success"] = not record["verdict"]["success"]
    raw.write_bytes(canonical_json(record).encode() + b"\n" + b"".join(lines[1:]))
    changed = load_run(path).changed
    assert any("verdict.success" in line for line in changed), changed


@pytest.mark.slow
def test_the_atlas_counts_control_failures_apart_from_the_report_conditions() -> None:
    """A control episode (``--controls no_mutation``) has its main condition's strategy and mode; its failure is
    counted in a column of its own, so each main condition's column is the report's count."""
    run = load_run(runs.unsafe_controls_run())
    controls = [f for f in run.failures if f.control]
    assert controls and all(f.condition.endswith("(no_mutation control)") for f in controls)
    assert all(f.row()["control"] == "no_mutation" for f in controls)
    counts = failure_mode_counts(run.failures)
    for c in run.metrics.conditions:
        recorded = {mode: n for mode, n in c.failure_modes.items() if n}
        shown = {line["failure mode"]: line[c.condition.label] for line in counts if line[c.condition.label]}
        assert shown == recorded, c.condition.label
    assert sum(line["total"] for line in counts) == len(run.failures)


@pytest.mark.slow
def test_the_runs_table_says_which_runs_are_a_shard_or_merged(tmp_path: Path) -> None:
    """A shard's status is complete and its counts are the shard's (3 / 3 of a 6-episode plan): the row says it
    holds shard 1/2; a whole run says nothing."""
    shard = runs.copy_run(runs.shard_run(), tmp_path)
    whole = runs.copy_run(runs.oracle_pair_run(), tmp_path)
    rows = {r["folder"]: r for r in runs_rows(list_runs(tmp_path))}
    assert rows[shard.name]["part"] == "shard 1/2" and rows[shard.name]["status"] == "complete"
    assert rows[whole.name]["part"] == ""


def test_an_attempts_error_is_shown_with_its_control_characters_escaped(unsafe_run: Path) -> None:
    """A provider's error text goes into the attempts table as written, less its terminal escapes and bidi
    overrides (a table cell is no markdown, but a browser still renders them)."""
    from tests.dashboard.conftest import HOSTILE

    record = next(iter(runs.records(unsafe_run).values()))
    hostile = record.model_copy(update={"trace": record.trace.model_copy(update={"error": HOSTILE})})
    (row,) = [a.row() for a in attempt_rows([hostile])]
    assert not any(c in row["error"] for c in "\x1b\x00\u202e\ud800")
    assert "\\x1b[31mred\\x1b[0m" in row["error"] and "\\u202eevil" in row["error"]
