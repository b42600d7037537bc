"""``run-benchmark --resume ID --retry-failed``: failed trials re-run as new attempts of their episodes.

Against the scripted server over real HTTP: an outage of a few seconds in the middle of a run (the server answers
503 to everything for that long), then a retry session gives exactly the per-episode verdicts of an uninterrupted
run with the same seed, and ``verify`` prints MATCH. ``raw_runs.jsonl`` stays append-only: the failed attempts stay
in it as superseded attempts, which ``verify`` re-executes, the report and the dashboard show, and nothing counts.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.dashboard import load_attempts, load_episode, load_run
from contextdelta.rundir import MANIFEST, RAW_RUNS, RAW_RUNS_RECEIPTS, TASK_RESULTS, RunDirectory, RunStatus
from contextdelta.runner import EXIT_ALL_FAILED, EXIT_INCOMPLETE, BenchmarkError, merge_shards, run_benchmark
from contextdelta.store import EpisodeRow, Store
from contextdelta.testing import FaultPlan, ScriptedServer, serve_scripted
from contextdelta.verify import verify_run
from tests.runner.conftest import SMALL, TASKS, benchmark_request

runner = CliRunner()
MODEL = "scripted-context_trusting"
TWO = {"strategies": ["full_history", "last_n"], "protection_modes": ["unprotected", "freshness_contract"]}
"""12 episodes on the runner tests' three tasks; the context-trusting policy gives varied verdicts."""


def base_args(url: str, results: Path) -> list[str]:
    return [
        *("run-benchmark", "--tasks", str(TASKS), "--base-url", url, "--model", MODEL),
        *("--results-dir", str(results), "--quiet", "--no-store", "--max-retries", "0", "--concurrency", "1"),
    ]


def new_run_args(url: str, results: Path) -> list[str]:
    return [
        *base_args(url, results),
        *("--task-ids", ",".join(SMALL), "--repeats", "1", "--seed", "7"),
        *("--strategies", "full_history,last_n", "--protection-modes", "unprotected,freshness_contract"),
    ]


def verdicts(path: Path) -> dict[str, dict[str, Any]]:
    return {r.run_id: r.verdict.model_dump(mode="json") for r in RunDirectory(path).read_episodes()}


def printed_path(output: str) -> Path:
    return Path(output.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The per-episode verdicts of the same plan run without any fault."""
    results = tmp_path_factory.mktemp("uninterrupted")
    with serve_scripted("context_trusting", TASKS, in_process=True) as url:
        result = runner.invoke(app, new_run_args(url, results))
    assert result.exit_code == 0, result.output
    found = verdicts(printed_path(result.stdout))
    assert len(found) == 12 and len({json.dumps(v, sort_keys=True) for v in found.values()}) > 1
    return found


@pytest.mark.slow
def test_an_outage_mid_run_then_retry_failed_gives_the_uninterrupted_verdicts_and_verifies(
    tmp_path: Path, uninterrupted: dict[str, dict[str, Any]]
) -> None:
    """The issue's acceptance test: a 2 s outage from the 30th model call on (a few episodes in) trips the
    circuit breaker; once the endpoint is back, --resume --retry-failed re-runs the failed trials and the missing
    episodes, and the run's verdicts are those of the uninterrupted run; verify prints MATCH."""
    outage_s = 2.0
    with serve_scripted("context_trusting", TASKS, in_process=True, outage_after=30, outage_s=outage_s) as url:
        first = runner.invoke(app, [*new_run_args(url, tmp_path), "--max-consecutive-failures", "3"])
        ended = time.monotonic()
        assert first.exit_code == EXIT_INCOMPLETE, first.output
        path = printed_path(first.stdout)
        message = " ".join(first.stderr.split())
        assert "is incomplete: circuit breaker: 3 failed trials in a row; last error: HTTP 503" in message
        assert f"Resume it with: contextdelta run-benchmark --resume {path}" in message
        assert "(add --retry-failed to re-run its 3 failed trials as well)" in message
        before = RunDirectory(path).read_manifest()
        assert before.status is RunStatus.INCOMPLETE
        assert before.counts.failed == 3 and 3 < before.counts.finished < 12
        lines_before = (path / RAW_RUNS).read_text(encoding="utf-8")

        time.sleep(max(0.0, outage_s + 0.2 - (time.monotonic() - ended)))  # the endpoint is back
        second = runner.invoke(app, [*base_args(url, tmp_path), "--resume", str(path), "--retry-failed"])
    assert second.exit_code == 0, second.output
    assert printed_path(second.stdout) == path
    assert "3 episodes were retried (3 superseded attempts kept in raw_runs.jsonl); 3 now have a verdict" in " ".join(
        second.stderr.split()
    )

    directory = RunDirectory(path)
    manifest = directory.read_manifest()
    assert manifest.status is RunStatus.COMPLETE
    assert (manifest.counts.finished, manifest.counts.failed) == (12, 0)
    assert verdicts(path) == uninterrupted
    # append-only: the first session's lines are still the file's first lines, byte for byte
    raw = (path / RAW_RUNS).read_text(encoding="utf-8")
    assert raw.startswith(lines_before)
    attempts = directory.read_attempts()
    assert len(attempts.records) == 15 and len(attempts.superseded) == 3
    assert all(r.attempt == 1 and r.trace.termination.value == "provider_error" for r in attempts.superseded)
    retried = {r.run_id for r in attempts.superseded}
    current = {r.run_id: r for r in attempts.current}
    assert all(current[rid].attempt == 2 and not current[rid].failed for rid in retried)
    # a re-run keeps its episode's seed (the seed rule: run seed, task, repeat)
    assert all(current[r.run_id].episode_seed == r.episode_seed for r in attempts.superseded)
    retry_session = manifest.sessions[-1]
    assert retry_session["retry_failed"] is True and retry_session["retries"] == 3
    assert retry_session["pending"] == 12 - before.counts.finished + 3

    result = verify_run(path)
    assert result.ok, result.lines()
    verified = runner.invoke(app, ["verify", str(path)])
    assert verified.exit_code == 0 and verified.stdout.splitlines() == ["MATCH"]


@pytest.mark.slow
def test_retry_failed_on_a_complete_run_re_finalises_it(tmp_path: Path, uninterrupted: dict[str, Any]) -> None:
    """A burst of two failed model calls leaves a complete run with two failed trials (the CLI says how to re-run
    them); --retry-failed re-runs just those on the complete run and re-finalises it."""
    with ScriptedServer("context_trusting", TASKS, faults=FaultPlan(fail_500="at:3,20")) as server:
        url = server.base_url
        first = runner.invoke(app, new_run_args(url, tmp_path))
        assert first.exit_code == 0, first.output
        path = printed_path(first.stdout)
        assert RunDirectory(path).read_manifest().counts.failed == 2
        assert f"Re-run its 2 failed trials with: contextdelta run-benchmark --resume {path} --retry-failed" in (
            " ".join(first.stderr.split())
        )
        server.faults = FaultPlan()  # the endpoint is healthy again (a resume needs the same base URL)
        second = runner.invoke(app, [*base_args(url, tmp_path), "--resume", str(path), "--retry-failed"])
    assert second.exit_code == 0, second.output
    manifest = RunDirectory(path).read_manifest()
    assert manifest.status is RunStatus.COMPLETE and manifest.counts.failed == 0
    assert manifest.sessions[-1]["pending"] == 2
    assert verdicts(path) == uninterrupted
    assert verify_run(path).ok


@pytest.mark.slow
def test_a_retry_that_fails_again_stays_failed_as_attempt_2_and_attempt_3_can_succeed(tmp_path: Path) -> None:
    with ScriptedServer("oracle", TASKS, faults=FaultPlan(fail_500="at:1")) as server:
        url = server.base_url
        first = run_benchmark(benchmark_request(url, tmp_path, max_retries=0, concurrency=1, **TWO))
        assert first.manifest.counts.failed == 1 and first.manifest.status is RunStatus.COMPLETE
        (failed,) = [r for r in first.records if r.failed]
        path = first.path

        server.faults = FaultPlan(fail_500="first:100000")  # every model call fails (the endpoint check passes)
        again = run_benchmark(benchmark_request(url, tmp_path, resume=str(path), retry_failed=True, max_retries=0))
        assert again.manifest.status is RunStatus.COMPLETE  # the session ran what it meant to: the re-run failed
        assert (again.manifest.counts.finished, again.manifest.counts.failed) == (12, 1)
        current = {r.run_id: r for r in again.records}[failed.run_id]
        assert (current.attempt, current.failed, current.verdict.success) == (2, True, False)
        assert [r.attempt for r in again.superseded] == [1]
        text = (path / TASK_RESULTS).read_text(encoding="utf-8").splitlines()
        assert text[0].endswith(",attempt") and len(text) == 13  # one row per episode, the current attempt
        row = next(line for line in text if line.startswith(failed.run_id + ","))
        assert row.endswith(",2") and ",provider_error," in row
        metrics = json.loads((path / "aggregate_metrics.json").read_text(encoding="utf-8"))
        assert metrics["retries"]["retried_episodes"] == 1 and metrics["retries"]["failed_again"] == 1
        assert metrics["episodes"]["failed_trials"] == 1 and metrics["episodes"]["finished"] == 12
        report = (path / "benchmark_report.md").read_text(encoding="utf-8")
        assert "## Retried failed trials" in report
        assert f"| {failed.run_id} | 2 | provider_error | provider_error (failed trial again) |" in report
        # how the superseded attempt's failed call ended, from its step's failed_call
        assert metrics["retries"]["superseded_failed_calls"] == {"HTTP 500": 1}
        assert "The failed model calls of the superseded attempts ended: HTTP 500 1." in report
        assert verify_run(path).ok

        server.faults = FaultPlan()
        third = run_benchmark(benchmark_request(url, tmp_path, resume=str(path), retry_failed=True))
    attempts = RunDirectory(path).read_attempts()
    assert [r.attempt for r in attempts.attempts_of(failed.run_id)] == [1, 2, 3]
    assert attempts.attempts_of(failed.run_id)[-1].verdict.success
    assert third.manifest.counts.failed == 0 and third.manifest.counts.succeeded == 12
    assert len(attempts.records) == 14
    assert [s.get("retry_failed", False) for s in third.manifest.sessions] == [False, True, True]
    report = (path / "benchmark_report.md").read_text(encoding="utf-8")
    assert f"| {failed.run_id} | 3 | provider_error, provider_error | final_answer (success) |" in report
    assert "The failed model calls of the superseded attempts ended: HTTP 500 2." in report
    assert verify_run(path).ok

    # the dashboard's data layer shows every attempt, the latest current
    run = load_run(path)
    summary = next(e for e in run.episodes if e.run_id == failed.run_id)
    assert summary.attempts == 3 and summary.success and summary.label.endswith("attempt 3 of 3")
    rows = load_attempts(path, failed.run_id)
    assert [(a.attempt, a.current, a.outcome) for a in rows] == [
        (1, False, "failed trial"),
        (2, False, "failed trial"),
        (3, True, "success"),
    ]
    assert load_episode(path, failed.run_id).attempt == 3
    assert load_episode(path, failed.run_id, 1).failed

    # the trace store: the current attempt, with a summary of the superseded ones
    with Store.open(f"sqlite:///{tmp_path / 'store.db'}") as store:
        store.import_run(path)
        store.import_run(path)  # idempotent
        with store.read_session() as session:
            rows_in_store = list(session.scalars(select(EpisodeRow)))
    assert len(rows_in_store) == 12
    row_of = next(r for r in rows_in_store if r.run_id == failed.run_id)
    assert row_of.attempt == 3 and row_of.success
    assert [a["attempt"] for a in row_of.superseded_attempts or []] == [1, 2]
    assert all(r.superseded_attempts is None for r in rows_in_store if r.run_id != failed.run_id)


@pytest.mark.slow
def test_retry_failed_needs_resume_and_plain_resume_keeps_its_meaning(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run-benchmark", "--retry-failed", "--results-dir", str(tmp_path), "--quiet"])
    assert result.exit_code == 2
    assert "--retry-failed re-runs the failed trials of an earlier run: give that run with --resume ID" in " ".join(
        result.stderr.split()
    )
    assert not any(tmp_path.iterdir())
    with serve_scripted("oracle", TASKS, in_process=True, fail_500="at:1") as url:
        first = run_benchmark(benchmark_request(url, tmp_path, max_retries=0, **TWO))
        again = run_benchmark(benchmark_request(url, tmp_path, resume=str(first.path)))
    # without --retry-failed nothing is missing, so nothing runs: the failed trial stays as it was
    assert again.manifest.sessions[-1]["pending"] == 0 and "retry_failed" not in again.manifest.sessions[-1]
    assert again.manifest.counts.failed == 1 and not again.superseded
    assert len(RunDirectory(first.path).read_attempts().records) == 12


@pytest.mark.slow
def test_a_retry_session_that_trips_the_breaker_ends_incomplete_and_says_retry_failed(tmp_path: Path) -> None:
    with ScriptedServer("context_trusting", TASKS, faults=FaultPlan(fail_500="first:100000")) as server:
        url = server.base_url
        first = runner.invoke(app, [*new_run_args(url, tmp_path), "--max-consecutive-failures", "100"])
        assert first.exit_code == EXIT_ALL_FAILED, first.output  # none missing: complete, all 12 failed trials
        path = printed_path(first.stdout)
        second = runner.invoke(
            app,
            [*base_args(url, tmp_path), "--resume", str(path), "--retry-failed", "--max-consecutive-failures", "2"],
        )
        assert second.exit_code == EXIT_INCOMPLETE, second.output
        message = " ".join(second.stderr.split())
        assert "is incomplete: circuit breaker: 2 failed trials in a row" in message
        assert f"Resume it with: contextdelta run-benchmark --resume {path} --retry-failed" in message
        manifest = RunDirectory(path).read_manifest()
        # every episode still has a record (the unretried ones their first attempt), but the session stopped early
        assert manifest.status is RunStatus.INCOMPLETE and manifest.counts.finished == 12
        assert manifest.sessions[-1]["finished"] == 2
        assert "--retry-failed`." in (path / "benchmark_report.md").read_text(encoding="utf-8").split("\n")[2]
        server.faults = FaultPlan()
        third = runner.invoke(app, [*base_args(url, tmp_path), "--resume", str(path), "--retry-failed"])
    assert third.exit_code == 0, third.output
    attempts = RunDirectory(path).read_attempts()
    assert len(attempts.superseded) == 12 + 2 and RunDirectory(path).read_manifest().counts.failed == 0
    assert verify_run(path).ok


# ---- verify names what does not hold ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def retried_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A complete run with one retried episode (attempt 1 failed, attempt 2 the current one)."""
    results = tmp_path_factory.mktemp("retried")
    with serve_scripted("oracle", TASKS, in_process=True, fail_500="at:1") as url:
        first = run_benchmark(benchmark_request(url, results, max_retries=0, concurrency=1, **TWO))
        run_benchmark(benchmark_request(url, results, resume=str(first.path), retry_failed=True))
    assert verify_run(first.path).ok
    return first.path


def _lines(path: Path) -> list[str]:
    return (path / RAW_RUNS).read_text(encoding="utf-8").splitlines(keepends=True)


def _copy(run: Path, tmp_path: Path) -> tuple[Path, list[str], int, int]:
    """A copy of the run, its raw lines, and the line numbers of the superseded and the current attempt."""
    path = tmp_path / run.name
    shutil.copytree(run, path)
    lines = _lines(path)
    old = next(i for i, line in enumerate(lines) if json.loads(line).get("attempt") == 2)
    run_id = json.loads(lines[old])["run_id"]
    first = next(i for i, line in enumerate(lines) if json.loads(line)["run_id"] == run_id)
    return path, lines, first, old


@pytest.mark.slow
def test_verify_re_executes_superseded_attempts_and_names_them(retried_run: Path, tmp_path: Path) -> None:
    path, lines, first, _ = _copy(retried_run, tmp_path)
    record = json.loads(lines[first])
    record["episode_seed"] += 1
    lines[first] = json.dumps(record) + "\n"
    (path / RAW_RUNS).write_text("".join(lines), encoding="utf-8")
    result = verify_run(path)
    named = {tuple(d.render().split(": ")[0:2]) for d in result.divergences}
    superseded = f"{record['run_id']} (superseded attempt 1)"
    # the receipt names the edited field, the re-execution what it contradicts: all of them the superseded attempt
    assert (superseded, "episode_seed") in named and (superseded, "trace.seed") in named
    assert {who for who, _ in named} == {superseded}


@pytest.mark.slow
def test_verify_refuses_attempts_out_of_order_and_a_superseded_success(retried_run: Path, tmp_path: Path) -> None:
    path, lines, first, second = _copy(retried_run, tmp_path)
    swapped = list(lines)
    swapped[first], swapped[second] = lines[second], lines[first]
    (path / RAW_RUNS).write_text("".join(swapped), encoding="utf-8")
    rendered = verify_run(path).lines()
    run_id = json.loads(lines[first])["run_id"]
    # the receipts name the move itself (and the attempts are then checked in the order they were written)
    assert (
        f"{run_id}: raw_runs.jsonl: line {first + 1} holds the record sealed as line {second + 1}: lines out of order"
        in (rendered)
    )
    # without receipts (a run from before them) the attempt numbering still catches it
    (path / RAW_RUNS_RECEIPTS).unlink()
    manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    manifest.pop("seal")
    (path / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    rendered = verify_run(path).lines()
    assert f"{run_id}: attempt: attempts in raw_runs.jsonl order are [2, 1]; expected 1..2, each once, in order" in (
        rendered
    )

    # a success recorded as a superseded attempt (a retried verdict) is named: only failed trials are retried
    success = next(i for i, line in enumerate(lines) if not json.loads(line)["failed"])
    copy = json.loads(lines[success])
    copy["attempt"] = 2
    shutil.rmtree(path)
    path, *_ = _copy(retried_run, tmp_path)
    (path / RAW_RUNS).write_text("".join([*lines[: success + 1], *lines[success + 1 :], json.dumps(copy) + "\n"]))
    rendered = verify_run(path).lines()
    assert any(
        line.startswith(f"{copy['run_id']} (superseded attempt 1): failed: a superseded attempt must be a failed trial")
        for line in rendered
    ), rendered


def test_two_lines_of_one_attempt_in_a_sealed_run_are_an_edit_named_by_its_line(
    retried_run: Path, tmp_path: Path
) -> None:
    """A sealed run's seal tells the copy from the sealed line: an edit of a receipt (exit 1), like every other edit
    of raw_runs.jsonl, not a malformed directory."""
    path, lines, first, _ = _copy(retried_run, tmp_path)
    (path / RAW_RUNS).write_text("".join([*lines, lines[first]]), encoding="utf-8")
    result = runner.invoke(app, ["verify", str(path)])
    assert result.exit_code == 1, result.output
    run_id = json.loads(lines[first])["run_id"]
    wanted = f"{run_id}: raw_runs.jsonl: line {len(lines) + 1} repeats the record sealed as line {first + 1}: a copy"
    assert wanted in result.stdout, result.stdout


def test_attempts_beyond_the_recorded_retry_sessions_are_named(retried_run: Path, tmp_path: Path) -> None:
    path, lines, first, _ = _copy(retried_run, tmp_path)
    manifest = json.loads((path / "run_manifest.json").read_text())
    manifest["sessions"] = [s for s in manifest["sessions"] if not s.get("retry_failed")]
    (path / "run_manifest.json").write_text(json.dumps(manifest))
    run_id = json.loads(lines[first])["run_id"]
    assert (
        f"{run_id}: attempt: attempt 2, but the manifest records 0 --retry-failed sessions" in verify_run(path).lines()
    )


def test_a_run_directory_without_attempts_loads_as_first_attempts() -> None:
    """Lines written before attempts existed have no ``attempt``: each is its episode's first and current."""
    fixture = Path(__file__).parents[1] / "verify" / "fixtures" / "20261201T084019Z-5ad6dd"
    lines = (fixture / RAW_RUNS).read_text(encoding="utf-8").splitlines()
    assert lines and all("attempt" not in json.loads(line) for line in lines)
    attempts = RunDirectory(fixture).read_attempts()
    assert len(attempts.current) == len(lines) and not attempts.superseded
    assert {r.attempt for r in attempts.records} == {1}
    assert "attempt" not in (fixture / TASK_RESULTS).read_text(encoding="utf-8").splitlines()[0].split(",")


@pytest.mark.slow
def test_merge_carries_every_attempt_and_keeps_each_episode_once(tmp_path: Path) -> None:
    """Shard 1 of 2 lost a model call and re-ran its failed trial; the merged run group holds each episode once as
    current, the superseded attempt before it, and verifies."""
    with ScriptedServer("context_trusting", TASKS, faults=FaultPlan(fail_500="at:2")) as server:
        url = server.base_url
        one = run_benchmark(benchmark_request(url, tmp_path, model=MODEL, max_retries=0, shard="1/2", **TWO))
        assert one.manifest.counts.failed == 1
        server.faults = FaultPlan()
        run_benchmark(benchmark_request(url, tmp_path, model=MODEL, resume=str(one.path), retry_failed=True))
        two = run_benchmark(benchmark_request(url, tmp_path, model=MODEL, shard="2/2", **TWO))
    merged = merge_shards(tmp_path, [one.path.name, two.path.name], "merged")
    attempts = merged.read_attempts()
    assert len(attempts.current) == 12 and len({r.run_id for r in attempts.current}) == 12
    (old,) = attempts.superseded
    assert old.failed and old.run_group_id == "merged"
    numbers = [r.attempt for r in attempts.attempts_of(old.run_id)]
    assert numbers == [1, 2]
    manifest = merged.read_manifest()
    assert (manifest.counts.finished, manifest.counts.failed) == (12, 0)
    result = verify_run(merged.path)
    assert result.ok, result.lines()
    assert "## Retried failed trials" in merged.file("benchmark_report.md").read_text(encoding="utf-8")


def test_retry_failed_without_resume_is_refused_by_the_library_too(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkError, match="--retry-failed re-runs the failed trials"):
        run_benchmark(benchmark_request("http://127.0.0.1:9/v1", tmp_path, retry_failed=True))


@pytest.mark.slow
def test_report_shows_the_retries_and_report_write_keeps_the_run_verifying(retried_run: Path, tmp_path: Path) -> None:
    path, *_ = _copy(retried_run, tmp_path)
    printed = runner.invoke(app, ["report", str(path)])
    assert printed.exit_code == 0, printed.output
    assert "## Retried failed trials" in printed.stdout
    assert printed.stdout == (path / "benchmark_report.md").read_text(encoding="utf-8")
    as_json = runner.invoke(app, ["report", str(path), "--format", "json"])
    assert json.loads(as_json.stdout)["retries"]["superseded_attempts"] == 1
    rewritten = runner.invoke(app, ["report", str(path), "--write"])
    assert rewritten.exit_code == 0
    assert verify_run(path).ok


@pytest.mark.slow
def test_the_trace_store_of_a_retry_session_holds_the_current_attempt_and_the_superseded_one(tmp_path: Path) -> None:
    url_db = f"sqlite:///{tmp_path / 'live.db'}"
    with ScriptedServer("context_trusting", TASKS, faults=FaultPlan(fail_500="at:1")) as server:
        args = [a for a in new_run_args(server.base_url, tmp_path / "results") if a != "--no-store"]
        first = runner.invoke(app, [*args, "--database-url", url_db])
        assert first.exit_code == 0, first.output
        path = printed_path(first.stdout)
        server.faults = FaultPlan()
        resume = [a for a in base_args(server.base_url, tmp_path / "results") if a != "--no-store"]
        second = runner.invoke(app, [*resume, "--resume", str(path), "--retry-failed", "--database-url", url_db])
    assert second.exit_code == 0, second.output
    (old,) = RunDirectory(path).read_attempts().superseded
    with Store.open(url_db) as store, store.read_session() as session:
        rows = {r.run_id: r for r in session.scalars(select(EpisodeRow))}
    assert len(rows) == 12
    assert rows[old.run_id].attempt == 2 and not rows[old.run_id].failed
    (summary,) = rows[old.run_id].superseded_attempts or []
    assert summary["attempt"] == 1 and summary["termination_reason"] == "provider_error"
