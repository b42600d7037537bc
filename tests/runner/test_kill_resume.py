"""SIGKILL at random points of a run and of its finalisation, again and again: after ``--resume`` the run directory
verifies MATCH and the trace store holds every episode exactly once, as recorded.

A small matrix runs against the scripted server (real HTTP, a few milliseconds per reply) in a subprocess of the
real command line, with a trace store. Each session is killed (SIGKILL: no handler runs) at a random moment once
it has opened the run (its session is in the manifest): while episodes run, or once every episode is recorded, in
the finalisation (derived files, reports, the store, the manifest). Then it is resumed, until at least ten kills
landed; the last resume runs to the end. A second sweep cuts the same run at named moments instead
(``kill_points.py``), one per session, so that every one of them is hit on every run of the suite.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.rundir import RAW_RUNS, RAW_RUNS_RECEIPTS, RunDirectory, RunStatus
from contextdelta.runner import run_benchmark
from contextdelta.testing import serve_scripted
from contextdelta.verify import verify_run
from tests.runner.conftest import SMALL, TASKS, as_killed, benchmark_request
from tests.runner.kill_points import POINT


def assert_stored_once(database: str, group: str, records: dict[str, Any]) -> None:
    """The trace store holds each of the run's episodes exactly once, with its record's digest, and the run group
    as complete with all of them."""
    from contextdelta.store import record_sha256

    engine = create_engine(database)
    with engine.connect() as connection:
        rows = connection.execute(
            text("SELECT run_id, record_sha256 FROM episodes WHERE run_group_id = :group"), {"group": group}
        ).all()
        finished = connection.execute(
            text("SELECT finished, status FROM run_groups WHERE id = :group"), {"group": group}
        ).one()
    engine.dispose()
    assert sorted(run_id for run_id, _ in rows) == sorted(records)  # each episode stored exactly once
    assert {run_id: digest for run_id, digest in rows} == {k: record_sha256(r) for k, r in records.items()}
    assert tuple(finished) == (len(records), "complete")


PLANNED = len(SMALL) * 2 * 2  # tasks x strategies x modes, one repeat
KILLS = 10


def _sessions(path: Path) -> int:
    try:
        return len(json.loads((path / "run_manifest.json").read_text())["sessions"])
    except (OSError, ValueError, KeyError):
        return 0  # not written yet, or being replaced


def _recorded(path: Path) -> int:
    try:
        return (path / RAW_RUNS).read_bytes().count(b"\n")
    except OSError:
        return 0


def _wait(condition: object, process: subprocess.Popen[bytes], timeout_s: float = 60.0) -> bool:
    """Poll ``condition`` until it holds (True) or the process ended (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        if process.poll() is not None:
            return False
        time.sleep(0.01)
    raise AssertionError("the session neither got there nor ended")


@pytest.mark.slow
def test_sigkill_during_runs_and_finalisations_then_resume_gives_a_verified_run_and_a_complete_store(
    tmp_path: Path,
) -> None:
    rng = random.Random(20260312)
    results = tmp_path / "results"
    database = f"sqlite:///{tmp_path / 'store.db'}"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "CONTEXTDELTA_WORKERS": "1"}
    kills: list[str] = []
    with serve_scripted("oracle", TASKS, latency_ms=15) as url:
        common = ["--base-url", url, "--model", "scripted-oracle", "--quiet", "--database-url", database]
        first = [
            *("run-benchmark", "--tasks", str(TASKS), "--results-dir", str(results)),
            *("--task-ids", ",".join(SMALL), "--strategies", "full_history,last_n", "--repeats", "1"),
            *("--concurrency", "2", *common),
        ]
        path: Path | None = None
        for _ in range(40):
            args = first if path is None else ["run-benchmark", "--resume", str(path), *common]
            before = _sessions(path) if path is not None else 0
            process = subprocess.Popen([sys.executable, "-m", "contextdelta", *args], env=env, stdout=subprocess.PIPE)
            if path is None:
                assert _wait(lambda: any((d / "run_manifest.json").exists() for d in results.glob("*")), process)
                (path,) = results.iterdir()
            opened = path
            if len(kills) < KILLS and _wait(lambda p=opened, b=before: _sessions(p) > b, process):
                if _recorded(opened) < PLANNED and rng.random() < 0.5:
                    time.sleep(rng.uniform(0.0, 1.0))  # while episodes run
                else:
                    _wait(lambda p=opened: _recorded(p) >= PLANNED, process)
                    time.sleep(rng.uniform(0.0, 0.4))  # in the finalisation
                if process.poll() is None:
                    phase = "run" if _recorded(opened) < PLANNED else "finalisation"
                    os.kill(process.pid, signal.SIGKILL)
                    kills.append(phase)
            out, _ = process.communicate(timeout=120)
            if len(kills) >= KILLS and process.returncode == 0:
                assert out.decode().strip().splitlines()[-1] == str(path)
                break
        else:
            raise AssertionError(f"no clean end after {kills}")
    assert len(kills) >= KILLS and {"run", "finalisation"} <= set(kills), kills
    assert path is not None
    directory = RunDirectory(path)
    manifest = directory.read_manifest()
    assert manifest.status is RunStatus.COMPLETE and manifest.counts.finished == PLANNED
    assert len(manifest.sessions) >= KILLS + 1
    result = verify_run(path)
    assert result.lines() == ["MATCH"], result.lines()[:10]
    records = {r.run_id: r for r in directory.read_episodes()}
    assert len(records) == PLANNED
    assert_stored_once(database, manifest.run_group_id, records)


def test_resuming_a_complete_run_prints_no_unclosed_connection_warning(tmp_path: Path) -> None:
    """Nothing is left to run, so no executor takes the endpoint check's provider; it is closed all the same (an
    unclosed aiohttp pool prints "Unclosed client session" / "Unclosed connector" on the user's terminal)."""
    results = tmp_path / "results"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "CONTEXTDELTA_WORKERS": "1"}
    with serve_scripted("oracle", TASKS) as url:
        common = ["--base-url", url, "--model", "scripted-oracle", "--quiet", "--no-store"]
        first = [
            *("run-benchmark", "--tasks", str(TASKS), "--results-dir", str(results), "--task-ids", SMALL[2]),
            *("--strategies", "full_history", "--protection-modes", "unprotected", "--repeats", "1", *common),
        ]
        done = subprocess.run([sys.executable, "-m", "contextdelta", *first], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        path = done.stdout.strip().splitlines()[-1]
        for workers in ("1", "2"):
            again = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "contextdelta",
                    "run-benchmark",
                    "--resume",
                    path,
                    "--workers",
                    workers,
                    *common,
                ],
                env=env,
                capture_output=True,
                text=True,
            )
            assert again.returncode == 0, again.stderr
            assert again.stdout.strip().splitlines()[-1] == path
            assert "Unclosed" not in again.stderr, again.stderr


@pytest.mark.slow
def test_a_resume_repairs_what_a_kill_left_and_says_so_on_the_command_line(oracle_url: str, tmp_path: Path) -> None:
    """A torn last line of raw_runs.jsonl, a record without its receipt and an atomic write's temp file are put right
    when the run opens again, and the user hears what was repaired (stderr, and the session in the manifest)."""
    first = run_benchmark(
        benchmark_request(
            oracle_url, tmp_path, task_ids=SMALL[:2], strategies=["full_history"], protection_modes=["unprotected"]
        )
    )
    path = first.path
    lines = (path / RAW_RUNS).read_bytes().splitlines(keepends=True)
    (path / RAW_RUNS).write_bytes(lines[0] + lines[1][:300])  # killed while the second record was written
    receipts = (path / RAW_RUNS_RECEIPTS).read_bytes().splitlines(keepends=True)
    (path / RAW_RUNS_RECEIPTS).write_bytes(b"")  # ... and before the first one's receipt
    as_killed(path)  # in the first session: its manifest sealed no receipt
    (path / ".task_results.csv.x1y2.tmp").write_text("half")
    assert len(receipts) == 2
    result = CliRunner().invoke(
        app,
        [
            *("run-benchmark", "--resume", str(path), "--base-url", oracle_url),
            *("--model", "scripted-oracle", "--quiet", "--no-store"),
        ],
    )
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    name = path.name
    assert f"repaired: run {name}: raw_runs.jsonl: cut a torn last line (300 bytes" in said
    assert f"repaired: run {name}: raw_runs.receipts.jsonl: derived 1 missing receipt from raw_runs.jsonl" in said
    assert (
        f"repaired: run {name}: removed the temp files of atomic writes cut short: .task_results.csv.x1y2.tmp" in said
    )
    manifest = RunDirectory(path).read_manifest()
    assert [len(s.get("repairs", [])) for s in manifest.sessions] == [0, 3]
    assert (path / RAW_RUNS_RECEIPTS).read_bytes().splitlines(keepends=True)[0] == receipts[0]  # re-derived, the same
    assert verify_run(path).lines() == ["MATCH"]


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_sigkill_at_each_named_moment_then_resume_gives_a_verified_run_and_a_complete_store(tmp_path: Path) -> None:
    """The same run cut by SIGKILL at one named moment per session (``tests/runner/kill_points.py``): while its
    directory is created, once it opened, half way through a record, between a record and its receipt, inside a
    trace store transaction, while the reports are written, while the final manifest is sealed. Each resume repairs
    what the kill left (and records what it repaired), runs only what is missing, and the last one ends with a run
    that verifies MATCH and a store that holds each episode once, as recorded."""
    results = tmp_path / "results"
    database = f"sqlite:///{tmp_path / 'store.db'}"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "CONTEXTDELTA_WORKERS": "1"}
    planned = 4
    with serve_scripted("oracle", TASKS) as url:
        common = ["--base-url", url, "--model", "scripted-oracle", "--quiet", "--database-url", database]
        first = [
            *("run-benchmark", "--tasks", str(TASKS), "--results-dir", str(results), "--concurrency", "1"),
            *("--task-ids", ",".join(SMALL[:2]), "--strategies", "full_history,last_n", "--repeats", "1"),
            *("--protection-modes", "unprotected", *common),
        ]

        def session(args: list[str], point: str | None) -> subprocess.CompletedProcess[str]:
            command = [sys.executable, "-m", "tests.runner.kill_points" if point else "contextdelta", *args]
            extra = {POINT: point} if point else {}
            return subprocess.run(command, env={**env, **extra}, cwd=ROOT, capture_output=True, text=True, timeout=180)

        killed = session(first, "creating")
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        assert [p.name for p in results.iterdir() if not p.name.startswith(".")] == []  # no half-made run directory
        killed = session(first, "opened")
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        (path,) = [p for p in results.iterdir() if not p.name.startswith(".")]
        resume = ["run-benchmark", "--resume", str(path), *common]
        for point in ("torn-record", "before-receipt", "store-commit", "report", "seal"):
            killed = session(resume, point)
            assert killed.returncode == -signal.SIGKILL, (point, killed.stderr)
            if point == "torn-record":
                assert not (path / RAW_RUNS).read_bytes().endswith(b"\n")
        done = session(resume, None)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == str(path)
    directory = RunDirectory(path)
    manifest = directory.read_manifest()
    assert manifest.status is RunStatus.COMPLETE and manifest.counts.finished == planned
    repairs = [s.get("repairs", []) for s in manifest.sessions]
    assert len(repairs) == 7  # opened, five resumes killed, the last one
    assert any("raw_runs.jsonl: cut a torn last line" in r for r in repairs[2]), repairs
    assert any("raw_runs.receipts.jsonl: derived 1 missing receipt" in r for r in repairs[3]), repairs
    assert verify_run(path).lines() == ["MATCH"]
    records = {r.run_id: r for r in directory.read_episodes()}
    assert len(records) == planned == (path / RAW_RUNS).read_bytes().count(b"\n")  # each episode recorded once
    assert_stored_once(database, manifest.run_group_id, records)


@pytest.mark.slow
def test_a_run_killed_while_its_directory_was_created_leaves_a_folder_the_next_run_removes(tmp_path: Path) -> None:
    """SIGKILL while the new run directory is built in its hidden ``.ID.creating`` folder: nothing under the run's
    name, and the hidden folder (task snapshot, manifest) stays behind. The next run-benchmark in that results
    folder removes it and says so; it never removes one that a live run holds."""
    results = tmp_path / "results"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "CONTEXTDELTA_WORKERS": "1"}
    with serve_scripted("oracle", TASKS) as url:
        args = [
            *("run-benchmark", "--tasks", str(TASKS), "--results-dir", str(results), "--task-ids", SMALL[0]),
            *("--strategies", "full_history", "--protection-modes", "unprotected", "--repeats", "1", "--no-store"),
            *("--base-url", url, "--model", "scripted-oracle", "--quiet"),
        ]
        killed = subprocess.run(
            [sys.executable, "-m", "tests.runner.kill_points", *args],
            env={**env, POINT: "creating"},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        (left,) = results.iterdir()
        assert left.name.startswith(".") and left.name.endswith(".creating") and (left / "run_manifest.json").is_file()
        never = CliRunner().invoke(
            app, ["run-benchmark", "--resume", left.name[1 : -len(".creating")], "--results-dir", str(results)]
        )
        assert never.exit_code == 2 and "that run was never created" in " ".join(never.output.split()), never.output
        old = time.time() - 3600
        os.utime(left, (old, old))
        done = subprocess.run(
            [sys.executable, "-m", "contextdelta", *args],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert f"removed {left}: the hidden folder left by a run-benchmark killed before its run directory existed" in said
    (run,) = results.iterdir()
    assert not run.name.startswith(".") and done.stdout.strip().splitlines()[-1] == str(run)
    assert any("removed" in r for r in RunDirectory(run).read_manifest().sessions[0]["repairs"])


@pytest.mark.slow
@pytest.mark.parametrize("name", [RAW_RUNS, "tool_events.jsonl", RAW_RUNS_RECEIPTS])
@pytest.mark.parametrize("kind", ["link", "fifo", "folder"])
def test_a_resume_never_writes_through_a_link_or_into_a_fifo(
    oracle_url: str, tmp_path: Path, name: str, kind: str
) -> None:
    """A killed run whose raw_runs.jsonl (or another file the run appends to) was replaced by a symbolic link to a
    file outside the run directory: the resume appended its episodes to that outside file, finished "complete", and
    left a run that verify refuses. Now it refuses first (exit 2), naming the entry, and changes nothing."""
    first = run_benchmark(
        benchmark_request(
            oracle_url, tmp_path, task_ids=SMALL[:2], strategies=["full_history"], protection_modes=["unprotected"]
        )
    )
    path = first.path
    lines = (path / RAW_RUNS).read_bytes().splitlines(keepends=True)
    (path / RAW_RUNS).write_bytes(lines[0])
    as_killed(path)
    outside = tmp_path / f"outside-{name}"
    (path / name).rename(outside)
    if kind == "link":
        (path / name).symlink_to(outside)
    elif kind == "fifo":
        os.mkfifo(path / name)
    else:  # the resume crashed (IsADirectoryError) half way, leaving a finished run "running"
        (path / name).mkdir()
    before = outside.read_bytes()
    result = CliRunner().invoke(
        app,
        [
            *("run-benchmark", "--resume", str(path), "--base-url", oracle_url),
            *("--model", "scripted-oracle", "--quiet", "--no-store"),
        ],
    )
    said = " ".join(result.output.split())
    assert result.exit_code == 2, said
    what = {
        "link": f"a symbolic link to {outside}",
        "fifo": "a FIFO (named pipe)",
        "folder": "a folder where the run writes a file",
    }[kind]
    assert f"{path / name} is {what}, not what the run wrote there" in said
    assert "nothing was changed" in said
    assert outside.read_bytes() == before
    assert RunDirectory(path).read_manifest().status is RunStatus.RUNNING


@pytest.mark.slow
def test_a_resume_refuses_a_run_directory_holding_entries_no_run_writes(oracle_url: str, tmp_path: Path) -> None:
    """The next manifest write seals every file of the run directory: a note (or a folder) put into a killed run was
    sealed by its resume as one of the run's files, and verify then said MATCH. Now the resume refuses, naming
    them, and changes nothing; once they are moved out it resumes."""
    first = run_benchmark(
        benchmark_request(
            oracle_url, tmp_path, task_ids=SMALL[:2], strategies=["full_history"], protection_modes=["unprotected"]
        )
    )
    path = first.path
    (path / RAW_RUNS).write_bytes((path / RAW_RUNS).read_bytes().splitlines(keepends=True)[0])
    as_killed(path)
    (path / "notes.txt").write_text("mine\n")
    (path / "extra").mkdir()
    (path / "extra" / "a.json").write_text("{}\n")
    before = {p.relative_to(path): p.read_bytes() for p in path.rglob("*") if p.is_file()}
    args = [
        *("run-benchmark", "--resume", str(path), "--base-url", oracle_url),
        *("--model", "scripted-oracle", "--quiet", "--no-store"),
    ]
    result = CliRunner().invoke(app, args)
    said = " ".join(result.output.split())
    assert result.exit_code == 2, said
    assert f"{path} holds 2 entries that no run writes (extra, notes.txt)" in said
    assert "move them out of the run directory" in said
    assert {p.relative_to(path): p.read_bytes() for p in path.rglob("*") if p.is_file()} == before
    (path / "notes.txt").unlink()
    (path / "extra" / "a.json").unlink()
    (path / "extra").rmdir()
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert verify_run(path).lines() == ["MATCH"]
