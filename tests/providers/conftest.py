"""Fixtures for the provider tests: a recording sleep (retries never really wait) and a scripted endpoint."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import pytest

from contextdelta.agent import EpisodeTrace, run_episode
from contextdelta.context import create_strategy
from contextdelta.providers import ENDPOINT_CHECK_TOOL, OpenAIProvider, ProviderFailure, RetryPolicy
from contextdelta.testing import serve_scripted
from tests.agent.helpers import make_task, make_world
from tests.testing.episode_loop import FIXTURES


class RecordingSleep:
    """Stands in for ``asyncio.sleep`` between retries: records each wait and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def sleep() -> RecordingSleep:
    return RecordingSleep()


ScriptedFactory = Callable[..., AbstractContextManager[str]]


@pytest.fixture
def scripted() -> Iterator[ScriptedFactory]:
    """``with scripted(policy="oracle", **faults) as base_url``: an in-process scripted server on a free port."""

    def start(policy: str = "oracle", **options: Any) -> AbstractContextManager[str]:
        return serve_scripted(policy, FIXTURES, in_process=True, **options)

    yield start


class RawEndpoint:
    """A loopback HTTP endpoint that answers each POST with the next of ``bodies`` (the last one again once they
    run out), byte for byte, with HTTP ``status`` and extra ``headers``: the misbehaving servers the scripted server
    cannot play, and the reply shapes of real endpoints. ``requests`` counts the POSTs and ``received`` keeps their
    request bodies, decoded; a body given as an iterator of chunks is sent with chunked transfer encoding and no
    Content-Length. The endpoint check ``run-benchmark`` makes first gets a plain answer and is not counted (unless
    ``check_too``: then it is answered and counted as every other POST)."""

    def __init__(
        self,
        bodies: Sequence[bytes | Callable[[], Iterator[bytes]]],
        status: int = 200,
        headers: dict[str, str] | None = None,
        check_too: bool = False,
    ) -> None:
        self.bodies = bodies
        self.status = status
        self.headers = headers or {}
        self.requests = 0
        self.received: list[dict[str, Any]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                request = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body: bytes | Callable[[], Iterator[bytes]]
                is_check = ENDPOINT_CHECK_TOOL.encode() in request and not check_too
                if is_check:  # run-benchmark's endpoint check: a plain answer
                    body = completion({"content": "ok"})
                else:
                    endpoint.requests += 1
                    endpoint.received.append(json.loads(request))
                    body = endpoint.bodies[min(endpoint.requests, len(endpoint.bodies)) - 1]
                self.send_response(200 if is_check else endpoint.status)
                self.send_header("Content-Type", "application/json")
                for name, value in endpoint.headers.items():
                    self.send_header(name, value)
                if isinstance(body, bytes):
                    self.send_header("Content-Length", str(len(body)))
                else:
                    self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    if isinstance(body, bytes):
                        self.wfile.write(body)
                        return
                    for chunk in body():
                        self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:  # the client gave up reading: what a capped reader does
                    self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> RawEndpoint:
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def completion(
    message: dict[str, Any], finish_reason: Any = "stop", choice: dict[str, Any] | None = None, **fields: Any
) -> bytes:
    """A chat-completion body with one choice holding ``message``, as the raw bytes a server sends: ``choice`` adds
    fields to the choice, ``fields`` to the body (replacing ``usage``, say; a field given as ``...`` is left out)."""
    one = {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish_reason, **(choice or {})}
    usage = {"prompt_tokens": 10, "completion_tokens": 2}
    body = {"id": "c-1", "object": "chat.completion", "model": "raw", "choices": [one], "usage": usage, **fields}
    return json.dumps({key: value for key, value in body.items() if value is not ...}).encode()


def tool_call(arguments: Any, name: str = "get_order") -> bytes:
    """A completion with one tool call whose ``function.arguments`` is ``arguments`` exactly as given."""
    call = {"id": "call-1", "type": "function", "function": {"name": name, "arguments": arguments}}
    return completion({"content": None, "tool_calls": [call]})


RETRIES = RetryPolicy(max_attempts=3, max_total_s=60.0, initial_backoff_s=0.5, max_backoff_s=1.0, jitter_s=0.0)
MESSAGES = [{"role": "user", "content": "Look up order A-1001."}]


def complete(endpoint: RawEndpoint, sleep: RecordingSleep, api_key: str = "k") -> Any:
    """One call's ProviderResponse, or the ProviderFailure it raised."""

    async def go() -> Any:
        async with OpenAIProvider(
            base_url=endpoint.base_url, model="raw", api_key=api_key, retry=RETRIES, sleep=sleep, timeout_s=30
        ) as provider:
            try:
                return await provider.complete(MESSAGES, None)
            except ProviderFailure as failure:
                return failure

    return asyncio.run(go())


def episode(endpoint: RawEndpoint, max_steps: int = 4) -> EpisodeTrace:
    """One episode of the built-in loop against the endpoint (no retry waits), on the order task of
    tests/agent/helpers.py."""
    task = make_task()

    async def go() -> EpisodeTrace:
        async with OpenAIProvider(base_url=endpoint.base_url, model="raw", api_key="k", retry=RETRIES) as provider:
            strategy = create_strategy("full_history")
            return await run_episode(
                task.public_task, make_world(task), provider, strategy, max_steps=max_steps, seed=1
            )

    return anyio.run(go)
