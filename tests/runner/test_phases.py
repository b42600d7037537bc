"""The runner's seams: plan / open / execute / finalise, recorders, executors and stop rules."""

from __future__ import annotations

import gc
import io
import pickle
from pathlib import Path

import pytest
from rich.console import Console

from contextdelta._collector import YOUNG_THRESHOLD
from contextdelta.rundir import (
    RAW_RUNS,
    REQUIRED_FILES,
    EpisodeRecord,
    RunDirectory,
    RunEnd,
    RunStart,
    RunStatus,
)
from contextdelta.runner import (
    BenchmarkError,
    BenchmarkRequest,
    EpisodeJob,
    Executor,
    ProgressDisplay,
    default_executor,
    execute,
    finalise,
    open_run,
    plan_run,
    run_benchmark,
    run_plan,
    stop_rules,
)
from contextdelta.settings import Settings
from tests.runner.conftest import as_killed, benchmark_request

SMALL = ["order-grinder-refund", "cfg-search-ramp"]


def request(url: str, tmp_path: Path, **overrides: object) -> BenchmarkRequest:
    fields: dict[str, object] = {"task_ids": SMALL, "strategies": ["full_history", "last_n"], "concurrency": 2}
    fields["protection_modes"] = ["unprotected"]
    return benchmark_request(url, tmp_path, **{**fields, **overrides})


class Log:
    """A recorder that writes down what it was told, and what the manifest on disk said at the time."""

    def __init__(self, fail_on_finish: bool = False) -> None:
        self.calls: list[str] = []
        self.episodes: list[str] = []
        self.start_info: RunStart | None = None
        self.end_info: RunEnd | None = None
        self.status_on_disk_at_finish: RunStatus | None = None
        self.fail_on_finish = fail_on_finish

    def start(self, run: RunStart) -> None:
        self.calls.append("start")
        self.start_info = run

    def episode(self, record: EpisodeRecord) -> None:
        self.calls.append("episode")
        self.episodes.append(record.run_id)

    def finish(self, run: RunEnd) -> None:
        self.calls.append("finish")
        self.end_info = run
        self.status_on_disk_at_finish = RunDirectory(run.path).read_manifest().status
        if self.fail_on_finish:
            raise OSError("disk full (simulated)")


@pytest.mark.slow
def test_recorders_see_start_every_episode_then_finish_before_the_manifest_commits(
    oracle_url: str, tmp_path: Path
) -> None:
    log = Log()
    outcome = run_benchmark(request(oracle_url, tmp_path), recorders=[log])
    assert log.calls == ["start", "episode", "episode", "episode", "episode", "finish"]
    assert sorted(log.episodes) == sorted(r.run_id for r in outcome.records)
    assert log.start_info is not None and (log.start_info.planned, log.start_info.pending) == (4, 4)
    assert log.start_info.done == () and not log.start_info.resumed
    assert log.end_info is not None and log.end_info.manifest.status is RunStatus.COMPLETE
    assert (log.end_info.new, len(log.end_info.records)) == (4, 4)
    # the commit comes last: while recorders finished, the manifest on disk still said running
    assert log.status_on_disk_at_finish is RunStatus.RUNNING
    assert RunDirectory(outcome.path).read_manifest().status is RunStatus.COMPLETE
    assert all(outcome.path.joinpath(name).is_file() for name in REQUIRED_FILES)


@pytest.mark.slow
def test_a_failing_recorder_leaves_the_run_incomplete_and_the_others_finish(oracle_url: str, tmp_path: Path) -> None:
    broken, after = Log(fail_on_finish=True), Log()
    outcome = run_benchmark(request(oracle_url, tmp_path), recorders=[broken, after])
    assert after.calls[-1] == "finish"
    (path,) = tmp_path.iterdir()
    directory = RunDirectory(path)
    manifest = directory.read_manifest()
    assert manifest.status is RunStatus.INCOMPLETE  # never claims complete
    assert (
        manifest.stop_reason == "cannot write the run directory (disk full (simulated))" == outcome.manifest.stop_reason
    )
    assert len(directory.read_episodes()) == 4  # nothing recorded is lost; --resume finishes the job


@pytest.mark.slow
def test_resume_tells_recorders_what_earlier_sessions_recorded(oracle_url: str, tmp_path: Path) -> None:
    first = run_benchmark(request(oracle_url, tmp_path))
    raw = first.path / RAW_RUNS
    lines = raw.read_bytes().splitlines(keepends=True)
    raw.write_bytes(b"".join(lines[:3]))
    as_killed(first.path)
    log = Log()
    second = run_benchmark(request(oracle_url, tmp_path, resume=first.path.name, task_ids=None), recorders=[log])
    assert log.start_info is not None and log.start_info.resumed
    assert (len(log.start_info.done), log.start_info.pending) == (3, 1)
    assert log.calls == ["start", "episode", "finish"]
    assert log.end_info is not None and (log.end_info.new, len(log.end_info.records)) == (1, 4)
    assert second.manifest.status is RunStatus.COMPLETE


def test_planning_writes_nothing_and_jobs_are_plain_data(oracle_url: str, tmp_path: Path) -> None:
    plan = plan_run(request(oracle_url, tmp_path), Settings())
    assert list(tmp_path.iterdir()) == []
    assert [s.run_id for s in plan.pending] == [s.run_id for s in plan.specs] and len(plan.specs) == 4
    run = open_run(plan)
    jobs = run.jobs()
    # an executor may ship a job to another process or machine: it must survive pickling unchanged
    assert [pickle.loads(pickle.dumps(job)) for job in jobs] == jobs
    execute(run)
    outcome = finalise(run)
    assert outcome.manifest.status is RunStatus.COMPLETE


class Relay:
    """An executor that runs each episode elsewhere (here: the in-process one) and reports what it ran."""

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.ran: list[str] = []
        self.closed = False

    async def run(self, job: EpisodeJob) -> EpisodeRecord:
        self.ran.append(job.spec.run_id)
        return await self.inner.run(job)

    async def aclose(self) -> None:
        self.closed = True
        await self.inner.aclose()


def test_a_custom_executor_runs_every_episode_and_the_driver_records_them(oracle_url: str, tmp_path: Path) -> None:
    run = open_run(plan_run(request(oracle_url, tmp_path), Settings()))
    relay = Relay(default_executor(run.plan))
    execute(run, relay)
    outcome = finalise(run)
    assert relay.closed and sorted(relay.ran) == sorted(r.run_id for r in outcome.records)
    assert len(RunDirectory(outcome.path).read_episodes()) == 4


class StopAfter:
    """A stop rule: no episode starts once ``n`` finished (the shape of a circuit breaker)."""

    def __init__(self, n: int) -> None:
        self.n, self.seen = n, 0

    def observe(self, record: EpisodeRecord) -> None:
        self.seen += 1

    def stop_reason(self) -> str | None:
        return f"stopped after {self.n} episodes" if self.seen >= self.n else None


def test_a_stop_rule_stops_starting_episodes_and_the_run_says_why(oracle_url: str, tmp_path: Path) -> None:
    run = open_run(plan_run(request(oracle_url, tmp_path, concurrency=1), Settings()))
    execute(run, rules=[*stop_rules(run), StopAfter(1)])
    outcome = finalise(run)
    assert outcome.manifest.status is RunStatus.INCOMPLETE
    assert outcome.manifest.stop_reason == "stopped after 1 episodes"
    assert outcome.manifest.counts.finished == 1


def _files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()}


def test_a_second_session_on_a_run_still_being_written_is_refused_and_changes_nothing(
    oracle_url: str, tmp_path: Path
) -> None:
    run = open_run(plan_run(request(oracle_url, tmp_path, concurrency=1), Settings()))
    execute(run, rules=[*stop_rules(run), StopAfter(1)])  # the first session has not finalised: it still writes
    before = _files(run.directory.path)
    again = request(oracle_url, tmp_path, resume=run.directory.path.name, task_ids=None)
    with pytest.raises(BenchmarkError) as refused:
        run_benchmark(again)
    assert refused.value.exit_code == 2
    assert (
        "being written by another session" in refused.value.message and run.directory.path.name in refused.value.message
    )
    assert _files(run.directory.path) == before
    assert finalise(run).manifest.status is RunStatus.INCOMPLETE
    resumed = run_benchmark(again)  # once the first session ended, the run resumes
    assert resumed.manifest.status is RunStatus.COMPLETE
    assert sorted(r.run_id for r in RunDirectory(resumed.path).read_episodes()) == sorted(
        s.run_id for s in run.plan.specs
    )


def test_a_resume_planned_before_another_session_wrote_the_run_is_refused(oracle_url: str, tmp_path: Path) -> None:
    first = open_run(plan_run(request(oracle_url, tmp_path, concurrency=1), Settings()))
    execute(first, rules=[*stop_rules(first), StopAfter(1)])
    finalise(first)
    again = request(oracle_url, tmp_path, resume=first.directory.path.name, task_ids=None)
    late = plan_run(again, Settings())  # planned with 3 episodes pending...
    assert len(late.pending) == 3
    assert run_benchmark(again).manifest.status is RunStatus.COMPLETE  # ...which another session ran meanwhile
    before = _files(first.directory.path)
    with pytest.raises(BenchmarkError) as refused:
        run_plan(late)
    assert refused.value.exit_code == 2 and "run the same command again" in refused.value.message
    assert _files(first.directory.path) == before  # no episode recorded twice
    assert len(RunDirectory(first.directory.path).read_episodes()) == 4


@pytest.mark.slow
def test_the_progress_display_is_a_recorder(oracle_url: str, tmp_path: Path) -> None:
    buffer = io.StringIO()
    display = ProgressDisplay(Console(file=buffer, width=160, force_terminal=False))
    run_benchmark(request(oracle_url, tmp_path), recorders=[display])
    assert (display.finished, display.succeeded, display.failed) == (4, 4, 0)
    assert "4/4" in buffer.getvalue()


class CollectorProbe(Log):
    """A recorder that writes down the collector's thresholds while the run records its episodes."""

    def __init__(self) -> None:
        super().__init__()
        self.thresholds: list[tuple[int, int, int]] = []

    def episode(self, record: EpisodeRecord) -> None:
        super().episode(record)
        self.thresholds.append(gc.get_threshold())


@pytest.mark.slow
def test_a_run_collects_young_objects_less_often_and_leaves_the_collector_as_it_found_it(
    oracle_url: str, tmp_path: Path
) -> None:
    before = gc.get_threshold()
    probe = CollectorProbe()
    run_benchmark(request(oracle_url, tmp_path), recorders=[probe])
    assert probe.thresholds == [(YOUNG_THRESHOLD, *before[1:])] * 4
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
