"""serve-world: an MCP client (the ``mcp`` package) drives one episode's world. Every task's reference solution
succeeds through it, its unsafe trajectory gets exactly the built-in graders' verdicts, and the command writes a
run directory that verify, report, replay and attribute take unchanged (HTTP and stdio)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from contextdelta.grading import grade
from contextdelta.mcp import FINISH_TOOL, WorldEpisode, build_server, server_instructions
from contextdelta.rundir import RunDirectory
from contextdelta.runner import EXIT_ALL_FAILED, EpisodeJob, EpisodeSpec, episode_record
from contextdelta.tasks import Task, load_directory
from contextdelta.tasks.trajectory import replay
from contextdelta.worlds import ProtectionMode, get_world

pytest.importorskip("mcp")
from mcp import Client, StdioServerParameters

from tests.mcp.replay_agent import play
from tests.mcp.stdio_lines import line_exchange
from tests.recorders import CtrlC

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "tasks"


def all_tasks() -> list[Task]:
    loaded, problems = load_directory(TASKS)
    assert not problems
    return sorted((t.task for t in loaded), key=lambda t: t.id)


def through_mcp(task: Task, mode: ProtectionMode, trajectory: str, finish: bool) -> WorldEpisode:
    """One episode driven by an MCP client connected to the episode's MCP server (in process)."""
    episode = WorldEpisode(task, task.build_world(mode), "replay", "in-process", task.evaluator.max_steps)

    async def main() -> None:
        async with Client(build_server(episode)) as client:
            await play(client, task, mode, trajectory, finish)

    anyio.run(main)
    if not finish:
        episode.close("session_closed")
    return episode


def job(task: Task, mode: ProtectionMode) -> EpisodeJob:
    spec = EpisodeSpec(task.id, "external:replay", mode.value, 1)
    return EpisodeJob("g", spec, task, 1, task.evaluator.max_steps)


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(ProtectionMode))
def test_every_reference_solution_succeeds_through_the_mcp_server(mode: ProtectionMode) -> None:
    failures = []
    for task in all_tasks():
        episode = through_mcp(task, mode, "reference", finish=True)
        initial = task.build_world(mode).state()
        record = episode_record(job(task, mode), episode.trace(), initial, episode.world, "t", 0.0, None)
        if not record.verdict.success:
            failures.append((task.id, record.verdict.reasons))
        assert record.trace.external is not None and record.trace.external.ended_by == "finish"
    assert failures == []


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(ProtectionMode))
def test_the_unsafe_trajectory_gets_the_builtin_graders_verdicts(mode: ProtectionMode) -> None:
    compared = 0
    for task in all_tasks():
        episode = through_mcp(task, mode, "unsafe", finish=False)
        initial = task.build_world(mode).state()
        record = episode_record(job(task, mode), episode.trace(), initial, episode.world, "t", 0.0, None)
        builtin = replay(task, task.evaluator.unsafe_trajectory, mode)
        expected = grade(
            task, builtin.world.events, builtin.world.mutation_log, builtin.initial_state, builtin.final_state, None
        )
        # left without finish: a failed trial (no final answer), which is never a success; the graders' findings alike
        assert record.failed and record.trace.termination.value == "provider_error", task.id
        expected = expected.model_copy(update={"success": False})
        assert record.verdict.model_dump() == expected.model_dump(), task.id
        compared += 1
    assert compared == 24


def test_the_server_offers_the_worlds_tools_the_instructions_and_the_task_prompt() -> None:
    task = next(t for t in all_tasks() if t.id == "cfg-search-ramp")
    mode = ProtectionMode.FRESHNESS_CONTRACT
    episode = WorldEpisode(task, task.build_world(mode), "replay", "in-process", 20)

    async def main() -> dict[str, Any]:
        async with Client(build_server(episode)) as client:
            tools = await client.list_tools()
            prompt = await client.get_prompt("task")
            return {"tools": tools.tools, "instructions": client.instructions, "prompt": prompt}

    seen = anyio.run(main)
    schemas = {s["function"]["name"]: s["function"] for s in task.build_world(mode).tool_schemas()}
    offered = {t.name: t for t in seen["tools"]}
    assert set(offered) == {*schemas, FINISH_TOOL}
    for name, function in schemas.items():
        assert offered[name].input_schema == function["parameters"]
        spec = get_world(task.world).tool(name)
        assert spec is not None
        # under the contract every write tool, and only a write tool, takes expected_version
        assert ("expected_version" in str(function["parameters"])) == (spec.kind.value == "write")
    assert seen["instructions"] == server_instructions(task)
    (message,) = seen["prompt"].messages
    assert message.role == "user" and task.public.instruction in message.content.text


def test_every_call_after_the_end_is_flagged_an_error_finish_included() -> None:
    task = next(t for t in all_tasks() if t.id == "cfg-search-ramp")
    episode = WorldEpisode(task, task.build_world(ProtectionMode.UNPROTECTED), "replay", "in-process", 20)
    read = task.evaluator.reference_solution[0]

    async def main() -> list[tuple[bool, str]]:
        async with Client(build_server(episode)) as client:
            results = [
                await client.call_tool(FINISH_TOOL, {"answer": "done"}),
                await client.call_tool(FINISH_TOOL, {"answer": "again"}),
                await client.call_tool(read.tool, read.args),
            ]
        return [(r.is_error, getattr(r.content[0], "text", "")) for r in results]

    (first, *late) = anyio.run(main)
    assert first == (False, '{"finished": true}')
    assert late and all(is_error and "episode_over" in text for is_error, text in late)
    assert len(episode.steps) == 1 and episode.final_answer == "done"


def serve_world(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "contextdelta", "serve-world", "--tasks", str(TASKS), "--results-dir", str(tmp_path),
         "--no-store", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )  # fmt: skip


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "contextdelta", *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def check_run_directory(path: Path) -> None:
    """verify says MATCH, and report, replay and attribute work on it unchanged."""
    results = str(path.parent)
    verified = cli("verify", path.name, "--results-dir", results)
    assert (verified.returncode, verified.stdout.strip()) == (0, "MATCH"), verified.stdout + verified.stderr
    for command in ("report", "replay", "attribute"):
        done = cli(command, path.name, "--results-dir", results)
        assert done.returncode == 0, (command, done.stderr)
    assert "unknown: external agent" in cli("replay", path.name, "--results-dir", results).stdout


@pytest.mark.slow
def test_serve_world_over_http_grades_into_a_run_directory(tmp_path: Path) -> None:
    task = next(t for t in all_tasks() if t.id == "order-grinder-refund")
    mode = ProtectionMode.FRESHNESS_CONTRACT
    server = serve_world(tmp_path, "--task", task.id, "--mode", mode.value, "--agent", "by-hand")
    try:
        assert server.stdout is not None
        first = server.stdout.readline().split()
        assert first[0] == "ready" and first[1].startswith("http://127.0.0.1:") and first[1].endswith("/mcp")

        async def main() -> None:
            async with Client(first[1]) as client:
                await play(client, task, mode, "reference", finish=True)

        anyio.run(main)
        out, err = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
    assert server.returncode == 0, err
    path = Path(out.strip().splitlines()[-1])
    (record,) = RunDirectory(path).read_episodes()
    assert record.strategy == "external:by-hand" and record.verdict.success
    assert record.run_id == f"{task.id}.external:by-hand.{mode.value}.r1"
    check_run_directory(path)


@pytest.mark.slow
def _one_call_then(tmp_path: Path, *signals: signal.Signals) -> tuple[subprocess.Popen[str], str, str]:
    """serve-world over HTTP, one `list_configs` call, then ``signals`` sent 0.1 s apart; the ended server, its
    stdout and its stderr."""
    server = serve_world(tmp_path, "--task", "cfg-search-ramp", "--mode", "unprotected")
    try:
        assert server.stdout is not None
        url = server.stdout.readline().split()[1]

        async def main() -> None:
            async with Client(url) as client:
                await client.call_tool("list_configs", {"environment": "prod"})

        anyio.run(main)
        for number, sent in enumerate(signals):
            if number:
                time.sleep(0.1)
            server.send_signal(sent)
        out, err = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
    return server, out, err


def test_serve_world_over_http_ends_on_ctrl_c_as_a_closed_session(tmp_path: Path) -> None:
    server, out, err = _one_call_then(tmp_path, signal.SIGINT)
    assert server.returncode == EXIT_ALL_FAILED, err
    assert "Traceback" not in err and "CancelledError" not in err, err  # a clean shutdown, as the README says
    (record,) = RunDirectory(Path(out.strip().splitlines()[-1])).read_episodes()
    assert record.trace.external is not None and record.trace.external.ended_by == "session_closed"
    assert len(record.trace.steps) == 1 and not record.verdict.success and record.failed
    assert record.trace.error == "the MCP session closed before the agent called finish: it gave no final answer"


@pytest.mark.slow
def test_serve_world_over_stdio_ends_when_the_session_closes(tmp_path: Path) -> None:
    task = next(t for t in all_tasks() if t.id == "cal-design-review")
    mode = ProtectionMode.UNPROTECTED
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "contextdelta", "serve-world", "--transport", "stdio", "--task", task.id, "--mode", mode.value,
              "--tasks", str(TASKS), "--results-dir", str(tmp_path), "--no-store", "--agent", "stdio-agent"],
        env={"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))},
        cwd=ROOT,
    )  # fmt: skip

    async def main() -> None:
        async with Client(params) as client:
            await play(client, task, mode, "reference", finish=False)

    anyio.run(main)
    for _ in range(100):  # the server grades and writes after the client has gone
        runs = [p for p in tmp_path.iterdir() if (p / "run_manifest.json").is_file()]
        if runs and RunDirectory(runs[0]).read_manifest().status.value == "complete":
            break
        anyio.run(anyio.sleep, 0.2)
    (path,) = runs
    (record,) = RunDirectory(path).read_episodes()
    assert record.trace.external is not None
    assert (record.trace.external.transport, record.trace.external.ended_by) == ("stdio", "session_closed")
    # the whole reference solution, then the session closed without finish: no final answer, a failed trial
    assert record.trace.termination.value == "provider_error" and record.failed and not record.verdict.success
    check_run_directory(path)


@pytest.mark.slow
def test_a_port_in_use_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    import socket

    from typer.testing import CliRunner

    from contextdelta.cli import app

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        args = ["serve-world", "--task", "cfg-search-ramp", "--mode", "unprotected", "--tasks", str(TASKS)]
        args += ["--port", str(port), "--results-dir", str(tmp_path), "--no-store"]
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and f"--port {port}: cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.output and list(tmp_path.iterdir()) == []


def test_an_unknown_task_is_refused_naming_serve_worlds_own_flag(tmp_path: Path) -> None:
    """serve-world has --task, not --task-ids: the refusal named a flag the command does not have."""
    from typer.testing import CliRunner

    from contextdelta.cli import app

    args = ["serve-world", "--task", "nope", "--mode", "unprotected", "--tasks", str(TASKS)]
    result = CliRunner().invoke(app, [*args, "--results-dir", str(tmp_path), "--no-store"])
    assert result.exit_code == 2, result.output
    message = " ".join(result.stderr.split())
    assert message.startswith("error: --task: unknown task ids ['nope']; known: ") and "--task-ids" not in message
    assert list(tmp_path.iterdir()) == []


def test_the_library_entry_points_read_settings_as_the_command_line_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """serve_world and run_external built Settings() themselves: a bad setting was a pydantic traceback, not the
    one-line SettingsError naming the variable (and a .env folder or bad .env line went unnoticed)."""
    from contextdelta.mcp import agent_info, run_external, serve_world
    from contextdelta.runner import BenchmarkRequest
    from contextdelta.settings import SettingsError

    monkeypatch.setenv("CONTEXTDELTA_SEED", "abc")
    request = BenchmarkRequest(
        tasks_dir=TASKS, task_ids=["cfg-search-ramp"], external_agent=agent_info("a", transport="stdio")
    )
    with pytest.raises(SettingsError, match="CONTEXTDELTA_SEED='abc' is invalid"):
        serve_world(request)
    with pytest.raises(SettingsError, match="CONTEXTDELTA_SEED='abc' is invalid"):
        run_external(request, "true", timeout_s=10.0)


async def raw_calls(episode: WorldEpisode, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``tools/call`` requests with these params, sent as raw JSON-RPC over the episode's streamable HTTP server (as
    an agent written without an SDK sends them); the JSON-RPC answers, in order."""
    import httpx

    from contextdelta.mcp._server import loopback_socket, serve_http

    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

    async def post(client: httpx.AsyncClient, url: str, message: dict[str, Any]) -> Any:
        answer = await client.post(url, json=message, headers=headers)
        if "mcp-session-id" in answer.headers:
            headers["mcp-session-id"] = answer.headers["mcp-session-id"]
        if "event-stream" in answer.headers.get("content-type", ""):
            data = [line[5:] for line in answer.text.splitlines() if line.startswith("data:")]
            return json.loads(data[-1]) if data else None
        return answer.json() if answer.content else None

    async with serve_http(episode, loopback_socket()) as url, httpx.AsyncClient(timeout=30) as client:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
        await post(client, url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
        headers["mcp-protocol-version"] = "2025-06-18"
        await post(client, url, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        return [
            await post(client, url, {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params})
            for n, params in enumerate(calls, 1)
        ]


def test_arguments_that_are_not_an_object_are_the_worlds_invalid_calls_recorded_as_steps() -> None:
    task = next(t for t in all_tasks() if t.id == "cfg-search-ramp")
    episode = WorldEpisode(task, task.build_world(ProtectionMode.UNPROTECTED), "raw", "streamable-http", 20)
    sent: list[Any] = ["key=x", [1, 2], 7, {"key": 5}]
    answers = anyio.run(raw_calls, episode, [{"name": "get_config", "arguments": value} for value in sent])

    # each an error tool result that says what was wrong, not a bare JSON-RPC "Invalid request parameters"
    assert all("result" in answer and answer["result"]["isError"] for answer in answers), answers
    texts = [answer["result"]["content"][0]["text"] for answer in answers]
    assert all("malformed_arguments" in text and "JSON object" in text for text in texts[:3]), texts
    # and each a step, with the world's invalid event and the arguments as they came
    assert [step.tool_calls[0].arguments for step in episode.steps] == [
        json.dumps(v, separators=(",", ":")) for v in sent
    ]
    assert [event.outcome.value for event in episode.world.events] == ["invalid"] * 4


@pytest.mark.slow
def test_a_stdio_line_that_is_no_json_rpc_message_is_answered_with_an_error_and_the_server_goes_on(
    tmp_path: Path,
) -> None:
    """A client that writes a line that is not JSON (or not a JSON-RPC message) gets a JSON-RPC error for it (the
    request's id when the line has one) instead of no answer at all, and every later request is answered."""
    server = serve_world(tmp_path, "--transport", "stdio", "--task", "cfg-search-ramp", "--mode", "unprotected")
    assert server.stdin is not None and server.stdout is not None
    send = line_exchange(server)

    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
    try:
        assert send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}))["id"] == 1
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        unreadable = {
            "not json at all": (-32700, None),
            '{"jsonrpc": "2.0", "id": 2, "method": "tools/list"': (-32700, None),  # cut short
            '{"jsonrpc": "1.0", "id": 3, "method": "tools/list"}': (-32600, 3),
            '{"jsonrpc": "2.0", "id": "four"}': (-32600, "four"),
            "[1, 2]": (-32600, None),
            # an id JSON-RPC does not allow: the SDK read these as notifications and never answered them
            '{"jsonrpc": "2.0", "id": true, "method": "tools/list"}': (-32600, None),
            '{"jsonrpc": "2.0", "id": 1.5, "method": "tools/call", "params": {"name": "list_flags"}}': (-32600, None),
        }
        for line, (code, request_id) in unreadable.items():
            answer = send(line)
            assert (answer["error"]["code"], answer["id"]) == (code, request_id), (line, answer)
        call = {"name": "get_config", "arguments": {"environment": "prod", "key": "search.max_results"}}
        answer = send(json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": call}))
        assert answer["id"] == 5 and not answer["result"]["isError"], answer
        server.stdin.close()  # the session ends: the episode is graded and written
        server.wait(timeout=60)
        assert server.stderr is not None
        err = server.stderr.read()
    finally:
        if server.poll() is None:
            server.kill()
    assert server.returncode == EXIT_ALL_FAILED, err
    (path,) = [p for p in tmp_path.iterdir() if (p / "run_manifest.json").is_file()]
    (record,) = RunDirectory(path).read_episodes()
    assert [call.name for step in record.trace.steps for call in step.tool_calls] == ["get_config"]


@pytest.mark.slow
def test_over_stdio_the_last_line_on_stderr_is_the_whole_run_directory_however_long(tmp_path: Path) -> None:
    """The run directory was printed through a console that wrapped it at 80 columns: the last line was its tail."""
    results = tmp_path / ("a-results-folder-with-a-long-name-" * 3) / "[bold]nested"
    server = serve_world(results, "--transport", "stdio", "--task", "cfg-search-ramp", "--mode", "unprotected")
    _, err = server.communicate(input="", timeout=120)  # a client that connects and leaves at once
    assert server.returncode == EXIT_ALL_FAILED, err
    last = Path(err.strip().splitlines()[-1])
    assert last.parent == results and (last / "run_manifest.json").is_file(), err


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_over_stdio_a_signal_ends_the_session_while_the_client_still_holds_stdin_open(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """SIGTERM (or Ctrl-C by hand) with the client still connected left serve-world hanging on its blocked read
    of stdin, the episode never written; now the session closes, the episode is graded and written."""
    server = serve_world(tmp_path, "--transport", "stdio", "--task", "cfg-search-ramp", "--mode", "unprotected")
    assert server.stdin is not None and server.stdout is not None
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
    call = {"name": "get_config", "arguments": {"environment": "prod", "key": "search.max_results"}}
    try:
        for message in (
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
        ):
            server.stdin.write(json.dumps(message) + "\n")
            server.stdin.flush()
            if "id" in message:
                assert json.loads(server.stdout.readline())["id"] == message["id"]
        server.send_signal(signum)  # stdin stays open
        server.wait(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
        server.stdin.close()
    assert server.returncode == EXIT_ALL_FAILED
    (path,) = [p for p in tmp_path.iterdir() if (p / "run_manifest.json").is_file()]
    assert RunDirectory(path).read_manifest().status.value == "complete"
    (record,) = RunDirectory(path).read_episodes()
    assert record.trace.external is not None and record.trace.external.ended_by == "session_closed"
    assert len(record.trace.steps) == 1


@pytest.mark.slow
def test_a_signal_after_the_session_ended_does_not_cut_the_writing_of_the_episode_short(tmp_path: Path) -> None:
    """The mcp SDK's stdio client sends SIGTERM 2 s after closing stdin; one that arrived while serve-world graded
    and wrote the finished episode killed it there (a `running` run directory without its reports) or, as SIGINT,
    marked the run interrupted. The episode is over by then: it is written whole, and the run is complete."""
    import threading

    from contextdelta.mcp import HTTP, agent_info
    from contextdelta.mcp import serve_world as serve
    from contextdelta.runner import BenchmarkRequest

    request = BenchmarkRequest(
        tasks_dir=TASKS,
        task_ids=["cfg-search-ramp"],
        protection_modes=["unprotected"],
        repeats=1,
        results_dir=tmp_path,
        external_agent=agent_info("a", transport=HTTP),
    )

    async def finish(url: str) -> None:
        async with Client(url) as client:
            await client.call_tool(FINISH_TOOL, {"answer": "done"})

    def ready(url: str) -> None:
        threading.Thread(target=anyio.run, args=(finish, url), daemon=True).start()

    outcome = serve(request, ready=ready, recorders=[CtrlC()])
    assert outcome.manifest.status.value == "complete" and outcome.manifest.stop_reason is None
    (record,) = RunDirectory(outcome.path).read_episodes()
    assert record.trace.external is not None and record.trace.external.ended_by == "finish"
    assert (outcome.path / "benchmark_report.md").is_file()


@pytest.mark.slow
def test_over_stdio_a_closed_stdin_is_an_ended_session_not_a_traceback(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "contextdelta", "serve-world", "--transport", "stdio", "--task", "cfg-search-ramp",
         "--mode", "unprotected", "--tasks", str(TASKS), "--results-dir", str(tmp_path), "--no-store"],
        capture_output=True, text=True, cwd=ROOT, timeout=120, preexec_fn=lambda: os.close(0),
    )  # fmt: skip
    assert done.returncode == EXIT_ALL_FAILED and "Traceback" not in done.stderr, done.stderr
    assert (Path(done.stderr.strip().splitlines()[-1]) / "run_manifest.json").is_file()


@pytest.mark.slow
def test_serve_world_over_http_survives_a_second_ctrl_c_while_it_shuts_down(tmp_path: Path) -> None:
    """The first Ctrl-C closes the session; an impatient second one (and a SIGTERM) while the server shut down
    was a KeyboardInterrupt there: a CancelledError traceback and the episode lost (run incomplete, 0/1)."""
    server, out, err = _one_call_then(tmp_path, signal.SIGINT, signal.SIGINT, signal.SIGTERM)
    assert server.returncode == EXIT_ALL_FAILED and "Traceback" not in err, err
    path = Path(out.strip().splitlines()[-1])
    assert RunDirectory(path).read_manifest().status.value == "complete"
    (record,) = RunDirectory(path).read_episodes()
    assert record.trace.external is not None and record.trace.external.ended_by == "session_closed"
    assert len(record.trace.steps) == 1


def _stdio_session(server: subprocess.Popen[str]) -> Any:
    """A raw JSON-RPC client of a stdio serve-world: ``call(name, arguments)`` -> the tool result's text."""
    assert server.stdin is not None and server.stdout is not None
    ids = iter(range(1, 1000))

    def send(message: dict[str, Any]) -> None:
        assert server.stdin is not None
        server.stdin.write(json.dumps(message) + "\n")
        server.stdin.flush()

    def request(method: str, params: dict[str, Any]) -> Any:
        assert server.stdout is not None
        n = next(ids)
        send({"jsonrpc": "2.0", "id": n, "method": method, "params": params})
        return json.loads(server.stdout.readline())["result"]

    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
    request("initialize", hello)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return lambda name, arguments: request("tools/call", {"name": name, "arguments": arguments})["content"][0]["text"]


@pytest.mark.slow
@pytest.mark.parametrize("finished", [True, False], ids=["killed-after-finish", "killed-mid-episode"])
def test_a_killed_stdio_serve_world_keeps_its_finished_episode_and_resumes(tmp_path: Path, finished: bool) -> None:
    """serve-world over stdio wrote the episode only once the session closed: a client that finished but kept the
    session open, then was killed with its server (SIGKILL), left a run directory without the episode. The episode
    is written the moment it ends now: it verifies, and `serve-world --resume` finalises the run. One cut off before
    it ended is no episode (never a pass): the run is named incomplete, with the command that serves it again."""
    args = ("--transport", "stdio", "--task", "cfg-search-ramp", "--mode", "unprotected")
    server = serve_world(tmp_path, *args)
    try:
        call = _stdio_session(server)
        call("list_configs", {"environment": "prod"})
        if finished:
            assert json.loads(call(FINISH_TOOL, {"answer": "done"})) == {"finished": True}
        time.sleep(0.5)
    finally:
        server.kill()
        server.communicate(timeout=30)
    (path,) = [p for p in tmp_path.iterdir() if (p / "run_manifest.json").is_file()]
    episodes = RunDirectory(path).read_episodes()
    assert len(episodes) == (1 if finished else 0)
    if finished:
        assert episodes[0].trace.external is not None and episodes[0].trace.external.ended_by == "finish"
        assert not episodes[0].verdict.success  # one read, nothing done
    results = str(tmp_path)
    refused = cli("verify", path.name, "--results-dir", results)
    resume = (
        f"serve-world --task cfg-search-ramp --mode unprotected --transport stdio --agent agent --resume {path.name}"
    )
    said = " ".join(refused.stderr.split())
    assert refused.returncode == 2 and resume in said, refused.stderr
    assert "interrupted: the session that wrote it was killed; an episode it had not finished is not recorded" in said
    partial = cli("verify", path.name, "--results-dir", results, "--allow-incomplete")
    assert partial.stdout.strip() == "MATCH", partial.stdout + partial.stderr
    resumed = subprocess.run(
        [sys.executable, "-m", "contextdelta", "serve-world", *args, "--tasks", str(TASKS), "--results-dir", results,
         "--no-store", "--resume", path.name],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert resumed.returncode == (0 if finished else EXIT_ALL_FAILED), resumed.stderr
    (record,) = RunDirectory(path).read_episodes()
    assert record.trace.external is not None
    assert record.trace.external.ended_by == ("finish" if finished else "session_closed")
    assert not record.verdict.success
    verified = cli("verify", path.name, "--results-dir", results)
    assert (verified.returncode, verified.stdout.strip()) == (0, "MATCH"), verified.stdout + verified.stderr


@pytest.mark.slow
def test_resuming_a_serve_world_run_with_run_external_names_the_command_that_finishes_it(tmp_path: Path) -> None:
    """run-external --resume of a serve-world run listed five differences (transport, a command SHA-256 of None,
    --timeout-s None, ...) and no way forward; it says which command finishes the run."""
    args = ("serve-world", "--transport", "stdio", "--task", "cfg-search-ramp", "--mode", "unprotected")
    served = subprocess.run(
        [sys.executable, "-m", "contextdelta", *args, "--tasks", str(TASKS), "--results-dir", str(tmp_path),
         "--no-store"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    path = Path(served.stderr.strip().splitlines()[-1])
    refused = cli("run-external", "--agent-cmd", "true", "--agent", "agent", "--results-dir", str(tmp_path),
                  "--no-store", "--resume", path.name)  # fmt: skip
    said = " ".join(refused.stderr.split())
    assert refused.returncode == 2, said
    assert (
        "it is a serve-world run: finish it with `contextdelta serve-world --task cfg-search-ramp --mode unprotected "
        f"--transport stdio --agent agent --resume {path.name}`"
    ) in said
    # and serve-world's own resume names serve-world's flags (it said --task-ids and --protection-modes)
    other = cli(*args[:4], "order-grinder-refund", "--mode", "freshness_contract", "--tasks", str(TASKS),
                "--results-dir", str(tmp_path), "--no-store", "--resume", path.name)  # fmt: skip
    said = " ".join(other.stderr.split())
    assert other.returncode == 2, said
    assert "--mode: run has ['unprotected'], now ['freshness_contract']" in said
    assert "--task: run has ['cfg-search-ramp'], now ['order-grinder-refund']" in said


def test_an_unknown_task_among_several_problems_is_still_named_by_serve_worlds_own_flag(tmp_path: Path) -> None:
    """The checks that need no network are refused together ("2 problems"): the unknown task in that list is
    named by serve-world's --task as well, not by run-benchmark's --task-ids."""
    from typer.testing import CliRunner

    from contextdelta.cli import app

    not_a_folder = tmp_path / "results"
    not_a_folder.write_text("a file, not a folder\n", encoding="utf-8")
    args = ["serve-world", "--task", "nope", "--mode", "unprotected", "--tasks", str(TASKS)]
    result = CliRunner().invoke(app, [*args, "--results-dir", str(not_a_folder), "--no-store"])
    assert result.exit_code == 2, result.output
    message = " ".join(result.stderr.split())
    assert message.startswith("error: 2 problems; nothing was run:"), message
    assert "- --task: unknown task ids ['nope']" in message and "--task-ids" not in message
    assert not_a_folder.read_text(encoding="utf-8") == "a file, not a folder\n"
