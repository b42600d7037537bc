"""Every dashboard page under ``streamlit.testing.v1.AppTest`` on run directories from the scripted server: pages
render without exception, atlas filters narrow the rows and live in the query string, a query string restores a
view, the episode page shows a hidden mutation at its step, and empty, malformed and unfinished results show a
message instead of a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from contextdelta.dashboard import launch
from contextdelta.dashboard.data import load_run
from contextdelta.rundir.layout import RunDirectory
from contextdelta.store import create_store_engine, current_revision, head_revision
from tests.dashboard.conftest import make_malformed, make_running
from tests.report import runs

PAGES = ("views/runs.py", "views/conditions.py", "views/atlas.py", "views/episode.py")
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


@pytest.mark.parametrize("page", PAGES)
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


def test_conditions_page_shows_the_matrix_chart_breakdowns_and_comparisons(
    results: Path, trusting_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = open_page(results, monkeypatch, PAGES[1], {"run": trusting_run.name})
    no_exception(app)
    metrics = load_run(trusting_run).metrics
    (chart,) = app.get("vega_lite_chart")
    assert '"errorbar"' in chart.proto.spec and '"low"' in chart.proto.spec and '"high"' in chart.proto.spec
    tables = {tuple(d.value.columns)[:2]: d.value for d in app.dataframe}
    matrix = tables[("strategy", "success · unprotected")]
    per_condition = tables[("condition", "episodes")]
    comparisons = tables[("question", "comparison")]
    hazards = tables[("hazard", "tasks")]
    assert list(matrix["strategy"]) == ["full_history", "last_n", "semantic_summary", "typed_state_digest"]
    assert {"success · unprotected", "stale action · freshness_contract", "harmful action · unprotected"} <= set(
        matrix.columns
    )
    assert len(per_condition) == 8 and {"pass^1", "pass^2", "tokens / episode", "cost (USD)"} <= set(
        per_condition.columns
    )
    assert len(comparisons) == sum(len(q.comparisons) for q in metrics.research_questions)
    assert {"discordant tasks", "p (sign-flip)", "p (Holm)", "pairs with a failed trial"} <= set(comparisons.columns)
    assert list(hazards["hazard"]) == sorted({b.value for b in metrics.breakdowns if b.dimension == "hazard"})
    assert "full_history / unprotected" in hazards.columns
    assert any("aggregate_metrics.json" in c.value for c in app.caption)


def atlas_rows(app: AppTest) -> list[str]:
    return list(app.dataframe[0].value["episode"]) if app.dataframe else []


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


@pytest.mark.parametrize("page", PAGES)
def test_an_empty_or_missing_results_folder_says_so(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_page(tmp_path, monkeypatch, page)
    no_exception(app)
    assert any("No run directories" in i.value for i in app.info)
    app = open_page(tmp_path / "missing", monkeypatch, page)
    no_exception(app)
    assert any("does not exist" in i.value for i in app.info)


@pytest.mark.parametrize("page", PAGES)
def test_a_malformed_run_directory_shows_its_problem(
    page: str, tmp_path: Path, unsafe_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs.copy_run(unsafe_run, tmp_path)
    make_malformed(unsafe_run, tmp_path, "zz-broken-lines")
    (tmp_path / "zz-no-manifest").mkdir()
    for name, problem in (("zz-broken-lines", "raw_runs.jsonl: line 2"), ("zz-no-manifest", "run_manifest.json")):
        app = open_page(tmp_path, monkeypatch, page, {"run": name})
        no_exception(app)
        if page == PAGES[0]:  # the list names the unreadable folder; the broken-lines run has a valid manifest
            if name == "zz-no-manifest":
                assert any(name in e.value and problem in e.value for e in app.error)
            continue
        assert any(f"`{name}` is malformed" in e.value and problem in e.value for e in app.error), [
            e.value for e in app.error
        ]


@pytest.mark.parametrize("keep", [10, 0])
@pytest.mark.parametrize("page", PAGES[1:])
def test_a_run_in_progress_says_so_and_shows_what_is_finished(
    page: str, keep: int, tmp_path: Path, trusting_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = make_running(trusting_run, tmp_path, keep=keep)
    app = open_page(tmp_path, monkeypatch, page, {"run": running.name})
    no_exception(app)
    assert not [e.value for e in app.error if "Failure mode" not in e.value]
    assert any("still in progress" in i.value and f"{keep} of 48" in i.value for i in app.info)
    if keep == 0:
        empty = {PAGES[1]: "nothing to chart", PAGES[2]: "No failed episode", PAGES[3]: "no finished episode"}[page]
        assert any(empty in m.value for m in [*app.info, *app.success])


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
    assert app.dataframe[0].value.iloc[0]["status"] == "running"


def test_episode_page_shows_the_attempts_of_a_retried_episode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed trial re-run by --retry-failed: the Episode page lists both attempts (the latest current) and
    shows the superseded one on request, marked as counted nowhere."""
    from contextdelta.runner import run_benchmark
    from contextdelta.testing import FaultPlan, ScriptedServer
    from tests.runner.conftest import TASKS, benchmark_request

    strategies = {"strategies": ["full_history"], "protection_modes": ["unprotected"]}
    with ScriptedServer("oracle", TASKS, faults=FaultPlan(fail_500="at:1")) as server:
        first = run_benchmark(benchmark_request(server.base_url, tmp_path, max_retries=0, concurrency=1, **strategies))
        server.faults = FaultPlan()
        run_benchmark(benchmark_request(server.base_url, tmp_path, resume=str(first.path), retry_failed=True))
    (failed,) = [r for r in first.records if r.failed]
    app = open_page(tmp_path, monkeypatch, PAGES[3], {"run": first.path.name, "episode": failed.run_id})
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
