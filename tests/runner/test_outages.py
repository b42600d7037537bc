"""Outages and write failures mid-run, against the scripted server's fault injection and a real file-size limit:
the circuit breaker stops starting episodes, the run ends incomplete with a resume hint and exit 3, a failure burst
that ends does not trip it, and a signal while the run is finalised says what state the run is in."""

from __future__ import annotations

import errno
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.rundir import (
    MANIFEST,
    RAW_RUNS,
    RAW_RUNS_RECEIPTS,
    TOOL_EVENTS,
    JsonlWriter,
    RunDirectory,
    RunDirectoryRecorder,
    RunEnd,
    RunManifest,
    RunStart,
    RunStatus,
)
from contextdelta.runner import (
    EXIT_ALL_FAILED,
    EXIT_INCOMPLETE,
    BenchmarkError,
    CircuitBreaker,
    FinaliseInterrupted,
    OpenInterrupted,
    run_benchmark,
)
from contextdelta.testing import serve_scripted
from contextdelta.verify import verify_run
from tests.runner.conftest import SMALL, TASKS, benchmark_request

runner = CliRunner()
TWO = {"strategies": ["full_history", "last_n"], "protection_modes": ["unprotected", "freshness_contract"]}


@pytest.mark.slow
def test_a_dead_endpoint_trips_the_breaker_after_failures_in_a_row(tmp_path: Path) -> None:
    with serve_scripted("oracle", TASKS, in_process=True, fail_500="first:100000") as url:
        outcome = run_benchmark(
            benchmark_request(url, tmp_path, max_retries=0, concurrency=1, max_consecutive_failures=4, **TWO)
        )
    manifest = outcome.manifest
    assert manifest.status is RunStatus.INCOMPLETE
    assert (manifest.counts.finished, manifest.counts.failed, manifest.counts.planned) == (4, 4, 12)
    assert manifest.stop_reason is not None
    assert manifest.stop_reason.startswith("circuit breaker: 4 failed trials in a row; last error: HTTP 500")


@pytest.mark.slow
def test_a_flaky_endpoint_trips_the_share_rule(tmp_path: Path) -> None:
    with serve_scripted("oracle", TASKS, in_process=True, fail_500="every:2") as url:
        outcome = run_benchmark(
            benchmark_request(
                url, tmp_path, max_retries=0, concurrency=1, max_consecutive_failures=1000, max_failed_share=0.3
            )
        )
    manifest = outcome.manifest
    assert manifest.status is RunStatus.INCOMPLETE and manifest.stop_reason is not None
    assert "episodes of this session are failed trials (more than the --max-failed-share 0.3, 30%)" in (
        manifest.stop_reason
    )
    assert 20 <= manifest.counts.finished < manifest.counts.planned


@pytest.mark.slow
def test_a_failure_burst_that_ends_does_not_trip_the_breaker(tmp_path: Path) -> None:
    with serve_scripted(
        "oracle", TASKS, in_process=True, fail_500="at:3,4"
    ) as url:  # two episodes fail in a row, then it is over
        outcome = run_benchmark(
            benchmark_request(url, tmp_path, max_retries=0, concurrency=1, max_consecutive_failures=3, **TWO)
        )
    assert outcome.manifest.status is RunStatus.COMPLETE
    assert outcome.manifest.counts.failed == 2 and outcome.manifest.counts.finished == 12


def test_the_breaker_counts_outages_only() -> None:
    """A context window that overflows (or a spent budget) is a property of the condition measured, not an
    outage: it never trips the breaker, and a success resets the run of failures."""
    breaker = CircuitBreaker(max_consecutive=2, max_failed_share=1.0)

    class Fake:
        def __init__(self, termination: str) -> None:
            from contextdelta.agent import TerminationReason

            self.trace = type("T", (), {"termination": TerminationReason(termination), "error": "boom"})()

    for termination in ("context_window_exceeded", "budget_exceeded", "context_window_exceeded", "provider_error"):
        breaker.observe(Fake(termination))  # type: ignore[arg-type]
        assert breaker.stop_reason() is None
    breaker.observe(Fake("final_answer"))  # type: ignore[arg-type]
    breaker.observe(Fake("provider_error"))  # type: ignore[arg-type]
    assert breaker.stop_reason() is None
    breaker.observe(Fake("harness_error"))  # type: ignore[arg-type]
    assert breaker.stop_reason() == "circuit breaker: 2 failed trials in a row; last error: boom"


def test_the_share_rule_names_its_threshold_as_given() -> None:
    """--max-failed-share 0.125 said "(more than 12%)" and 0.005 "(more than 0%)": the share as given, and exactly."""

    class Fake:
        def __init__(self, termination: str) -> None:
            from contextdelta.agent import TerminationReason

            self.trace = type("T", (), {"termination": TerminationReason(termination), "error": None})()

    for share, text in ((0.125, "0.125, 12.5%"), (0.005, "0.005, 0.5%")):
        breaker = CircuitBreaker(max_consecutive=100, max_failed_share=share, min_finished=8)
        for termination in ["provider_error", "final_answer"] * 4:
            breaker.observe(Fake(termination))  # type: ignore[arg-type]
        reason = breaker.stop_reason()
        assert reason is not None and reason.endswith(f"(more than the --max-failed-share {text})"), reason


def test_one_failed_trial_in_a_row_is_singular() -> None:
    breaker = CircuitBreaker(max_consecutive=1, max_failed_share=1.0)

    class Fake:
        def __init__(self) -> None:
            from contextdelta.agent import TerminationReason

            self.trace = type("T", (), {"termination": TerminationReason("provider_error"), "error": "HTTP 500"})()

    breaker.observe(Fake())  # type: ignore[arg-type]
    assert breaker.stop_reason() == "circuit breaker: 1 failed trial in a row; last error: HTTP 500"


def test_the_cli_exits_3_and_says_how_to_resume(tmp_path: Path) -> None:
    with serve_scripted("oracle", TASKS, in_process=True, fail_500="first:100000") as url:
        args = ["run-benchmark", "--tasks", str(TASKS), "--base-url", url, "--model", "scripted-oracle"]
        args += ["--results-dir", str(tmp_path), "--task-ids", ",".join(SMALL), "--repeats", "1", "--quiet"]
        args += ["--no-store", "--max-retries", "0", "--concurrency", "1", "--max-consecutive-failures", "3"]
        result = runner.invoke(app, args)
    assert result.exit_code == EXIT_INCOMPLETE == 3
    path = result.stdout.strip().splitlines()[-1]
    message = " ".join(result.stderr.split())
    assert "is incomplete: circuit breaker: 3 failed trials in a row" in message
    assert f"Resume it with: contextdelta run-benchmark --resume {path}" in message


def _one_small_pass(url: str, results: Path) -> list[str]:
    """``run-benchmark`` over SMALL once, one condition, no retries, with a breaker that never trips."""
    args = ["run-benchmark", "--tasks", str(TASKS), "--base-url", url, "--model", "scripted-oracle"]
    args += ["--results-dir", str(results), "--task-ids", ",".join(SMALL), "--repeats", "1", "--quiet"]
    args += ["--no-store", "--max-retries", "0", "--concurrency", "1", "--strategies", "full_history"]
    return [*args, "--protection-modes", "unprotected", "--max-consecutive-failures", "1000"]


def test_a_run_whose_every_episode_is_a_failed_trial_exits_4_naming_them(tmp_path: Path) -> None:
    """Below the breaker's thresholds every episode can fail and the run still finish: that is no result, and a
    script that checks only the exit status must see it (as it sees the breaker's exit 3)."""
    with serve_scripted("oracle", TASKS, in_process=True, fail_500="first:100000") as url:
        result = runner.invoke(app, _one_small_pass(url, tmp_path))
    assert result.exit_code == EXIT_ALL_FAILED == 4, result.output
    path = Path(result.stdout.strip().splitlines()[-1])  # the run directory is still the last line
    manifest = RunDirectory(path).read_manifest()
    assert manifest.status is RunStatus.COMPLETE and manifest.counts.failed == manifest.counts.finished == len(SMALL)
    message = " ".join(result.stderr.split())
    assert f"error: every episode of run {manifest.run_group_id} is a failed trial ({len(SMALL)} provider_error)" in (
        message
    )
    assert "no episode has a verdict; last error: HTTP 500" in message
    assert f"Each is recorded in {path / 'raw_runs.jsonl'} and task_results.csv (column termination_reason)" in message
    assert f"Re-run its {len(SMALL)} failed trials with: contextdelta run-benchmark --resume {path} --retry-failed" in (
        message
    )


def test_a_run_with_a_verdict_beside_its_failed_trials_exits_0(tmp_path: Path) -> None:
    with serve_scripted("oracle", TASKS, in_process=True, fail_500="first:1") as url:
        result = runner.invoke(app, _one_small_pass(url, tmp_path))
    assert result.exit_code == 0, result.output
    manifest = RunDirectory(Path(result.stdout.strip().splitlines()[-1])).read_manifest()
    assert 0 < manifest.counts.failed < manifest.counts.finished
    assert "every episode" not in result.stderr


@pytest.mark.slow
def test_a_write_failure_mid_run_leaves_an_incomplete_run_that_resumes_to_match(tmp_path: Path) -> None:
    """The file system refuses writes past a size (RLIMIT_FSIZE, as a full disk refuses them): the run stops
    starting episodes, ends incomplete with the error and the resume hint, exit 3; resumed without the limit it
    completes and verifies."""
    limit = 400_000

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing us
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    with serve_scripted("oracle", TASKS) as url:
        base = [sys.executable, "-m", "contextdelta", "run-benchmark", "--tasks", str(TASKS), "--base-url", url]
        base += ["--model", "scripted-oracle", "--results-dir", str(tmp_path), "--quiet", "--no-store"]
        first = subprocess.run(
            [*base, "--task-ids", ",".join(SMALL), "--repeats", "1", "--strategies", "full_history,last_n"],
            capture_output=True,
            text=True,
            preexec_fn=limited,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
            timeout=300,
        )
        assert first.returncode == EXIT_INCOMPLETE, first.stderr
        path = Path(first.stdout.strip().splitlines()[-1])
        message = " ".join(first.stderr.split())
        # the file the run could not write is named: the write error of an open file carries no file name
        assert f"is incomplete: cannot write the run directory (File too large: {path / RAW_RUNS})" in message, message
        assert f"Resume it with: contextdelta run-benchmark --resume {path}" in message
        assert "Traceback" not in first.stderr
        manifest = RunDirectory(path).read_manifest()
        assert manifest.status is RunStatus.INCOMPLETE and 0 < manifest.counts.finished < 12
        second = subprocess.run([*base, "--resume", str(path)], capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    assert RunDirectory(path).read_manifest().status is RunStatus.COMPLETE
    assert verify_run(path).ok


class _SignalAtFinish:
    """A recorder whose ``finish`` receives a signal, as a user's Ctrl-C (or a kill) during finalisation would."""

    def __init__(self, signum: int) -> None:
        self.signum = signum

    def start(self, run: RunStart) -> None:
        pass

    def episode(self, record: object) -> None:
        pass

    def finish(self, run: RunEnd) -> None:
        signal.raise_signal(self.signum)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_finalisation_says_what_state_the_run_is_in(
    oracle_url: str, tmp_path: Path, signum: int
) -> None:
    with pytest.raises(FinaliseInterrupted) as caught:
        run_benchmark(
            benchmark_request(oracle_url, tmp_path, task_ids=SMALL[:1], strategies=["full_history"]),
            recorders=[_SignalAtFinish(signum)],
        )
    (path,) = list(tmp_path.iterdir())
    assert caught.value.exit_code == 130
    assert caught.value.message == (
        f"interrupted while finalising run {path.name}: run_manifest.json says 'running'; raw_runs.jsonl keeps the "
        f"2 recorded episodes. `contextdelta run-benchmark --resume {path}` rebuilds the derived files and runs "
        "what is missing"
    )
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # restored


class _SignalAfterLastEpisode:
    """A recorder that receives SIGINT right after the last planned episode was recorded (a Ctrl-C while the driver
    winds down): nothing is missing, so the run is finalised as complete and says the signal arrived."""

    def __init__(self) -> None:
        self.planned = 0
        self.seen = 0

    def start(self, run: RunStart) -> None:
        self.planned = run.pending

    def episode(self, record: object) -> None:
        self.seen += 1
        if self.seen == self.planned:
            signal.raise_signal(signal.SIGINT)

    def finish(self, run: RunEnd) -> None:
        pass


def test_a_signal_after_the_last_episode_still_completes_the_run_and_says_so(oracle_url: str, tmp_path: Path) -> None:
    outcome = run_benchmark(
        benchmark_request(oracle_url, tmp_path, task_ids=SMALL[:1], strategies=["full_history"], concurrency=1),
        recorders=[_SignalAfterLastEpisode()],
    )
    assert outcome.manifest.status is RunStatus.COMPLETE and outcome.manifest.stop_reason is None
    assert outcome.note == (
        "interrupted by SIGINT after every episode had finished: the run was finalised and is complete"
    )
    assert outcome.manifest.sessions[-1]["late_stop"] == "interrupted by SIGINT"
    assert verify_run(outcome.path).ok


_TERM_WHILE_CLOSING = """
import signal, sys
from pathlib import Path
from contextdelta.runner import default_executor, plan_run, run_plan
from contextdelta.settings import Settings
from tests.runner.conftest import benchmark_request

class TermWhileClosing:  # SIGTERM while the executor shuts down: the driver no longer watches signals
    def __init__(self, inner):
        self.inner = inner
    async def run(self, job):
        return await self.inner.run(job)
    async def aclose(self):
        await self.inner.aclose()
        signal.raise_signal(signal.SIGTERM)

request = benchmark_request(sys.argv[1], Path(sys.argv[2]), task_ids=["cfg-search-ramp"],
                            strategies=["full_history"], protection_modes=["unprotected"])
plan = plan_run(request, Settings())
outcome = run_plan(plan, executor=TermWhileClosing(default_executor(plan)))
print(outcome.manifest.status.value, outcome.manifest.sessions[-1].get("late_stop"))
"""


def test_sigterm_while_the_executor_closes_is_handled_as_sigint_not_a_silent_death(
    oracle_url: str, tmp_path: Path
) -> None:
    """Once the driver's signal receiver closed, SIGTERM was back at its default: the process died at once (exit
    -15), the run left `running` with its derived files unwritten and nothing printed."""
    results = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-c", _TERM_WHILE_CLOSING, oracle_url, str(results)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "CONTEXTDELTA_WORKERS": "1"},
        timeout=300,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split() == ["complete", "interrupted", "by", "SIGTERM"], done.stdout
    (path,) = list(results.iterdir())
    assert RunDirectory(path).read_manifest().status is RunStatus.COMPLETE


class _SignalAtStart:
    """A recorder whose ``start`` receives a signal: a Ctrl-C (or a kill) while the run directory is opened."""

    def __init__(self, signum: int) -> None:
        self.signum = signum

    def start(self, run: RunStart) -> None:
        signal.raise_signal(self.signum)

    def episode(self, record: object) -> None:
        pass

    def finish(self, run: RunEnd) -> None:
        pass


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_run_opens_names_the_run_to_resume(oracle_url: str, tmp_path: Path, signum: int) -> None:
    """SIGTERM killed the process without a word (SIGINT exited 130 without one) once the run directory existed: the
    user was left with a `running` run whose id was never printed. Now both end with the run and its resume line."""
    fields = {"task_ids": SMALL[:1], "strategies": ["full_history"], "protection_modes": ["unprotected"]}
    with pytest.raises(OpenInterrupted) as caught:
        run_benchmark(benchmark_request(oracle_url, tmp_path, **fields), recorders=[_SignalAtStart(signum)])
    (path,) = list(tmp_path.iterdir())
    assert caught.value.exit_code == 130
    assert caught.value.message == (
        f"interrupted by {signal.Signals(signum).name} while opening run {path.name}, before any episode of this "
        f"session ran; `contextdelta run-benchmark --resume {path}` runs what is missing"
    )
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # restored
    resumed = run_benchmark(benchmark_request(oracle_url, tmp_path, task_ids=None, resume=str(path)))
    assert resumed.manifest.status is RunStatus.COMPLETE and resumed.manifest.counts.finished == 1
    assert verify_run(path).lines() == ["MATCH"]


@pytest.mark.slow
def test_a_full_disk_that_keeps_the_manifest_from_being_written_says_what_stopped_the_run(
    oracle_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills while an episode is recorded, and stays full: the final manifest cannot be written either. The
    error names both files (the record that stopped the run, the manifest), and the run resumes once there is
    room again."""
    real_episode, real_manifest = RunDirectoryRecorder.episode, RunDirectory.write_manifest
    calls = [0]

    def episode(self: RunDirectoryRecorder, record: object) -> None:
        calls[0] += 1
        if calls[0] == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.directory.file(RAW_RUNS)))
        real_episode(self, record)  # type: ignore[arg-type]

    def write_manifest(self: RunDirectory, manifest: RunManifest) -> RunManifest:
        if calls[0] >= 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.file(MANIFEST)))
        return real_manifest(self, manifest)

    fields = {"task_ids": SMALL[:2], "strategies": ["full_history"], "concurrency": 1}
    with monkeypatch.context() as patch:
        patch.setattr(RunDirectoryRecorder, "episode", episode)
        patch.setattr(RunDirectory, "write_manifest", write_manifest)
        with pytest.raises(BenchmarkError) as caught:
            run_benchmark(benchmark_request(oracle_url, tmp_path, protection_modes=["unprotected"], **fields))
    (path,) = list(tmp_path.iterdir())
    assert caught.value.exit_code == EXIT_INCOMPLETE
    assert caught.value.message.startswith(
        f"run {path.name} could not be finalised: cannot write run_manifest.json (No space left on device: "
        f"{path / MANIFEST}) (the run had stopped: cannot write the run directory (No space left on device: "
        f"{path / RAW_RUNS})); run_manifest.json says 'running'; raw_runs.jsonl keeps the 1 recorded episodes"
    ), caught.value.message
    resumed = run_benchmark(benchmark_request(oracle_url, tmp_path, task_ids=None, resume=str(path)))
    assert resumed.manifest.status is RunStatus.COMPLETE and resumed.manifest.counts.finished == 2
    assert verify_run(path).lines() == ["MATCH"]


@pytest.mark.slow
@pytest.mark.parametrize("fails", ["receipt", "tool_events"])
def test_a_disk_that_fills_between_a_record_and_its_receipt_keeps_no_half_recorded_episode(
    oracle_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: str
) -> None:
    """The disk fills after an episode's record reached ``raw_runs.jsonl`` but before its receipt (or its tool event
    lines) did, then has room again for the final manifest: the episode is not kept anywhere (it runs again on
    resume), so the run ends incomplete, verifies MATCH, and resumes to a complete run without a refusal."""
    target = RAW_RUNS_RECEIPTS if fails == "receipt" else TOOL_EVENTS
    real_write = JsonlWriter._write
    calls = [0]

    def write(self: JsonlWriter, text: str) -> None:
        if self.path.name == target:
            calls[0] += 1
            if calls[0] == 2:
                raise OSError(errno.ENOSPC, "No space left on device", str(self.path))
        real_write(self, text)

    fields = {"task_ids": SMALL[:2], "strategies": ["full_history"], "concurrency": 1}
    with monkeypatch.context() as patch:
        patch.setattr(JsonlWriter, "_write", write)
        outcome = run_benchmark(benchmark_request(oracle_url, tmp_path, protection_modes=["unprotected"], **fields))
    path = outcome.path
    manifest = RunDirectory(path).read_manifest()
    assert manifest.status is RunStatus.INCOMPLETE and manifest.counts.finished == 1
    assert manifest.stop_reason is not None and "No space left on device" in manifest.stop_reason
    assert (path / RAW_RUNS).read_bytes().count(b"\n") == 1  # the episode whose receipt failed is not kept
    assert verify_run(path, allow_incomplete=True).lines() == ["MATCH"]
    resumed = run_benchmark(benchmark_request(oracle_url, tmp_path, task_ids=None, resume=str(path)))
    assert resumed.manifest.status is RunStatus.COMPLETE and resumed.manifest.counts.finished == 2
    assert verify_run(path).lines() == ["MATCH"]


@pytest.mark.slow
def test_a_full_disk_while_a_run_opens_is_a_named_error_not_a_traceback(
    oracle_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk is full when a new run creates its directory (nothing is written: exit 2), or when a resume writes
    its ``running`` manifest (the run stays as it was: exit 3 with the resume line); both were an OSError out of
    the command (a traceback). Once there is room the resume completes the run."""

    def full(self: RunDirectory, *args: object) -> object:
        raise OSError(errno.ENOSPC, "No space left on device", str(self.file(MANIFEST)))

    fields = {"task_ids": SMALL[:1], "strategies": ["full_history"], "protection_modes": ["unprotected"]}
    with monkeypatch.context() as patch:
        patch.setattr(RunDirectory, "create", full)
        with pytest.raises(BenchmarkError) as caught:
            run_benchmark(benchmark_request(oracle_url, tmp_path, **fields))
    assert caught.value.exit_code == 2
    assert caught.value.message.startswith(f"cannot create a run directory in {tmp_path}: No space left on device")
    assert caught.value.message.endswith("nothing was written")
    assert [p for p in tmp_path.iterdir() if not p.name.startswith(".")] == []

    path = run_benchmark(benchmark_request(oracle_url, tmp_path, **fields)).path
    before = {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()}
    with monkeypatch.context() as patch:
        patch.setattr(RunDirectory, "write_manifest", full)
        with pytest.raises(BenchmarkError) as caught:
            run_benchmark(benchmark_request(oracle_url, tmp_path, task_ids=None, resume=str(path)))
    assert caught.value.exit_code == EXIT_INCOMPLETE
    assert caught.value.message == (
        f"cannot open run {path.name}: No space left on device: {path / MANIFEST}; this session ran no episode: "
        f"`contextdelta run-benchmark --resume {path}` goes on once there is room"
    )
    assert {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()} == before
    resumed = run_benchmark(benchmark_request(oracle_url, tmp_path, task_ids=None, resume=str(path)))
    assert resumed.manifest.status is RunStatus.COMPLETE
    assert verify_run(path).lines() == ["MATCH"]
