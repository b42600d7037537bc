"""run-external: a scripted agent command (an MCP client) runs every planned episode against a served world; the
run directory verifies MATCH and report, replay, attribute and the dashboard take it; a crashed or timed-out
agent is a failed trial; an interrupted run resumes; a changed agent command is refused on resume."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contextdelta.attribution import attribute_run
from contextdelta.dashboard import load_episode, load_run
from contextdelta.dashboard.timeline import episode_timeline
from contextdelta.rundir import (
    RAW_RUNS_RECEIPTS,
    SEALED_APART,
    EpisodeRecord,
    RunDirectory,
    RunStatus,
    SessionLock,
    atomic_write_json,
)
from contextdelta.rundir.receipts import chain_state, seal_directory
from contextdelta.runner import EXIT_ALL_FAILED
from contextdelta.store import open_store
from tests.recorders import CtrlC

pytest.importorskip("mcp")

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "tasks"
AGENT = f"{shlex.quote(sys.executable)} {shlex.quote(str(Path(__file__).parent / 'replay_agent.py'))}"
THREE = "order-grinder-refund,cal-design-review,cfg-search-ramp"

pytestmark = pytest.mark.slow


def env(**extra: str) -> dict[str, str]:
    values = dict(os.environ)
    values["REPLAY_TASKS"] = str(TASKS)
    values["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    values.update(extra)
    return values


def command(results: Path, *args: str, agent_cmd: str = AGENT) -> list[str]:
    return [
        sys.executable, "-m", "contextdelta", "run-external",
        "--agent-cmd", agent_cmd,
        "--agent", "replay",
        "--tasks", str(TASKS),
        "--repeats", "1",
        "--results-dir", str(results),
        "--no-store",
        "--quiet",
        *args,
    ]  # fmt: skip


def run_external(results: Path, *args: str, agent_cmd: str = AGENT, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(results, *args, agent_cmd=agent_cmd), capture_output=True, text=True, env=env(**extra), timeout=600
    )


def one_episode(tmp_path: Path, *args: str, agent_cmd: str = AGENT, **extra: str) -> tuple[Path, EpisodeRecord]:
    """run-external of cfg-search-ramp, unprotected, once: the run directory and its one episode."""
    done = run_external(
        tmp_path,
        "--task-ids",
        "cfg-search-ramp",
        "--protection-modes",
        "unprotected",
        *args,
        agent_cmd=agent_cmd,
        **extra,
    )
    path = Path(done.stdout.strip().splitlines()[-1])
    (record,) = RunDirectory(path).read_episodes()
    # the one episode a failed trial: every episode of the run is one, which is no result
    assert done.returncode == (EXIT_ALL_FAILED if record.failed else 0), done.stderr
    return path, record


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "contextdelta", *args], capture_output=True, text=True, timeout=300)


def rows(path: Path) -> list[dict[str, str]]:
    with (path / "task_results.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_a_scripted_agent_command_gives_a_run_directory_that_verifies_and_reports(tmp_path: Path) -> None:
    done = run_external(tmp_path, "--task-ids", THREE, "--concurrency", "2")
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.strip().splitlines()[-1])
    manifest = RunDirectory(path).read_manifest()
    assert manifest.status is RunStatus.COMPLETE and manifest.strategies == ["external:replay"]
    assert manifest.provider.kind == "external" and manifest.provider.temperature is None
    assert manifest.external_agent is not None and manifest.external_agent.command_sha256 is not None
    table = rows(path)
    assert len(table) == 6 and {r["success"] for r in table} == {"true"} and {r["failed"] for r in table} == {"false"}
    assert {r["strategy"] for r in table} == {"external:replay"} and {r["agent_prompt_tokens"] for r in table} == {""}
    verified = cli("verify", path.name, "--results-dir", str(tmp_path))
    assert (verified.returncode, verified.stdout.strip()) == (0, "MATCH"), verified.stdout + verified.stderr
    report = cli("report", path.name, "--results-dir", str(tmp_path))
    assert report.returncode == 0 and "external:replay" in report.stdout
    assert "what its model saw is unknown" in report.stdout
    for name in ("replay", "attribute"):
        assert cli(name, path.name, "--results-dir", str(tmp_path)).returncode == 0
    # the trace store takes it (its temperature is unknown: null)
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        assert store.import_run(path).added == 6
    finally:
        store.close()
    # the dashboard's data layer takes it as it is
    data = load_run(path)
    record = load_episode(path, table[0]["run_id"])
    assert data.manifest.run_group_id == path.name
    assert episode_timeline(record).steps


def test_a_crashed_or_timed_out_agent_is_a_failed_trial_never_a_success(tmp_path: Path) -> None:
    crashed = run_external(
        tmp_path,
        "--task-ids",
        "cfg-search-ramp",
        "--protection-modes",
        "unprotected",
        REPLAY_FINISH="0",
        REPLAY_EXIT="3",
    )
    assert crashed.returncode == EXIT_ALL_FAILED, crashed.stderr
    assert "is a failed trial (1 provider_error)" in " ".join(crashed.stderr.split())
    (row,) = rows(Path(crashed.stdout.strip().splitlines()[-1]))
    assert (row["failed"], row["success"], row["termination_reason"]) == ("true", "false", "provider_error")
    (record,) = RunDirectory(Path(crashed.stdout.strip().splitlines()[-1])).read_episodes()
    assert record.trace.error is not None and "exited with code 3" in record.trace.error
    assert record.trace.external is not None and record.trace.external.exit_code == 3
    path, record = one_episode(tmp_path, "--timeout-s", "1", agent_cmd="sleep 30")
    assert record.failed and not record.verdict.success and record.trace.termination.value == "provider_error"
    assert record.trace.external is not None and record.trace.external.ended_by == "timeout"
    assert "--timeout-s 1" in (record.trace.error or "")
    assert record.wall_s < 20  # the command was killed, not waited for
    assert attribute_run([record])[0].failed_trial
    verified = cli("verify", path.name, "--results-dir", str(tmp_path))
    assert verified.stdout.strip() == "MATCH", verified.stdout


def test_an_interrupted_run_resumes_and_a_changed_agent_command_is_refused(tmp_path: Path) -> None:
    process = subprocess.Popen(
        command(tmp_path, "--task-ids", THREE, "--protection-modes", "unprotected"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(REPLAY_SLEEP_S="1"),
    )
    try:
        raw = None
        for _ in range(600):  # interrupt once the first episode is on disk
            found = [p for p in tmp_path.iterdir() if (p / "raw_runs.jsonl").is_file()]
            if found and (found[0] / "raw_runs.jsonl").read_text().count("\n") >= 1:
                raw = found[0]
                break
            time.sleep(0.1)
        assert raw is not None
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err
    # the episode servers in flight shut down cleanly: no traceback of their cancelled lifespan
    assert "Traceback" not in err and "CancelledError" not in err, err
    assert RunDirectory(raw).read_manifest().status is RunStatus.INCOMPLETE
    # the report tells how to finish the run: run-external (it said run-benchmark, which refuses the run)
    report = (raw / "benchmark_report.md").read_text(encoding="utf-8")
    right = f"resume with `contextdelta run-external --agent replay --agent-cmd ... --resume {raw.name}`."
    assert right in report, report[:600]
    # a report written before, with the old line, still verifies (compared as written, with a note)
    old = f"resume with `contextdelta run-benchmark --resume {raw.name}`."
    (raw / "benchmark_report.md").write_text(report.replace(right, old), encoding="utf-8")
    assert RunDirectory(raw).reseal_files()
    verified = cli("verify", raw.name, "--results-dir", str(tmp_path), "--allow-incomplete")
    assert verified.stdout.strip() == "MATCH", verified.stdout + verified.stderr
    assert "told an external agent's run to resume with run-benchmark" in verified.stderr
    done_before = len(RunDirectory(raw).read_episodes())
    assert 1 <= done_before < 3
    refused = run_external(tmp_path, "--resume", raw.name, agent_cmd=AGENT + " --other")
    assert refused.returncode == 2
    assert "--agent-cmd (its SHA-256): run has" in " ".join(refused.stderr.split())
    resumed = run_external(tmp_path, "--resume", raw.name)
    assert resumed.returncode == 0, resumed.stderr
    manifest = RunDirectory(raw).read_manifest()
    assert manifest.status is RunStatus.COMPLETE and manifest.counts.finished == 3 == manifest.counts.succeeded
    assert cli("verify", raw.name, "--results-dir", str(tmp_path)).stdout.strip() == "MATCH"


def test_the_configured_secrets_never_reach_a_file_from_the_agent_command_or_its_output(tmp_path: Path) -> None:
    """An agent that prints the key it was given, and a command line that carries it: neither is key-shaped, so
    only the configured secrets can catch them; nothing the run writes (files, trace store) holds them."""
    key, token = "azurekey0123456789abcdef", "proxy-token-secret-987"
    leaky = f"sh -c 'echo using $CONTEXTDELTA_API_KEY and {token}; exit 3' {key}"
    results = tmp_path / "results"
    found = subprocess.run(
        [
            *[c for c in command(results, "--task-ids", "cfg-search-ramp", "--protection-modes", "unprotected",
                                 agent_cmd=leaky) if c != "--no-store"],
            "--database-url", f"sqlite:///{tmp_path / 'store.db'}",
        ],
        capture_output=True,
        text=True,
        env=env(CONTEXTDELTA_API_KEY=key, CONTEXTDELTA_PROXY_TOKEN=token),
        timeout=600,
    )  # fmt: skip
    assert found.returncode == EXIT_ALL_FAILED, found.stderr  # its one episode is a failed trial
    assert "last error: " in found.stderr and key not in found.stderr and token not in found.stderr
    path = Path(found.stdout.strip().splitlines()[-1])
    (record,) = RunDirectory(path).read_episodes()
    assert record.failed and "using [REDACTED] and [REDACTED]" in (record.trace.error or "")
    manifest = RunDirectory(path).read_manifest()
    assert manifest.external_agent is not None and key not in (manifest.external_agent.command or "")
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "store.db" for p in written)
    for file in written:
        data = file.read_bytes()
        assert key.encode() not in data and token.encode() not in data, file
    assert key not in found.stdout + found.stderr and token not in found.stdout + found.stderr


def test_an_agent_that_crashes_after_finish_is_a_failed_trial_and_a_background_child_does_not_hold_the_episode(
    tmp_path: Path,
) -> None:
    _, record = one_episode(tmp_path, REPLAY_EXIT="3")  # the reference solution, finish, then exit 3
    assert record.failed and not record.verdict.success and record.trace.termination.value == "provider_error"
    assert "exited with code 3" in (record.trace.error or "") and "(after it called finish)" in (
        record.trace.error or ""
    )
    started = time.perf_counter()
    _, record = one_episode(tmp_path, "--timeout-s", "30", agent_cmd="sleep 300 & exit 0")
    assert time.perf_counter() - started < 25  # ended when the command exited, not at --timeout-s
    assert record.trace.external is not None and record.trace.external.ended_by == "agent_exited"
    assert record.failed and record.trace.termination.value == "provider_error"  # it never called finish


def test_an_agent_that_exits_0_without_finish_gave_no_final_answer_and_every_reader_says_so(tmp_path: Path) -> None:
    """It did the whole reference solution and left without `finish`: recorded as `final_answer` before, a success
    with no final answer at all. Now a failed trial whose error says how it ended, in replay, the atlas and the
    report alike."""
    path, record = one_episode(tmp_path, REPLAY_FINISH="0")
    # its MCP client ends the session (HTTP DELETE) as it leaves, before the command exits 0: that ends the episode
    said = "the MCP session closed before the agent called finish: it gave no final answer"
    assert record.trace.termination.value == "provider_error" and record.trace.error == said
    assert record.failed and not record.verdict.success and record.trace.final_answer is None
    assert record.trace.external is not None and record.trace.external.ended_by == "session_closed"
    assert record.trace.external.exit_code == 0
    assert [row["termination_reason"] for row in rows(path)] == ["provider_error"]
    replayed = cli("replay", path.name, "--results-dir", str(tmp_path))
    assert replayed.returncode == 0 and "provider_error" in replayed.stdout and said in replayed.stdout
    atlas = (path / "failure_atlas.md").read_text()
    assert "provider_error" in atlas and said in atlas
    assert "provider_error" in (path / "benchmark_report.md").read_text()
    verified = cli("verify", path.name, "--results-dir", str(tmp_path))
    assert (verified.returncode, verified.stdout.strip()) == (0, "MATCH"), verified.stdout + verified.stderr


def test_a_carriage_return_in_an_agents_output_verifies(tmp_path: Path) -> None:
    """The error text has the agent's lines ("\\r", "\\r\\n") on one line; verify compares the rebuilt reports byte
    for byte."""
    path, record = one_episode(tmp_path, agent_cmd="printf 'oops\\rfailed\\r\\nagain'; exit 1")
    assert "oops failed again" in (record.trace.error or "")
    verified = cli("verify", str(path))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.splitlines()[0] == "MATCH"


def test_terminal_escapes_an_agent_prints_are_shown_never_sent_to_the_terminal_or_the_reports(tmp_path: Path) -> None:
    """A crashing agent's last output (a window title, a screen clear, colours, a carriage return) is recorded as
    escapes on one line: the error, the CLI's last line, the report's failed-trials table and the failure atlas
    show it and none carries a control character (or a line the agent started)."""
    printed = r"printf '\033]0;owned\007\033[2J\033[31mred\roverwritten\n# heading\n'; exit 1"
    done = run_external(
        tmp_path, "--task-ids", "cfg-search-ramp", "--protection-modes", "unprotected", agent_cmd=printed
    )
    path = Path(done.stdout.strip().splitlines()[-1])
    (record,) = RunDirectory(path).read_episodes()
    error = record.trace.error or ""
    assert r"\x1b]0;owned\x07\x1b[2J\x1b[31mred overwritten # heading" in error, error
    control = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
    assert not control.search(done.stderr), done.stderr
    for name in ("benchmark_report.md", "failure_atlas.md"):
        text = (path / name).read_text()
        assert not control.search(text) and "\n# heading" not in text, name
    verified = cli("verify", str(path))
    assert verified.stdout.splitlines()[0] == "MATCH", verified.stdout + verified.stderr


def test_an_interrupted_external_run_is_told_to_resume_with_run_external(tmp_path: Path) -> None:
    """The resume line printed when a signal cuts a run short named `run-benchmark --resume`, which refuses an
    external agent's run; it names run-external, the agent and the command to give again."""
    from contextdelta.mcp import HTTP, agent_info
    from contextdelta.mcp import run_external as run_agent
    from contextdelta.runner import BenchmarkRequest, OpenInterrupted

    request = BenchmarkRequest(
        tasks_dir=TASKS,
        task_ids=["cfg-search-ramp"],
        protection_modes=["unprotected"],
        repeats=1,
        results_dir=tmp_path,
        external_agent=agent_info("replay", transport=HTTP, command=AGENT, timeout_s=600, secrets=()),
    )
    with pytest.raises(OpenInterrupted) as caught:
        run_agent(request, AGENT, recorders=[CtrlC(at="start")])
    (path,) = list(tmp_path.iterdir())
    assert caught.value.message.endswith(
        f"`contextdelta run-external --agent replay --agent-cmd ... --resume {path}` runs what is missing"
    )
    session = SessionLock.acquire(path)  # another session writing the run: the refusal names the same command
    assert session is not None
    try:
        refused = run_external(tmp_path, "--resume", path.name)
    finally:
        session.release()
    assert refused.returncode == 2
    said = " ".join(refused.stderr.split())
    assert f"then run `contextdelta run-external --agent replay --agent-cmd ... --resume {path}`" in said, said
    resumed = run_external(tmp_path, "--resume", path.name)
    assert resumed.returncode == 0, resumed.stderr
    assert RunDirectory(path).read_manifest().status is RunStatus.COMPLETE


def _running(marker: str) -> list[int]:
    """The ids of the processes whose command line holds ``marker``."""
    listed = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True, check=True).stdout
    return [int(line.split()[0]) for line in listed.splitlines() if marker in line and "ps -eo" not in line]


@pytest.mark.parametrize("trap", ["", "trap '' TERM; "], ids=["exits-on-sigterm", "ignores-sigterm"])
def test_an_agent_still_running_after_finish_is_stopped_after_a_grace_period_not_waited_for_until_the_timeout(
    tmp_path: Path, trap: str
) -> None:
    """The episode is over once the agent called finish: a command that lingers (here a shell still sleeping after
    the agent) gets the exit grace period, then is stopped (SIGTERM, then SIGKILL for one that ignores it) with
    everything in its process group; the episode keeps its verdict and records that the harness stopped it."""
    marker = f"sleep 29{len(trap) % 10}.{os.getpid() % 1000}"
    started = time.perf_counter()
    path, record = one_episode(tmp_path, "--timeout-s", "300", agent_cmd=f"{trap}{AGENT}; {marker}")
    assert time.perf_counter() - started < 90  # not the 300 s of --timeout-s
    assert not record.failed and record.verdict.success and record.trace.termination.value == "final_answer"
    external = record.trace.external
    assert external is not None and external.ended_by == "finish" and external.stopped_by_harness
    assert external.exit_code is not None and external.exit_code < 0  # ended by a signal
    assert not _running(marker)  # nothing of the command is left behind
    verified = cli("verify", path.name, "--results-dir", str(tmp_path))
    assert verified.stdout.strip() == "MATCH", verified.stdout + verified.stderr


@pytest.mark.parametrize(
    ("agent_cmd", "said"),
    [
        ("/nonexistent/agent --flag", "/nonexistent/agent does not exist"),
        ("no-such-agent-xyz --flag", "no-such-agent-xyz is not a command on PATH"),
        ("A=1 exec ./no-such-agent.sh", "./no-such-agent.sh does not exist (relative to the current folder"),
        (str(Path(__file__).parent / "replay_agent.py"), "replay_agent.py is not executable: make it executable"),
        (str(Path(__file__).parent), "is a folder, not a program"),
        (f"{AGENT} 'unbalanced", "cannot parse it"),
    ],
    ids=["missing-path", "not-on-path", "relative-after-exec", "not-executable", "folder", "bad-quotes"],
)
def test_an_agent_command_that_cannot_run_is_refused_before_the_run_and_nothing_is_written(
    tmp_path: Path, agent_cmd: str, said: str
) -> None:
    """Each episode used to be run and recorded as a failed trial (shell exit 127/126/2): a run directory of failed
    trials for a typo. It is one refusal, exit 2, naming the program and what to do, before anything is written."""
    results = tmp_path / "results"
    refused = run_external(results, "--task-ids", "cfg-search-ramp", agent_cmd=agent_cmd)
    assert refused.returncode == 2, refused.stderr
    assert "--agent-cmd: " in refused.stderr and said in " ".join(refused.stderr.split()), refused.stderr
    assert not results.exists() and refused.stdout == ""


def test_an_agent_command_the_shell_runs_is_not_refused() -> None:
    from contextdelta.mcp._run import agent_command_problem

    for fine in ("true", "cd / && exit 0", "exec sleep 0", "X=1 Y=2 sleep 0", "$SHELL -c true", "{ true; }", AGENT):
        assert agent_command_problem(fine) is None, fine


@pytest.mark.skipif(shutil.which("setsid") is None or not Path("/proc").is_dir(), reason="needs setsid and /proc")
def test_a_child_that_left_the_agents_process_group_is_stopped_when_the_episode_ends(tmp_path: Path) -> None:
    """Killing the command's process group missed a child that started a session of its own (as the mcp SDK's
    stdio client starts every server it runs, or a daemon): it outlived the episode and the run. It is found by
    the environment it inherited and stopped too (SIGTERM, then SIGKILL: this one ignores SIGTERM)."""
    marker = f"sleep 297.{os.getpid() % 1000}"
    escaped = f"(setsid sh -c \"trap '' TERM; {marker}\" > /dev/null 2>&1 &); {AGENT}"
    try:
        _, record = one_episode(tmp_path, agent_cmd=escaped)
        assert not record.failed and record.verdict.success
        assert not _running(marker)
    finally:
        for pid in _running(marker):  # not left behind by the test either
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_an_agent_killed_by_a_signal_is_a_failed_trial_that_names_the_signal(tmp_path: Path) -> None:
    """A crash read "exited with code -11"; it names the signal."""
    _, record = one_episode(tmp_path, agent_cmd="echo crashing; kill -SEGV $$")
    assert record.failed and record.trace.external is not None and record.trace.external.exit_code == -11
    assert "the agent command was killed by signal SIGSEGV (11); its last output: crashing" in (
        record.trace.error or ""
    )


def test_the_graces_an_agent_is_stopped_by_are_flags_recorded_in_the_manifest(tmp_path: Path) -> None:
    """A receipt said that the harness stopped the agent, not under which rules: the exit grace after the episode
    ended and the SIGTERM-to-SIGKILL grace were constants nobody could read back. They are flags now, recorded in
    the manifest (sealed), and a resume with other graces is refused like one with another --timeout-s."""
    marker = f"sleep 293.{os.getpid() % 1000}"
    path, record = one_episode(
        tmp_path, "--exit-grace-s", "0.25", "--stop-grace-s", "0.5", agent_cmd=f"trap '' TERM; {AGENT}; {marker}"
    )
    agent = RunDirectory(path).read_manifest().external_agent
    assert agent is not None and (agent.exit_grace_s, agent.stop_grace_s) == (0.25, 0.5)
    external = record.trace.external
    assert external is not None and external.stopped_by_harness and record.verdict.success
    assert not _running(marker)
    refused = run_external(tmp_path, "--resume", path.name, "--exit-grace-s", "0.25")
    assert refused.returncode == 2 and "--stop-grace-s: run has 0.5, now 2.0" in " ".join(refused.stderr.split())
    bad = run_external(tmp_path, "--exit-grace-s", "-1")
    assert bad.returncode == 2 and "--exit-grace-s" in bad.stderr


def test_a_run_written_before_the_graces_were_recorded_verifies_and_resumes_with_the_graces_it_ran_under(
    tmp_path: Path,
) -> None:
    """An older run-external manifest has no exit_grace_s / stop_grace_s: it reads as the 5 s and 2 s every run had
    then, verifies MATCH, and resumes with the default flags (other graces are refused)."""
    path, _record = one_episode(tmp_path)
    manifest_path = path / "run_manifest.json"
    value = json.loads(manifest_path.read_text(encoding="utf-8"))
    for name in ("exit_grace_s", "stop_grace_s"):
        del value["external_agent"][name]
    body = {k: v for k, v in value.items() if k != "seal"}
    chain = chain_state(path / RAW_RUNS_RECEIPTS, value["run_group_id"])
    seal = seal_directory(path, body, chain, SEALED_APART)  # as the release before the graces sealed it
    atomic_write_json(manifest_path, {**body, "seal": seal.model_dump(mode="json")})
    agent = RunDirectory(path).read_manifest().external_agent
    assert agent is not None and agent.exit_grace_s is None and agent.stop_rules() == (5.0, 2.0)
    verified = cli("verify", path.name, "--results-dir", str(tmp_path))
    assert verified.stdout.strip() == "MATCH", verified.stdout + verified.stderr
    refused = run_external(tmp_path, "--resume", path.name, "--exit-grace-s", "1")
    assert refused.returncode == 2 and "--exit-grace-s: run has 5.0, now 1.0" in " ".join(refused.stderr.split())
    resumed = run_external(tmp_path, "--resume", path.name)
    assert resumed.returncode == 0, resumed.stderr


@pytest.mark.parametrize("proc", [True, False], ids=["with-proc", "without-proc"])
def test_without_proc_the_stray_sweep_is_recorded_as_unavailable_not_passed_off_as_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, proc: bool
) -> None:
    """The sweep for what an agent left running outside its process group reads /proc; where there is none it
    found nothing and said nothing, as if nothing had been left. Now only the process group is stopped there, and
    the episode records that the sweep was unavailable (on Linux: that it ran)."""
    from contextdelta.mcp import HTTP, agent_info, run_external
    from contextdelta.mcp import _run as mcp_run
    from contextdelta.runner import BenchmarkRequest

    if not proc:
        monkeypatch.setattr(mcp_run, "PROC", tmp_path / "no-proc")
    elif not mcp_run.cookie_sweep_available():
        pytest.skip("needs /proc")
    request = BenchmarkRequest(
        tasks_dir=TASKS,
        task_ids=["cfg-search-ramp"],
        protection_modes=["unprotected"],
        repeats=1,
        results_dir=tmp_path,
        external_agent=agent_info("a", transport=HTTP, command="sleep 0.1", timeout_s=30.0),
    )
    outcome = run_external(request, "sleep 0.1", timeout_s=30.0)
    (record,) = RunDirectory(outcome.path).read_episodes()
    assert record.trace.external is not None
    assert record.trace.external.stray_sweep == ("cookie" if proc else "unavailable")
    assert not record.verdict.success  # it did nothing: never a pass


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_resuming_a_killed_run_stops_the_agent_commands_its_killed_session_left_running(tmp_path: Path) -> None:
    """Each agent command runs in a session of its own, so when run-external itself was killed (SIGKILL) nothing
    stopped them: they ran on, orphaned, for good. Their cookie names the run group now, and the next session of
    the run (`--resume`, which holds the run's lock) stops them before it starts any command of its own."""
    flag = tmp_path / "started-once"
    marker = f"sleep 334.{os.getpid() % 1000}"
    agent_cmd = f"if [ -e {shlex.quote(str(flag))} ]; then exit 0; fi; touch {shlex.quote(str(flag))}; {marker}"
    process = subprocess.Popen(
        command(tmp_path, "--task-ids", "cfg-search-ramp", "--protection-modes", "unprotected", agent_cmd=agent_cmd),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env(),
    )
    try:
        for _ in range(600):
            if _running(marker):
                break
            time.sleep(0.1)
        assert _running(marker)
        process.kill()
        process.wait(timeout=30)
        time.sleep(0.5)
        assert _running(marker)  # orphaned: the killed session could not stop it
        (path,) = [p for p in tmp_path.iterdir() if (p / "run_manifest.json").is_file()]
        resumed = run_external(tmp_path, "--resume", path.name, agent_cmd=agent_cmd)
        assert resumed.returncode == EXIT_ALL_FAILED or resumed.returncode == 0, resumed.stderr
        assert not _running(marker)
        (record,) = RunDirectory(path).read_episodes()
        assert not record.verdict.success  # the resumed agent exited at once without doing anything
    finally:
        for pid in _running(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
