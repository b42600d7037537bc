"""Ingestion: idempotent import of a run directory, the CLI, and concurrent writers during a benchmark run."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy import event, func, select, text
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.rundir.layout import RAW_RUNS, RunDirectory
from contextdelta.runner import BenchmarkRequest, run_benchmark
from contextdelta.store import (
    EpisodeRow,
    MutationRow,
    ProxyTraceRow,
    RunGroupRow,
    StepRow,
    Store,
    StoreRecorder,
    StoreWriter,
    ToolEventRow,
)
from contextdelta.store._ingest import VERDICT_COLUMNS
from contextdelta.testing import serve_scripted
from examples.smoke.mock_pipeline import Fixture

TASKS = Path(__file__).resolve().parents[2] / "tasks"
runner = CliRunner()


def _counts(store: Store) -> dict[str, int]:
    with store.read_session() as session:
        return {
            row.__tablename__: int(session.execute(select(func.count()).select_from(row)).scalar_one())
            for row in (RunGroupRow, EpisodeRow, StepRow, ToolEventRow, MutationRow)
        }


def test_import_is_idempotent_and_complete(sqlite_url: str, mock_run: Path, mock_fixture: Fixture) -> None:
    store = Store.open(sqlite_url)
    first = store.import_run(RunDirectory(mock_run))
    after_first = _counts(store)
    second = store.import_run(RunDirectory(mock_run))

    records = [e.record for e in mock_fixture.episodes]
    assert (first.added, first.updated, first.unchanged) == (10, 0, 0)
    assert (second.added, second.updated, second.unchanged) == (0, 0, 10)
    assert (
        _counts(store)
        == after_first
        == {
            "run_groups": 1,
            "episodes": 10,
            "steps": sum(r.trace.step_count for r in records),
            "tool_events": sum(len(r.trace.tool_events()) for r in records),
            "hidden_mutations": sum(len(r.trace.mutation_events()) for r in records),
        }
    )
    with store.read_session() as session:
        episode = session.scalars(
            select(EpisodeRow).where(EpisodeRow.run_id == "cfg-legacy-cleanup.last_n.unprotected.r1")
        ).one()
        assert (episode.world, episode.strategy, episode.protection_mode) == ("config", "last_n", "unprotected")
        assert episode.failure_mode == "context_dropped_fresh_observation"
        assert episode.failure_cause is not None and episode.failure_cause["action"]["seq"] == 8
        assert [s.step for s in episode.steps] == list(range(1, 12))
        assert episode.steps[4].removed == [2, 3]  # what last_n left out at step 5
        prohibited = [e for e in episode.tool_events if e.prohibited]
        assert [(e.seq, e.tool, e.outcome) for e in prohibited] == [(8, "delete_config", "rejected")]
        assert [m.mutation_id for m in episode.mutations] == ["finance-claims-export-key"]
        group = session.get(RunGroupRow, "mock-pipeline")
        assert group is not None and group.planned == 10 and group.source_path == str(mock_run.resolve())
    store.close()


def test_a_failed_trial_is_stored_without_a_verdict(sqlite_url: str, mock_run: Path, mock_fixture: Fixture) -> None:
    store = Store.open(sqlite_url)
    store.import_run(RunDirectory(mock_run))
    failed = {e.record.run_id for e in mock_fixture.episodes if e.record.failed}
    assert failed
    with store.read_session() as session:
        rows = session.execute(select(EpisodeRow)).scalars().all()
        for row in rows:
            verdict = [getattr(row, name) for name in VERDICT_COLUMNS]
            if row.run_id in failed:
                assert row.failed and not row.success and verdict == [None] * len(VERDICT_COLUMNS)
                assert row.verdict["end_state"] is not None  # the graders' findings stay in the verdict document
            else:
                assert None not in [
                    v for n, v in zip(VERDICT_COLUMNS, verdict, strict=True) if n != "conflict_recovery"
                ]
    store.close()


def test_a_changed_episode_replaces_the_stored_one_whole(sqlite_url: str, mock_run: Path) -> None:
    store = Store.open(sqlite_url)
    store.import_run(mock_run)
    before = _counts(store)
    raw = mock_run / RAW_RUNS
    lines = raw.read_text().splitlines()
    changed = json.loads(lines[0])
    changed["trace"]["final_answer"] = "edited after the fact"
    raw.write_text("\n".join([json.dumps(changed), *lines[1:]]) + "\n")

    report = store.import_run(mock_run)

    assert (report.added, report.updated, report.unchanged) == (0, 1, 9)
    assert _counts(store) == before  # the old steps and events went with the old row
    with store.read_session() as session:
        answer = session.scalars(select(EpisodeRow.final_answer).where(EpisodeRow.run_id == changed["run_id"])).one()
    assert answer == "edited after the fact"
    store.close()


@pytest.mark.slow
def test_cli_db_upgrade_and_import(sqlite_url: str, mock_run: Path) -> None:
    upgraded = runner.invoke(app, ["db", "upgrade", "--database-url", sqlite_url])
    assert upgraded.exit_code == 0, upgraded.output
    assert "fresh database upgraded from empty to 0005" in upgraded.stdout
    assert "already at 0005" in runner.invoke(app, ["db", "upgrade", "--database-url", sqlite_url]).stdout

    args = ["db", "import", "mock-pipeline", "--results-dir", str(mock_run.parent), "--database-url", sqlite_url]
    first = runner.invoke(app, args)
    second = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "10 episodes (10 added, 0 updated, 0 repaired, 0 unchanged)" in first.stdout
    assert "10 episodes (0 added, 0 updated, 0 repaired, 10 unchanged)" in second.stdout

    bad = runner.invoke(
        app, ["db", "import", "../etc", "--results-dir", str(mock_run.parent), "--database-url", sqlite_url]
    )
    assert bad.exit_code == 2 and "invalid RUN_ID" in bad.output


def _record_proxy_traces(url: str, count: int) -> subprocess.Popen[str]:
    """Another process writing to the same database: ``count`` proxy traces, as fast as it can."""
    script = (
        "import sys\n"
        "from contextdelta.store import ProxyTrace, Store\n"
        "store = Store.open(sys.argv[1])\n"
        "for i in range(int(sys.argv[2])):\n"
        "    store.record_proxy_trace(ProxyTrace(created_at='2026-01-01T00:00:00Z', method='POST',\n"
        "        path='/v1/chat/completions', upstream='http://127.0.0.1:1/v1', status_code=200, latency_s=0.01,\n"
        "        request={'i': i}))\n"
        "print('done', flush=True)\n"
    )
    return subprocess.Popen([sys.executable, "-c", script, url, str(count)], stdout=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_concurrent_writers_during_a_benchmark_run_lose_no_rows(
    sqlite_url: str, mock_run: Path, tmp_path: Path
) -> None:
    results = tmp_path / "runs"
    Store.open(sqlite_url).close()  # migrate first, so every writer starts on the same schema
    other_process = _record_proxy_traces(sqlite_url, 150)
    imports: list[int] = []

    def importer() -> None:  # a third writer: `db import` of another run, over and over
        with Store.open(sqlite_url) as store:
            for _ in range(4):
                imports.append(store.import_run(mock_run).total)

    thread = threading.Thread(target=importer)
    with serve_scripted("oracle", TASKS) as url:
        thread.start()
        recorder = StoreRecorder.open(sqlite_url, on_error=lambda text: None)
        assert recorder is not None
        outcome = run_benchmark(
            BenchmarkRequest(
                tasks_dir=TASKS,
                base_url=url,
                model="scripted-oracle",
                results_dir=results,
                repeats=2,
                concurrency=4,
                task_ids=["order-grinder-refund", "cal-design-review", "cfg-search-ramp"],
                strategies=["full_history", "last_n"],
                protection_modes=["unprotected", "freshness_contract"],
            ),
            recorders=[recorder],
        )
    thread.join(60)
    assert other_process.wait(60) == 0

    assert recorder.writer.errors == [] and recorder.writer.written == 24
    assert imports == [10, 10, 10, 10]
    with Store.open(sqlite_url) as store:
        assert store.episode_count(outcome.manifest.run_group_id) == 24
        assert store.episode_count("mock-pipeline") == 10
        with store.read_session() as session:
            assert session.execute(select(func.count()).select_from(ProxyTraceRow)).scalar_one() == 150
            group = session.get(RunGroupRow, outcome.manifest.run_group_id)
            assert group is not None and (group.status, group.finished) == ("complete", 24)
            stored = set(
                session.scalars(
                    select(EpisodeRow.run_id).where(EpisodeRow.run_group_id == outcome.manifest.run_group_id)
                )
            )
        assert stored == {r.run_id for r in outcome.records}


def test_a_broken_store_never_stops_a_run(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the database folder should be")
    messages: list[str] = []
    recorder = StoreRecorder.open(f"sqlite:///{blocker}/x/contextdelta.db", on_error=messages.append)
    assert recorder is None and "db import" in messages[0]


@pytest.mark.slow
def test_cli_run_benchmark_writes_episodes_to_the_store(sqlite_url: str, tmp_path: Path) -> None:
    with serve_scripted("unsafe", TASKS) as url:
        result = runner.invoke(
            app,
            [
                "run-benchmark",
                "--tasks",
                str(TASKS),
                "--task-ids",
                "order-grinder-refund",
                "--strategies",
                "last_n",
                "--protection-modes",
                "unprotected",
                "--repeats",
                "1",
                "--base-url",
                url,
                "--model",
                "scripted-unsafe",
                "--results-dir",
                str(tmp_path / "runs"),
                "--database-url",
                sqlite_url,
                "--quiet",
            ],
        )
    assert result.exit_code == 0, result.output
    run_path = Path(result.stdout.strip().splitlines()[-1])
    with Store.open(sqlite_url) as store, store.read_session() as session:
        rows = session.execute(
            select(EpisodeRow.run_id, EpisodeRow.failure_mode).where(EpisodeRow.run_group_id == run_path.name)
        ).all()
    assert [tuple(r) for r in rows] == [("order-grinder-refund.last_n.unprotected.r1", "never_refreshed")]


def test_the_writer_stores_queued_episodes_a_batch_at_a_time_and_a_bad_one_loses_only_itself(
    tmp_path: Path, mock_fixture: Fixture
) -> None:
    records = [e.record for e in mock_fixture.episodes]
    orphan = records[0].model_copy(update={"run_group_id": "no-such-group", "run_id": "orphan"})
    for name, queued, commits_expected in (
        ("good", records, 2),
        ("one-bad", [*records[:4], orphan, *records[4:]], None),
    ):
        store = Store.open(f"sqlite:///{tmp_path / name / 'contextdelta.db'}")
        commits: list[int] = []
        event.listen(store.engine, "commit", lambda connection, seen=commits: seen.append(1))
        errors: list[str] = []
        writer = StoreWriter(store, on_error=errors.append)
        writer.manifest(mock_fixture.manifest)
        for record in queued:  # queued before the thread starts: they form one batch
            writer.episode(record)
        writer.start().close()
        assert writer.written == len(records) and _counts(store)["episodes"] == len(records)
        if commits_expected is not None:
            assert errors == [] and len(commits) == commits_expected  # the manifest, then every episode at once
        else:
            assert len(errors) == 1 and "IntegrityError" in errors[0]  # the batch failed, then one by one
        store.close()


@pytest.mark.parametrize("content", [b"\x00garbage" * 500, b"hello\n", None])
def test_a_file_that_is_not_a_trace_store_is_a_one_line_usage_error_naming_it_and_the_fix(
    content: bytes | None, tmp_path: Path
) -> None:
    """A store URL naming a file that is not a database (or a folder) is the user's setting gone wrong: exit 2, as
    for a malformed URL, with the path and how to fix it; the file is left as it was."""
    path = tmp_path / "store.db"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    for args in (["db", "upgrade"], ["serve", "--upstream", "http://127.0.0.1:9/v1"]):
        result = runner.invoke(app, [*args, "--database-url", f"sqlite:///{path}"])
        assert result.exit_code == 2, result.output
        assert "\n" not in result.stderr.strip()
        message = result.stderr.strip()
        assert message.startswith(f"error: cannot open the trace store sqlite:///{path}: ")
        assert "set --database-url or CONTEXTDELTA_DATABASE_URL to" in message
        assert "is left as it is" in message
        if content is None:
            assert f"{path} is a folder, not a database file" in message and path.is_dir()
            assert list(path.iterdir()) == []
        else:
            assert "file is not a database" in message and path.read_bytes() == content


@pytest.mark.parametrize("url", ["garbage", "sqlite:/results.db", "postgresql psycopg://u@h/d"])
def test_run_benchmark_refuses_a_malformed_database_url_before_anything_runs(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTEXTDELTA_DATABASE_URL", url)
    result = runner.invoke(app, ["run-benchmark", "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                                 "--results-dir", str(tmp_path / "results")])  # fmt: skip
    assert result.exit_code == 2
    assert "CONTEXTDELTA_DATABASE_URL is not a database URL; give e.g." in " ".join(result.stderr.split())
    assert not (tmp_path / "results").exists()


def test_a_store_damaged_outside_contextdelta_fails_db_import_with_one_line_naming_it(
    sqlite_url: str, mock_run: Path
) -> None:
    """A store at the head revision whose ``steps`` table was dropped (by hand, or another tool): migrations have
    nothing to do, and the import's first query of that table failed with a SQLAlchemy traceback. Now: exit 1, one
    line naming the run, the store and the problem, and how to go on; the run directory is left as it is."""
    Store.open(sqlite_url).close()
    store = Store.open(sqlite_url)
    with store.session() as session:
        session.execute(text("DROP TABLE steps"))
    store.close()
    raw = (mock_run / RAW_RUNS).read_bytes()
    args = ["db", "import", "mock-pipeline", "--results-dir", str(mock_run.parent), "--database-url", sqlite_url]
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    message = result.stderr.strip()
    assert "\n" not in message and "Traceback" not in result.output
    assert message.startswith(f"error: cannot import {mock_run} into the trace store {sqlite_url}: ")
    assert "OperationalError: no such table: steps" in message
    assert "a new file" in message
    assert (mock_run / RAW_RUNS).read_bytes() == raw
