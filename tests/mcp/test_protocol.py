"""Protocol-level integrity of a served episode over real transports (loopback HTTP with the official ``mcp``
client and raw JSON-RPC, and stdio): one episode belongs to one MCP session, and every malformed JSON-RPC envelope
is answered -32600 Invalid Request, never taken for a notification nor let into the episode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from contextdelta.mcp import WorldEpisode
from contextdelta.tasks import Task, load_directory
from contextdelta.worlds import ProtectionMode

pytest.importorskip("mcp")
import httpx
from mcp import Client
from mcp.shared.exceptions import MCPError

from contextdelta.mcp._server import loopback_socket, serve_http
from tests.mcp.stdio_lines import line_exchange

ROOT = Path(__file__).resolve().parents[2]

BAD_ENVELOPES: dict[str, tuple[Any, str]] = {
    # line: (the id the error answers with, what its message names)
    '{"jsonrpc": "2.0", "id": true, "method": "tools/list"}': (None, "`id` that is a string or an integer"),
    '{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}': (None, "`id` that is a string or an integer"),
    '{"jsonrpc": "2.0", "id": 1.5, "method": "tools/call", "params": {"name": "list_flags"}}': (None, "`id`"),
    '{"jsonrpc": "2.0", "id": null, "method": "tools/list"}': (None, "`id`"),
    '{"jsonrpc": "2.0", "method": "tools/list"}': (None, "`id`"),
    '{"id": 3, "method": "tools/list"}': (3, "jsonrpc"),
    '{"jsonrpc": "1.0", "id": 3, "method": "tools/list"}': (3, "jsonrpc"),
    '{"jsonrpc": "2.0", "id": 3, "method": 5}': (3, "method"),
    '{"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": 7}': (3, "params"),
    "[]": (None, "empty batch"),
}


def task(task_id: str = "cfg-search-ramp") -> Task:
    loaded, problems = load_directory(ROOT / "tasks")
    assert not problems
    return next(t.task for t in loaded if t.task.id == task_id)


def episode() -> WorldEpisode:
    chosen = task()
    return WorldEpisode(chosen, chosen.build_world(ProtectionMode.UNPROTECTED), "p", "streamable-http", 20)


HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
HELLO = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}


async def post(client: httpx.AsyncClient, url: str, body: str, headers: dict[str, str]) -> tuple[int, Any]:
    answer = await client.post(url, content=body, headers=headers)
    if "event-stream" in answer.headers.get("content-type", ""):
        data = [line[5:] for line in answer.text.splitlines() if line.startswith("data:")]
        return answer.status_code, json.loads(data[-1])
    return answer.status_code, answer.json() if answer.content else None


async def open_session(client: httpx.AsyncClient, url: str) -> dict[str, str]:
    hello = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": HELLO})
    answer = await client.post(url, content=hello, headers=HEADERS)
    assert answer.status_code == 200, answer.text
    headers = {**HEADERS, "mcp-session-id": answer.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
    await post(client, url, json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), headers)
    return headers


def leaves(group: BaseException) -> list[BaseException]:
    if isinstance(group, BaseExceptionGroup):
        return [leaf for inner in group.exceptions for leaf in leaves(inner)]
    return [group]


def test_a_second_mcp_client_is_refused_and_never_reaches_the_episode() -> None:
    served = episode()
    refused: list[str] = []

    async def main() -> None:
        async with serve_http(served, loopback_socket()) as url, Client(url) as first:
            await first.call_tool("list_configs", {"environment": "prod"})
            try:
                async with Client(url) as second:
                    await second.call_tool("list_configs", {"environment": "staging"})
            except* MCPError as group:  # the SDK client raises it inside its task groups
                refused.extend(str(exc) for exc in leaves(group))
            await first.call_tool("list_flags", {})  # the first session goes on unharmed

    anyio.run(main)
    assert len(refused) == 1 and "an MCP session already holds it" in refused[0], refused
    assert [step.tool_calls[0].name for step in served.steps] == ["list_configs", "list_flags"]


def test_a_raw_second_initialize_gets_http_409_naming_why() -> None:
    served = episode()

    async def main() -> tuple[int, Any]:
        async with serve_http(served, loopback_socket()) as url, httpx.AsyncClient(timeout=30) as client:
            await open_session(client, url)
            hello = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": HELLO})
            return await post(client, url, hello, HEADERS)

    status, answer = anyio.run(main)
    assert status == 409
    assert (answer["id"], answer["error"]["code"]) == (9, -32600)
    assert "one ContextDelta episode" in answer["error"]["message"]


def test_the_sessionless_protocol_is_refused_naming_the_session_versions() -> None:
    served = episode()
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_flags", "arguments": {}}}

    async def main() -> tuple[int, Any]:
        async with serve_http(served, loopback_socket()) as url, httpx.AsyncClient(timeout=30) as client:
            return await post(client, url, json.dumps(call), {**HEADERS, "mcp-protocol-version": "2026-07-28"})

    status, answer = anyio.run(main)
    assert status == 400 and answer["error"]["code"] == -32600
    assert "2025-06-18" in answer["error"]["message"] and "'2026-07-28'" in answer["error"]["message"]
    assert served.steps == []


def test_every_malformed_envelope_over_http_is_an_invalid_request_error_never_a_202() -> None:
    served = episode()

    async def main() -> list[tuple[int, Any]]:
        async with serve_http(served, loopback_socket()) as url, httpx.AsyncClient(timeout=30) as client:
            headers = await open_session(client, url)
            answers = [await post(client, url, line, headers) for line in BAD_ENVELOPES]
            call = {"name": "get_config", "arguments": {"environment": "prod", "key": "search.max_results"}}
            good = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": call})
            return [*answers, await post(client, url, good, headers)]

    *answers, good = anyio.run(main)
    for (line, (request_id, named)), (status, answer) in zip(BAD_ENVELOPES.items(), answers, strict=True):
        assert status == 400, (line, status, answer)
        assert (answer["error"]["code"], answer["id"]) == (-32600, request_id), (line, answer)
        assert named in answer["error"]["message"], (line, answer)
    assert good[0] == 200 and good[1]["id"] == 5 and not good[1]["result"]["isError"]
    assert [step.tool_calls[0].name for step in served.steps] == ["get_config"]  # nothing else reached the world


def test_every_malformed_envelope_over_stdio_is_an_invalid_request_error(tmp_path: Path) -> None:
    import subprocess
    import sys

    server = subprocess.Popen(
        [sys.executable, "-m", "contextdelta", "serve-world", "--transport", "stdio", "--task", "cfg-search-ramp",
         "--mode", "unprotected", "--tasks", str(ROOT / "tasks"), "--results-dir", str(tmp_path), "--no-store"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    assert server.stdin is not None and server.stdout is not None
    send = line_exchange(server)

    try:
        assert send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": HELLO}))["id"] == 0
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        answers = {line: send(line) for line in BAD_ENVELOPES}
        server.stdin.close()
        server.wait(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
    for line, (request_id, _) in BAD_ENVELOPES.items():
        assert (answers[line]["error"]["code"], answers[line]["id"]) == (-32600, request_id), (line, answers[line])


def test_a_session_its_client_ends_ends_the_episode_as_closed_instead_of_leaving_it_waiting() -> None:
    """No other session may take the episode up, so one whose session ended (the client's DELETE, which the SDK
    client sends as it leaves) is over at once: before, serve-world over HTTP waited for a Ctrl-C."""
    served = episode()

    async def main() -> bool:
        async with serve_http(served, loopback_socket()) as url:
            async with Client(url) as client:
                await client.call_tool("list_configs", {"environment": "prod"})
                assert not served.over
            with anyio.move_on_after(5):
                while not served.over:
                    await anyio.sleep(0.01)
            return served.over

    assert anyio.run(main)
    trace = served.trace()
    assert trace.external is not None and trace.external.ended_by == "session_closed"
    assert trace.termination.value == "provider_error" and len(trace.steps) == 1
    assert trace.error == "the MCP session closed before the agent called finish: it gave no final answer"


def test_a_delete_naming_another_session_changes_nothing() -> None:
    served = episode()

    async def main() -> int:
        async with serve_http(served, loopback_socket()) as url, httpx.AsyncClient(timeout=30) as client:
            headers = await open_session(client, url)
            answer = await client.delete(url, headers={**headers, "mcp-session-id": "not-the-session"})
            return answer.status_code

    assert anyio.run(main) == 404 and not served.over


def test_a_client_that_disconnects_while_its_call_runs_ends_the_episode_with_the_call_recorded_as_undelivered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The call ran against the world (it is judged as the action that happened), its result never reached the
    client: the step says so and the episode ends as `client_disconnected` (a failed trial) instead of waiting for
    a client that no longer knows what its call did."""
    import time

    served = episode()
    world_call = served.world.call

    def slow_call(*args: Any) -> Any:
        time.sleep(1.0)  # the client gives up after 0.3 s, while this runs
        return world_call(*args)

    monkeypatch.setattr(served.world, "call", slow_call)
    params = {"name": "list_configs", "arguments": {"environment": "prod"}}
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}

    async def main() -> bool:
        async with serve_http(served, loopback_socket()) as url, httpx.AsyncClient(timeout=30) as client:
            headers = await open_session(client, url)

            def give_up() -> None:  # another thread: the server's event loop goes on meanwhile
                with pytest.raises(httpx.ReadTimeout):
                    httpx.post(url, content=json.dumps(call), headers=headers, timeout=0.3)

            await anyio.to_thread.run_sync(give_up)
            with anyio.move_on_after(10):
                while not served.over:
                    await anyio.sleep(0.02)
            return served.over

    assert anyio.run(main)
    trace = served.trace()
    assert trace.termination.value == "provider_error"
    assert trace.external is not None and trace.external.ended_by == "client_disconnected"
    assert trace.error == (
        "the client disconnected while its call of list_configs (step 1) ran: the call was executed and its result "
        "never delivered"
    )
    (step,) = trace.steps
    assert [event.outcome.value for event in step.evaluator.tool_events] == ["executed"]
    assert step.note == "the client disconnected before this call's result was delivered; the call was executed"


def test_a_body_over_the_limit_is_a_json_rpc_error_naming_it_and_the_session_goes_on() -> None:
    served = episode()
    huge = {"environment": "prod", "key": "x" * 5_000_000}
    big = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_config", "arguments": huge}}
    small = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_flags", "arguments": {}}}

    async def main() -> list[tuple[int, Any]]:
        async with serve_http(served, loopback_socket()) as url, httpx.AsyncClient(timeout=30) as client:
            headers = await open_session(client, url)
            return [await post(client, url, json.dumps(message), headers) for message in (big, small)]

    (status, answer), (after, _) = anyio.run(main)
    assert status == 413 and answer["error"]["code"] == -32600
    assert "over 4194304 bytes" in answer["error"]["message"] and "smaller arguments" in answer["error"]["message"]
    assert after == 200 and [step.tool_calls[0].name for step in served.steps] == ["list_flags"]


def test_json_nested_deeper_than_the_parser_goes_is_a_parse_error_not_a_server_error() -> None:
    served = episode()
    deep = '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_config", "arguments": '
    bodies = [deep + "[" * 200_000 + "]" * 200_000 + "}}", "[" * 200_000 + "]" * 200_000]
    after = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "list_flags", "arguments": {}}}

    async def main() -> list[tuple[int, Any]]:
        async with serve_http(served, loopback_socket()) as url, httpx.AsyncClient(timeout=30) as client:
            headers = await open_session(client, url)
            return [await post(client, url, body, headers) for body in [*bodies, json.dumps(after)]]

    *refused, (status, _) = anyio.run(main)
    assert [(code, answer["error"]["code"]) for code, answer in refused] == [(400, -32700)] * 2, refused
    assert status == 200 and [step.tool_calls[0].name for step in served.steps] == ["list_flags"]
