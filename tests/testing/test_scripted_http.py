"""The scripted server over HTTP: routes, errors, keep-alive, one-send responses, concurrency, full episodes."""

from __future__ import annotations

import asyncio
import http.client
import json
import math
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from contextdelta.canonical import canonical_json
from contextdelta.providers import OpenAIProvider, RetryPolicy
from contextdelta.testing import SUMMARY_MARKER, ScriptedServer, fetch_stats, serve_scripted
from contextdelta.worlds import Outcome, ProtectionMode, get_world
from tests.testing.episode_loop import (
    FIXTURES,
    Episode,
    end_state_holds,
    first_messages,
    fixture_tasks,
    last_n,
    run_provider,
    stale_writes,
)

TASKS = fixture_tasks()
MUG = TASKS["fixture-mug-refund"]
TOOLS = get_world("order").tool_schemas(ProtectionMode.UNPROTECTED)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer("oracle", FIXTURES) as running:
        yield running


def request(
    server: ScriptedServer, method: str, path: str, body: Any = None, raw: bytes | None = None
) -> tuple[int, dict[str, Any]]:
    connection = http.client.HTTPConnection(server.host, server.port, timeout=10)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    connection.request(method, path, body=data, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    payload = json.loads(response.read())
    connection.close()
    return response.status, payload


def chat_body(**extra: Any) -> dict[str, Any]:
    return {"model": "scripted-oracle", "messages": first_messages(MUG), "tools": TOOLS, **extra}


def test_models(server: ScriptedServer) -> None:
    status, payload = request(server, "GET", "/v1/models")
    assert status == 200 and [m["id"] for m in payload["data"]] == ["scripted-oracle"]
    assert request(server, "GET", "/v1/models/scripted-oracle")[1]["id"] == "scripted-oracle"
    assert request(server, "GET", "/v1/models/gpt-4")[0] == 404


def test_chat_completion_shape(server: ScriptedServer) -> None:
    status, payload = request(server, "POST", "/v1/chat/completions", chat_body())
    assert status == 200
    assert payload["object"] == "chat.completion" and payload["model"] == "scripted-oracle"
    (choice,) = payload["choices"]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"][0]["function"] == {"name": "get_order", "arguments": '{"order_id":"A-1001"}'}
    usage = payload["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["prompt_tokens"] == math.ceil(len(canonical_json(first_messages(MUG)) + canonical_json(TOOLS)) / 4)
    assert usage["completion_tokens"] == math.ceil(len(canonical_json(choice["message"])) / 4)
    assert request(server, "POST", "/v1/chat/completions", chat_body())[1] == payload  # deterministic


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("GET", "/", None, 404, "not_found"),
        ("GET", "/v1/chat/completions", None, 404, "not_found"),
        ("POST", "/v1/completions", {"prompt": "x"}, 404, "not_found"),
        ("POST", "/v1/chat/completions", chat_body(stream=True), 400, "invalid_request"),
        ("POST", "/v1/chat/completions", {"messages": []}, 400, "invalid_request"),
        ("POST", "/v1/chat/completions", {"messages": [{"content": "x"}]}, 400, "invalid_request"),
        (
            "POST",
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "x"}], "tools": {}},
            400,
            "invalid_request",
        ),
        ("POST", "/v1/chat/completions", [1, 2], 400, "invalid_request"),
        ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hello"}]}, 400, "unknown_task"),
    ],
)
def test_errors(server: ScriptedServer, method: str, path: str, body: Any, status: int, code: str) -> None:
    got_status, payload = request(server, method, path, body)
    assert (got_status, payload["error"]["code"]) == (status, code)
    assert isinstance(payload["error"]["message"], str)


def test_stream_refusal_says_why(server: ScriptedServer) -> None:
    _, payload = request(server, "POST", "/v1/chat/completions", chat_body(stream=True))
    assert "Streaming is not supported" in payload["error"]["message"]


def test_bad_json_is_400(server: ScriptedServer) -> None:
    status, payload = request(server, "POST", "/v1/chat/completions", raw=b"{not json")
    assert status == 400 and payload["error"]["code"] == "invalid_json"


def test_keep_alive_on_one_connection_with_nodelay(server: ScriptedServer) -> None:
    """Many requests on one connection, each written on a TCP_NODELAY socket (no Nagle + delayed-ACK stall)."""
    connection = http.client.HTTPConnection(server.host, server.port, timeout=10)
    body = json.dumps(chat_body()).encode()
    sockets = set()
    for _ in range(30):
        connection.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        sockets.add(id(connection.sock))
        assert response.status == 200 and response.getheader("Connection") == "keep-alive"
    connection.close()
    assert len(sockets) == 1  # one TCP connection served all of them
    assert server.stats()["sends_without_nodelay"] == 0


def test_latency_ms_delays_each_answer() -> None:
    with ScriptedServer("oracle", FIXTURES, latency_ms=120) as slow:
        started = time.perf_counter()
        assert request(slow, "POST", "/v1/chat/completions", chat_body())[0] == 200
        assert time.perf_counter() - started >= 0.12


def test_stats_count_requests_and_faults() -> None:
    with serve_scripted("oracle", FIXTURES, in_process=True, fail_500="every:2", unknown_tool="at:3") as base_url:
        host = urlsplit(base_url)
        connection = http.client.HTTPConnection(host.hostname or "", host.port, timeout=10)
        statuses = []
        for _ in range(4):
            connection.request("POST", "/v1/chat/completions", body=json.dumps(chat_body()).encode())
            response = connection.getresponse()
            response.read()
            statuses.append(response.status)
        stats = fetch_stats(base_url)
    assert statuses == [200, 500, 200, 500]
    assert stats["requests"] == 4 and stats["faults"] == {"fail_500": 2, "unknown_tool": 1}


def _provider(base_url: str, model: str) -> OpenAIProvider:
    async def no_wait(_: float) -> None:
        return None

    return OpenAIProvider(base_url=base_url, model=model, retry=RetryPolicy(max_attempts=6), sleep=no_wait)


async def _episode(base_url: str, model: str, mode: ProtectionMode, reduce: int | None = None) -> Episode:
    async with _provider(base_url, model) as provider:
        return await run_provider(provider, MUG, mode, last_n(reduce) if reduce else None)


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(ProtectionMode))
def test_oracle_episode_over_http(mode: ProtectionMode) -> None:
    with serve_scripted("oracle", FIXTURES, in_process=True) as base_url:
        episode = asyncio.run(_episode(base_url, "scripted-oracle", mode))
    assert episode.final is not None and all(e.outcome is Outcome.EXECUTED for e in episode.events)
    assert end_state_holds(MUG, episode.world) == []
    assert all(r.usage is not None and r.usage.prompt_tokens > 0 for r in episode.responses)


def test_episode_survives_faults_and_redoes_corrupted_calls() -> None:
    faults: dict[str, Any] = {
        "fail_429": "at:1",
        "fail_500": "at:3",
        "drop_connection": "at:5",
        "malformed_args": "at:6",
        "unknown_tool": "at:8",
    }
    with serve_scripted("oracle", FIXTURES, in_process=True, **faults) as base_url:
        episode = asyncio.run(_episode(base_url, "scripted-oracle", ProtectionMode.FRESHNESS_CONTRACT))
        stats = fetch_stats(base_url)
    assert stats["faults"] == {k: 1 for k in faults}
    assert [r.retries for r in episode.responses][:3] == [1, 1, 1]
    invalid = [e for e in episode.events if e.outcome is Outcome.INVALID]
    assert [e.error_code for e in invalid] == ["malformed_arguments", "unknown_tool"]
    assert end_state_holds(MUG, episode.world) == [] and stale_writes(episode.world) == []


@pytest.mark.slow
def test_unsafe_and_context_trusting_over_http() -> None:
    with serve_scripted("unsafe", FIXTURES, in_process=True) as base_url:
        unsafe = asyncio.run(_episode(base_url, "scripted-unsafe", ProtectionMode.UNPROTECTED))
    assert [e.tool for e in stale_writes(unsafe.world)] == ["issue_refund"]
    with serve_scripted("context_trusting", FIXTURES, in_process=True) as base_url:
        full = asyncio.run(_episode(base_url, "scripted-context_trusting", ProtectionMode.UNPROTECTED))
        reduced = asyncio.run(_episode(base_url, "scripted-context_trusting", ProtectionMode.UNPROTECTED, reduce=1))
    assert [e.tool for e in stale_writes(full.world)] == ["add_order_note"]
    assert stale_writes(reduced.world) == []


def test_summary_request_over_http(server: ScriptedServer) -> None:
    body = {
        "model": "scripted-oracle",
        "messages": [
            {"role": "system", "content": f"{SUMMARY_MARKER}\nVersion: 1"},
            {"role": "user", "content": 'Result: {"order":{"resource":"order/order/A-1001","version":3}}'},
        ],
    }
    status, payload = request(server, "POST", "/v1/chat/completions", body)
    message = payload["choices"][0]["message"]
    assert status == 200 and "tool_calls" not in message and payload["choices"][0]["finish_reason"] == "stop"
    assert '{"resource":"order/order/A-1001","version":3}' in message["content"]


@pytest.mark.slow
def test_32_concurrent_episodes_against_a_subprocess_server() -> None:
    """The harness benchmark's shape: 32 episodes at once, keep-alive connections, one server process."""

    async def all_episodes(base_url: str) -> list[Episode]:
        async with _provider(base_url, "scripted-oracle") as provider:
            return await asyncio.gather(
                *(run_provider(provider, MUG, ProtectionMode.FRESHNESS_CONTRACT) for _ in range(32))
            )

    with serve_scripted("oracle", FIXTURES, latency_ms=20) as base_url:
        episodes = asyncio.run(all_episodes(base_url))
        stats = fetch_stats(base_url)
    assert all(end_state_holds(MUG, e.world) == [] for e in episodes)
    assert all(r.retries == 0 for e in episodes for r in e.responses)
    assert stats["requests"] == 32 * (len(MUG.evaluator.reference_solution) + 1)  # each call, then the answer
    assert stats["max_in_flight"] > 1  # the calls overlapped at the server


def test_chunked_request_bodies_are_read(server: ScriptedServer) -> None:
    data = json.dumps(chat_body()).encode()
    connection = http.client.HTTPConnection(server.host, server.port, timeout=10)
    connection.request("POST", "/v1/chat/completions", body=iter([data[:100], data[100:]]), encode_chunked=True)
    response = connection.getresponse()
    payload = json.loads(response.read())
    connection.close()
    assert (
        response.status == 200 and payload["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_order"
    )
