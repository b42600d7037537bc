"""Every dashboard page under ``streamlit.testing.v1.AppTest`` on run directories from the scripted server: pages
render without exception, atlas and episode filters and the text search narrow the rows and live in the query
string, a query string restores a view, the Conditions page shows the report's numbers, the Compare page the
numbers of ``contextdelta compare`` (and its NOT COMPARABLE verdict), the episode page shows a hidden mutation at
its step, and empty, malformed and unfinished results show a message instead of a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from contextdelta.dashboard import launch
from contextdelta.dashboard.data import load_comparison, load_run, search_episodes
from contextdelta.dashboard.tables import baseline_difference_points, compare_tables, rate_points, uncharted
from contextdelta.rundir.layout import RunDirectory
from contextdelta.store import create_store_engine, current_revision, head_revision
from tests.dashboard.conftest import make_malformed, make_running
from tests.report import runs

PAGES = (
    "views/runs.py",
    "views/conditions.py",
    "views/atlas.py",
    "views/episode.py",
    "views/episodes.py",
    "views/compare.py",
)
RUN_PAGES = PAGES[:5]
"""The pages about one run (the sidebar's run picker); Compare picks two."""
TIMEOUT = 60


def open_page(
    results: Path, monkeypatch: pytest.MonkeyPatch, page: str, query: dict[str, str | list[str]] | None = None
) -> AppTest:
    """Run the app on ``results``, then switch to ``page`` with ``query`` as its query string."""
    monkeypatch.setenv("CONTEXTDELTA_RESULTS_DIR", str(results))
    app = AppTest.from_file(str(launch.APP_SCRIPT), default_timeout=TIMEOUT)
    app.run()
    app.query_params = dict(query or {})
    if page != PAGES[0]:
        app.switch_page(page)
    return app.run()


def no_exception(app: AppTest) -> None:
    assert not app.exception, [e.value for e in app.exception]


def html_text(block: object) -> str:
    return "".join(h.proto.body for h in block.html)  # type: ignore[attr-defined]


@pytest.mark.slow
@pytest.mark.parametrize("page", RUN_PAGES)
def test_every_page_renders_each_run(
    page: str, results: Path, trusting_run: Path, unsafe_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for run in (trusting_run, unsafe_run):
        app = open_page(results, monkeypatch, page, {"run": run.name})
        no_exception(app)
        assert not [e.value for e in app.error if "Failure mode" not in e.value]  # only a failure's cause chain
        assert app.query_params["run"] == run.name
        assert app.selectbox(key="cd_run").value == run.name
        assert any(run.name in c.value for c in app.sidebar.caption)


def test_runs_page_lists_every_run_group(
    results: Path, trusting_run: Path, unsafe_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = open_page(results, monkeypatch, PAGES[0])
    table = app.dataframe[0].value
    assert list(table["run group"]) == sorted((trusting_run.name, unsafe_run.name), reverse=True)
    row = table.set_index("run group").loc[trusting_run.name]
    assert row["model"] == "scripted-context_trusting" and row["status"] == "complete"
    assert row["episodes"] == "48 / 48"
    assert row["open"] == f"conditions?run={trusting_run.name}"
    # the newest run is the default selection
    assert app.query_params["run"] == max(trusting_run.name, unsafe_run.name)


@pytest.mark.slow
def test_conditions_page_shows_the_charts_matrices_breakdowns_and_comparisons(
    results: Path, trusting_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = open_page(results, monkeypatch, PAGES[1], {"run": trusting_run.name})
    no_exception(app)
    metrics = load_run(trusting_run).metrics
    chart, differences = app.get("vega_lite_chart")
    assert '"errorbar"' in chart.proto.spec and '"low"' in chart.proto.spec and '"high"' in chart.proto.spec
    assert '"difference"' in differences.proto.spec and '"stale action"' in differences.proto.spec
    for point in baseline_difference_points(metrics):
        assert point["interval"].encode() in differences.proto.SerializeToString()  # the report's, in the tooltips
    tables = {tuple(d.value.columns)[:2]: d.value for d in app.dataframe}
    matrices = [
        d.value for d in app.dataframe if tuple(d.value.columns) == ("strategy", "unprotected", "freshness_contract")
    ]
    per_condition = tables[("condition", "success")]
    comparisons = tables[("question", "comparison")]
    hazards = tables[("hazard", "full_history")]
    assert [t.label for t in app.tabs] == ["success", "stale action", "harmful action"] and len(matrices) == 3
    assert list(matrices[0]["strategy"]) == ["full_history", "last_n", "semantic_summary", "typed_state_digest"]
    assert len(per_condition) == 8 and {"pass^1", "pass^2", "tokens / episode", "cost (USD)"} <= set(
        per_condition.columns
    )
    assert len(comparisons) == sum(len(q.comparisons) for q in metrics.research_questions)
    assert {"discordant tasks", "p (sign-flip)", "p (Holm)", "pairs with a failed trial"} <= set(comparisons.columns)
    assert list(hazards["hazard"]) == sorted({b.value for b in metrics.breakdowns if b.dimension == "hazard"})
    assert list(hazards.columns)[:5] == ["hazard", "full_history", "last_n", "semantic_summary", "typed_state_digest"]
    assert any("aggregate_metrics.json" in c.value for c in app.caption)
    app.radio(key="cd_breakdown_mode").set_value("freshness_contract").run()
    app.radio(key="cd_breakdown_dimension").set_value("world").run()
    worlds = next(d.value for d in app.dataframe if d.value.columns[0] == "world")
    expected = next(b for b in metrics.breakdowns if b.dimension == "world" and b.value == worlds.iloc[0]["world"])
    cell = next(c for c in expected.cells if c.condition.label == "last_n / freshness_contract")
    rate = cell.rates["success"].estimate
    assert rate is not None
    assert worlds.iloc[0]["last_n"].startswith(f"{100 * rate:.{metrics.analysis.rate_decimals}f}%")


def atlas_rows(app: AppTest) -> list[str]:
    return list(app.dataframe[0].value["episode"]) if app.dataframe else []


def linked_episodes(app: AppTest) -> list[str]:
    """The episodes of the first table, read from its timeline links (what a reader clicks)."""
    if not app.dataframe:
        return []
    return [link.rsplit("episode=", 1)[1] for link in app.dataframe[0].value["timeline"]]


@pytest.mark.slow
def test_atlas_filters_narrow_the_rows_and_go_into_the_query_string(
    results: Path, unsafe_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures = load_run(unsafe_run).failures
    app = open_page(results, monkeypatch, PAGES[2], {"run": unsafe_run.name})
    no_exception(app)
    assert atlas_rows(app) == [f.run_id for f in failures]
    app.multiselect(key="cd_atlas_mode").set_value(["unauthorized_write"]).run()
    expected = [f.run_id for f in failures if f.failure_mode == "unauthorized_write"]
    assert expected and atlas_rows(app) == expected
    assert app.query_params == {"run": unsafe_run.name, "mode": "unauthorized_write"}
    app.multiselect(key="cd_atlas_protection").set_value(["unprotected"]).run()
    expected = [r for r in expected if r.endswith(".unprotected.r1")]
    assert expected and atlas_rows(app) == expected
    assert app.query_params == {"run": unsafe_run.name, "mode": "unauthorized_write", "protection": "unprotected"}
    assert any(f"{len(expected)} of {len(failures)} failures" in m.value for m in app.markdown)
    app.multiselect(key="cd_atlas_mode").set_value([]).run()
    app.multiselect(key="cd_atlas_protection").set_value([]).run()
    assert atlas_rows(app) == [f.run_id for f in failures]
    assert app.query_params == {"run": unsafe_run.name}


@pytest.mark.slow
def test_query_parameters_restore_a_filtered_atlas(
    results: Path, unsafe_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures = load_run(unsafe_run).failures
    query: dict[str, str | list[str]] = {
        "run": unsafe_run.name,
        "mode": ["ignored_visible_change", "context_dropped_fresh_observation"],
        "world": "order",
        "strategy": "last_n,semantic_summary",
    }
    app = open_page(results, monkeypatch, PAGES[2], query)
    no_exception(app)
    expected = [
        f.run_id
        for f in failures
        if f.failure_mode in ("ignored_visible_change", "context_dropped_fresh_observation")
        and f.world == "order"
        and f.strategy in ("last_n", "semantic_summary")
    ]
    assert expected and atlas_rows(app) == expected
    assert app.multiselect(key="cd_atlas_mode").value == ["ignored_visible_change", "context_dropped_fresh_observation"]
    assert app.multiselect(key="cd_atlas_world").value == ["order"]
    assert app.multiselect(key="cd_atlas_strategy").value == ["last_n", "semantic_summary"]
    assert app.multiselect(key="cd_atlas_task").value == []
    # the page writes the view back in its canonical form: a link to it reproduces it
    again = open_page(results, monkeypatch, PAGES[2], app.query_params)
    assert atlas_rows(again) == expected


def test_an_unknown_filter_value_is_reported_not_fatal(
    results: Path, unsafe_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = open_page(results, monkeypatch, PAGES[2], {"run": unsafe_run.name, "mode": "no_such_mode"})
    no_exception(app)
    assert any("mode=no_such_mode" in w.value for w in app.warning)
    assert len(atlas_rows(app)) == len(load_run(unsafe_run).failures)


def test_episode_page_shows_the_hidden_mutation_at_its_step(
    results: Path, trusting_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = "order-desk-cancel.last_n.unprotected.r2"
    record = next(r for r in RunDirectory(trusting_run).read_episodes() if r.run_id == run_id)
    (mutation,) = record.trace.mutation_events()
    app = open_page(results, monkeypatch, PAGES[3], {"run": trusting_run.name, "episode": run_id})
    no_exception(app)
    assert app.selectbox(key="cd_episode").value == run_id
    assert app.query_params == {"run": trusting_run.name, "episode": run_id}
    steps = list(app.expander)
    assert len(steps) == record.trace.step_count
    for number, expander in enumerate(steps, 1):
        assert expander.label.startswith(f"Step {number} ")
        body = html_text(expander)
        if number == mutation.step:
            assert "hidden mutation" in expander.label
            assert f'data-mutation="{mutation.mutation_id}"' in body
            call_at = body.index(f'data-seq="{mutation.after_seq}"')
            assert call_at < body.index(f'data-mutation="{mutation.mutation_id}"')
            for resource in mutation.resources:
                before, after = mutation.versions_before[resource], mutation.versions_after[resource]
                assert f"{resource} v{before} -&gt; v{after}" in body
        else:
            assert mutation.mutation_id not in body
            assert "hidden mutation" not in expander.label
    assert any("never_refreshed" in e.value or "Failure mode" in e.value for e in app.error)
    removed_steps = [s for s in record.trace.steps if s.context.removed]
    assert removed_steps, "last_n removed history in this episode"
    body = html_text(steps[removed_steps[0].step - 1])
    assert body.count('data-status="removed"') == len(removed_steps[0].context.removed)


def test_episode_page_opens_on_a_failure_with_a_hidden_mutation_by_default(
    results: Path, trusting_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = open_page(results, monkeypatch, PAGES[3], {"run": trusting_run.name})
    no_exception(app)
    chosen = app.selectbox(key="cd_episode").value
    summary = next(e for e in load_run(trusting_run).episodes if e.run_id == chosen)
    assert not summary.success and summary.hidden_mutations
    assert app.query_params["episode"] == chosen


def test_atlas_rows_link_to_their_timelines_with_the_cause_first(
    results: Path, unsafe_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = open_page(results, monkeypatch, PAGES[2], {"run": unsafe_run.name})
    assert linked_episodes(app) == atlas_rows(app)
    assert app.dataframe[0].proto.column_order[:5] == [
        "timeline",
        "failure mode",
        "decisive action",
        "relied on",
        "hidden mutation",
    ]


@pytest.mark.slow
def test_episodes_page_lists_every_episode_and_filters_by_outcome_and_failure_mode(
    results: Path, trusting_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    episodes = load_run(trusting_run).episodes
    app = open_page(results, monkeypatch, PAGES[4], {"run": trusting_run.name})
    no_exception(app)
    assert linked_episodes(app) == [e.run_id for e in episodes]
    assert any(f"{len(episodes)} of {len(episodes)} episodes" in m.value for m in app.markdown)
    app.multiselect(key="cd_episodes_outcome").set_value(["success"]).run()
    successes = [e.run_id for e in episodes if e.success]
    assert successes and linked_episodes(app) == successes
    assert app.query_params == {"run": trusting_run.name, "outcome": "success"}
    app.multiselect(key="cd_episodes_outcome").set_value([]).run()
    app.multiselect(key="cd_episodes_mode").set_value(["never_refreshed"]).run()
    app.multiselect(key="cd_episodes_strategy").set_value(["full_history"]).run()
    expected = [e.run_id for e in episodes if e.failure_mode == "never_refreshed" and e.strategy == "full_history"]
    assert expected and linked_episodes(app) == expected
    assert app.query_params == {"run": trusting_run.name, "strategy": "full_history", "mode": "never_refreshed"}


def test_episodes_page_searches_the_text_and_keeps_the_search_in_the_url(
    results: Path, trusting_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = load_run(trusting_run)
    app = open_page(results, monkeypatch, PAGES[4], {"run": trusting_run.name, "q": "issue_refund"})
    no_exception(app)
    hits = search_episodes(data.search, "issue_refund")
    assert hits and linked_episodes(app) == list(hits)
    assert app.text_input(key="cd_episodes_q").value == "issue_refund"
    table = app.dataframe[0].value
    assert all("issue_refund" in match.casefold() for match in table["match"])
    assert any(
        f"{len(hits)} of {len(data.episodes)} episodes" in m.value and "issue_refund" in m.value for m in app.markdown
    )
    # search and filters together; both go into the URL
    app.text_input(key="cd_episodes_q").set_value('"Sonnenallee 114"').run()
    app.multiselect(key="cd_episodes_protection").set_value(["unprotected"]).run()
    expected = [
        e.run_id for e in data.episodes if e.task_id == "order-desk-cancel" and e.protection_mode == "unprotected"
    ]
    assert linked_episodes(app) == expected
    assert app.query_params == {"run": trusting_run.name, "protection": "unprotected", "q": '"Sonnenallee 114"'}
    app.text_input(key="cd_episodes_q").set_value("no-such-text-anywhere").run()
    assert not app.dataframe and any("No episode matches" in i.value for i in app.info)


@pytest.mark.slow
def test_compare_page_shows_the_numbers_of_contextdelta_compare(
    compare_results: Path, trusting_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair = runs.oracle_pair_run()
    app = open_page(compare_results, monkeypatch, PAGES[5], {"a": trusting_run.name, "b": pair.name})
    no_exception(app)
    assert (app.selectbox(key="cd_compare_a").value, app.selectbox(key="cd_compare_b").value) == (
        trusting_run.name,
        pair.name,
    )
    assert app.query_params == {"a": trusting_run.name, "b": pair.name}
    expected = compare_tables(load_comparison(trusting_run, pair))
    shown = [d.value for d in app.dataframe]
    assert [h.value for h in app.subheader] == ["success", "stale action", "harmful action"]
    assert len(shown) == len(expected) == 3
    for table, (_, rows) in zip(shown, expected, strict=True):
        assert table.to_dict("records") == rows
    assert app.get("vega_lite_chart")
    assert not app.error


@pytest.mark.slow
def test_compare_page_says_not_comparable_with_the_reasons(
    compare_results: Path, trusting_run: Path, unsafe_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = open_page(compare_results, monkeypatch, PAGES[5], {"a": trusting_run.name, "b": unsafe_run.name})
    no_exception(app)
    (error,) = app.error
    assert error.value.startswith("**NOT COMPARABLE**: `task set differs (suite hash")  # each reason as code
    assert not app.dataframe
    # the default pair is the picked run and the newest other run of the same task set
    app = open_page(compare_results, monkeypatch, PAGES[5], {"a": trusting_run.name})
    assert app.selectbox(key="cd_compare_b").value == runs.oracle_pair_run().name
    assert not app.error


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_an_empty_or_missing_results_folder_says_so(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_page(tmp_path, monkeypatch, page)
    no_exception(app)
    assert any("No run directories" in i.value for i in app.info)
    app = open_page(tmp_path / "missing", monkeypatch, page)
    no_exception(app)
    assert any("does not exist" in i.value for i in app.info)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_a_malformed_run_directory_shows_its_problem(
    page: str, tmp_path: Path, unsafe_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs.copy_run(unsafe_run, tmp_path)
    make_malformed(unsafe_run, tmp_path, "zz-broken-lines")
    (tmp_path / "zz-no-manifest").mkdir()
    for name, problem in (("zz-broken-lines", "raw_runs.jsonl: line 2"), ("zz-no-manifest", "run_manifest.json")):
        app = open_page(tmp_path, monkeypatch, page, {"run": name, "a": unsafe_run.name, "b": name})
        no_exception(app)
        if page == PAGES[5]:  # Compare: the one with a manifest cannot be read; the other is not offered
            if name == "zz-broken-lines":
                assert any("is malformed" in e.value and problem in e.value for e in app.error)
            continue
        if page == PAGES[0]:  # the list names the unreadable folder; the broken-lines run has a valid manifest
            if name == "zz-no-manifest":
                assert any(name in e.value and problem in e.value for e in app.error)
            continue
        assert any(f"`{name}` is malformed" in e.value and problem in e.value for e in app.error), [
            e.value for e in app.error
        ]


@pytest.mark.slow
@pytest.mark.parametrize("keep", [10, 0])
@pytest.mark.parametrize("page", RUN_PAGES[1:])
def test_a_run_in_progress_says_so_and_shows_what_is_finished(
    page: str, keep: int, tmp_path: Path, trusting_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = make_running(trusting_run, tmp_path, keep=keep)
    app = open_page(tmp_path, monkeypatch, page, {"run": running.name})
    no_exception(app)
    assert not [e.value for e in app.error if "Failure mode" not in e.value]
    assert any("still in progress" in i.value and f"{keep} of 48" in i.value for i in app.info)
    resume = f"`contextdelta run-benchmark --resume {running.name}` finishes it"  # a killed run looks the same
    assert any("still in progress" in i.value and resume in i.value for i in app.info)
    if keep == 0:
        empty = {
            PAGES[1]: "nothing to chart",
            PAGES[2]: "has no finished episode yet: no failure to show",
            PAGES[3]: "no finished episode",
            PAGES[4]: "no finished episode",
        }[page]
        assert any(empty in m.value for m in app.info)
        assert not app.success  # nothing finished: nothing to call a success
        if page == PAGES[1]:  # the pairs exist, they have no value yet
            assert not any("No strategy was paired" in i.value or "lacks the conditions" in i.value for i in app.info)
            assert any("No comparison yet: the run has no finished episode" in i.value for i in app.info)
            assert any(
                "with full_history in each protection mode, but no pair has a value" in i.value for i in app.info
            ), [i.value for i in app.info]


def test_the_app_applies_the_store_migrations_when_it_starts(
    tmp_path: Path, results: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    monkeypatch.setenv("CONTEXTDELTA_DATABASE_URL", url)
    no_exception(open_page(results, monkeypatch, PAGES[0]))
    engine = create_store_engine(url)
    try:
        assert current_revision(engine) == head_revision()
    finally:
        engine.dispose()


def test_runs_page_flags_a_run_in_progress(tmp_path: Path, trusting_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_running(trusting_run, tmp_path, keep=10)
    app = open_page(tmp_path, monkeypatch, PAGES[0])
    no_exception(app)
    assert any("Still in progress" in i.value and "10 of 48" in i.value for i in app.info)
    assert any("Still in progress" in i.value and "--resume RUN_ID" in i.value for i in app.info)
    assert app.dataframe[0].value.iloc[0]["status"] == "running"


@pytest.mark.slow
def test_episode_page_shows_the_attempts_of_a_retried_episode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed trial re-run by --retry-failed: the Episode page lists both attempts (the latest current) and
    shows the superseded one on request, marked as counted nowhere."""
    from tests.runner.conftest import retried_run

    path, failed = retried_run(tmp_path)
    app = open_page(tmp_path, monkeypatch, PAGES[3], {"run": path.name, "episode": failed.run_id})
    no_exception(app)
    assert app.selectbox(key="cd_episode").value == failed.run_id
    (attempts,) = [d for d in app.dataframe if "attempt" in d.value.columns]
    assert list(attempts.value["attempt"]) == [1, 2]
    assert list(attempts.value["status"]) == ["superseded", "current"]
    assert app.selectbox(key="cd_attempt").value == 2
    assert not app.warning and app.metric[0].value == "success"
    app.selectbox(key="cd_attempt").set_value(1).run()
    no_exception(app)
    assert app.metric[0].value == "failed trial"
    assert any("superseded by a later attempt" in w.value for w in app.warning)


def test_the_app_skips_the_migrations_the_command_applied(
    tmp_path: Path, results: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'untouched.db'}"
    monkeypatch.setenv("CONTEXTDELTA_DATABASE_URL", url)
    monkeypatch.setattr("sys.argv", [str(launch.APP_SCRIPT), "--results-dir", str(results), "--store-migrated"])
    no_exception(open_page(results, monkeypatch, PAGES[0]))
    assert not (tmp_path / "untouched.db").exists()


@pytest.mark.slow
def test_the_runs_page_loads_the_selected_run_in_the_background_once(
    tmp_path: Path, trusting_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextdelta.dashboard import _ui
    from contextdelta.dashboard.data import run_signature

    path = runs.copy_run(trusting_run, tmp_path)  # a path no other test has loaded
    loads: list[Path] = []

    def counting(where: Path) -> object:
        loads.append(where)
        return load_run(where)

    monkeypatch.setattr(_ui, "load_run", counting)
    no_exception(open_page(tmp_path, monkeypatch, PAGES[0]))
    thread = _ui._warm_up(str(path), run_signature(path))
    thread.join(timeout=120)
    assert not thread.is_alive() and loads == [path]
    app = open_page(tmp_path, monkeypatch, PAGES[1], {"run": path.name})
    no_exception(app)
    assert loads == [path]  # the Conditions page found it loaded
    assert any(path.name in c.value for c in app.caption)


def test_the_conditions_page_shows_the_reports_warnings_after_the_shard_notice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Conditions page showed a shard's numbers ("3 of 3 episodes") without the report's warnings: not that it
    is one shard of a plan, nor the failed-trial and few-task warnings."""
    run = runs.copy_run(runs.shard_run(), tmp_path)
    app = open_page(tmp_path, monkeypatch, PAGES[1], {"run": run.name})
    no_exception(app)
    shown = [w.value.replace("\\", "") for w in app.warning]  # markdown escapes dropped
    assert shown and "is shard 1/2 of its plan" in shown[0], shown
    assert not any("shard 1/2, not the whole plan" in w for w in shown), shown  # said once, not twice
    assert any(w.startswith("**few_tasks**") for w in shown), shown


@pytest.mark.parametrize("page", [PAGES[1], PAGES[3]])
def test_a_run_that_stopped_early_or_is_one_shard_says_so(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An incomplete run (a budget, the circuit breaker, Ctrl-C) and one shard of a plan showed their figures (and
    their side of a comparison) as a whole run's, without a word: the command-line readers note both, the dashboard
    now does too."""
    incomplete = runs.copy_run(runs.incomplete_run(), tmp_path)
    shard = runs.copy_run(runs.shard_run(), tmp_path)
    app = open_page(tmp_path, monkeypatch, page, {"run": incomplete.name})
    no_exception(app)
    (warning,) = [w.value for w in app.warning if "stopped early" in w.value]
    assert f"Run `{incomplete.name}` is incomplete" in warning and "with 1 of 3 planned episodes finished" in warning
    assert "budget" in warning and f"`contextdelta run-benchmark --resume {incomplete.name}`" in warning
    app = open_page(tmp_path, monkeypatch, page, {"run": shard.name})
    no_exception(app)
    assert any("is shard 1/2 of its plan" in w.value and "`contextdelta merge`" in w.value for w in app.warning)
    complete = runs.copy_run(runs.oracle_pair_run(), tmp_path)
    app = open_page(tmp_path, monkeypatch, page, {"run": complete.name})
    assert not [w.value for w in app.warning if "stopped early" in w.value or "is shard" in w.value]
    app = open_page(tmp_path, monkeypatch, PAGES[5], {"a": incomplete.name, "b": shard.name})
    no_exception(app)
    warnings = [w.value for w in app.warning]
    assert any(w.startswith(f"Run a: Run `{incomplete.name}` is incomplete") for w in warnings), warnings
    assert any(w.startswith(f"Run b: Run `{shard.name}` is shard 1/2") for w in warnings), warnings


@pytest.mark.slow
def test_conditions_left_out_of_the_rate_chart_are_named(
    tmp_path: Path, trusting_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One finished episode: one condition has rates, the other seven none, and the caption under the chart names
    them instead of leaving them silently out."""
    running = make_running(trusting_run, tmp_path, keep=1)
    app = open_page(tmp_path, monkeypatch, PAGES[1], {"run": running.name})
    no_exception(app)
    assert app.get("vega_lite_chart")
    (note,) = [c.value for c in app.caption if c.value.startswith("Not in the chart, no value")]
    success = next(part for part in note.split("): ", 1)[1].split("; ") if part.startswith("success"))
    assert success.count(" \\/ ") == 7  # seven conditions, each 'strategy / mode' (escaped for markdown)
    assert uncharted(rate_points(load_run(running).metrics))[0].startswith("success: ")


@pytest.mark.slow
def test_compare_names_the_differences_its_chart_leaves_out(
    tmp_path: Path, trusting_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run a's episodes are all failed trials: its safety differences have no value, and the caption under the
    chart says which instead of leaving them silently out."""
    failed = runs.copy_run(runs.failed_pair_run(), tmp_path)
    runs.copy_run(trusting_run, tmp_path)
    app = open_page(tmp_path, monkeypatch, PAGES[5], {"a": failed.name, "b": trusting_run.name})
    no_exception(app)
    assert app.get("vega_lite_chart")  # success: failed trials count as failures
    (note,) = [c.value for c in app.caption if c.value.startswith("Not in the chart, no value")]
    assert "stale action\\: full\\_history \\/ unprotected\\, last\\_n \\/ unprotected" in note


@pytest.mark.parametrize("page", PAGES)
def test_a_run_directory_given_as_the_results_folder_says_so(
    page: str, tmp_path: Path, unsafe_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path run-benchmark prints last is one run directory; given as the results folder, every page says to
    start on its parent instead of offering its tasks/ folder as a malformed run."""
    run = runs.copy_run(unsafe_run, tmp_path)
    app = open_page(run, monkeypatch, page)
    no_exception(app)
    assert not app.error
    assert any(
        "is a run directory, not a folder of run directories" in i.value
        and f"contextdelta dashboard --results-dir {tmp_path.resolve()}" in i.value
        for i in app.info
    ), [i.value for i in app.info]


def test_compare_with_a_single_run_says_it_needs_two(
    tmp_path: Path, unsafe_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = runs.copy_run(unsafe_run, tmp_path)
    app = open_page(tmp_path, monkeypatch, PAGES[5])
    no_exception(app)
    assert not app.error  # nothing the user did wrong
    assert any(f"one readable run directory, `{run.name}`: a comparison needs two" in i.value for i in app.info)


@pytest.mark.slow
def test_the_episode_page_says_an_episode_is_a_control(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = runs.copy_run(runs.unsafe_controls_run(), tmp_path)
    control = next(r for r in runs.records(run).values() if r.control)
    main = next(r for r in runs.records(run).values() if not r.control)
    app = open_page(tmp_path, monkeypatch, PAGES[3], {"run": run.name, "episode": control.run_id})
    no_exception(app)
    assert any(i.value.startswith("A control episode (`no_mutation`") for i in app.info)
    app = open_page(tmp_path, monkeypatch, PAGES[3], {"run": run.name, "episode": main.run_id})
    assert not any("control episode" in i.value for i in app.info)


@pytest.mark.slow
def test_the_conditions_caption_says_control_episodes_are_in_its_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --controls the report's episode count includes the control episodes: the caption says so and gives the
    main matrix's, as benchmark_report.md does."""
    run = runs.copy_run(runs.unsafe_controls_run(), tmp_path)
    app = open_page(tmp_path, monkeypatch, PAGES[1], {"run": run.name})
    no_exception(app)
    main = load_run(run).metrics.episodes.main_matrix
    assert main is not None
    expected = f"12 of 12 episodes (control episodes included; main matrix, the conditions below: {main.finished} "
    assert any(expected in c.value for c in app.caption), [c.value for c in app.caption]


@pytest.mark.slow
def test_the_conditions_page_shows_the_reports_control_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The report's control-condition table (--controls) was missing from the dashboard: the page now shows it,
    cell for cell as benchmark_report.md prints it."""
    run = runs.copy_run(runs.unsafe_controls_run(), tmp_path)
    app = open_page(tmp_path, monkeypatch, PAGES[1], {"run": run.name})
    no_exception(app)
    assert "Control condition: nothing changes" in [h.value for h in app.subheader]
    report = (run / "benchmark_report.md").read_text()
    shown = [
        [str(v) for v in row]
        for frame in app.dataframe
        if "condition (control)" in frame.value.columns
        for row in frame.value.itertuples(index=False)
    ]
    assert len(shown) == 2  # full_history and last_n, unprotected, no_mutation
    for row in shown:
        assert "| " + " | ".join(row) + " |" in report, row


@pytest.mark.slow
def test_compare_with_a_run_that_has_no_episode_yet_says_why_once(
    tmp_path: Path, trusting_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Comparing a complete run with one that has no episode yet said 'No shared condition.' under each of the three
    metrics and listed every condition as 'only in a', with no word on why; now one line, and the note names the
    run without episodes and its status."""
    running = make_running(trusting_run, tmp_path, keep=0).rename(tmp_path / "in-progress")
    complete = runs.copy_run(trusting_run, tmp_path)
    app = open_page(tmp_path, monkeypatch, PAGES[5], {"a": complete.name, "b": running.name})
    no_exception(app)
    assert [i.value for i in app.info].count("No shared condition: nothing to compare.") == 1
    assert not [i.value for i in app.info if i.value == "No shared condition."]
    facts = " ".join(m.value for m in app.markdown)
    assert "no condition has episodes in both runs: run b" in facts and "running) has no episode yet" in facts
