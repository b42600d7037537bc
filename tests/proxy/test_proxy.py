"""The recording proxy, driven through the ``openai`` client, with the scripted server (and a small SSE server) as
upstream: recorded pairs, redaction, streaming passthrough, upstream errors, the bearer token."""

from __future__ import annotations

import contextlib
import gzip
import http.client
import json
import logging
import socket
import threading
import time
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import openai
import pytest

from contextdelta.agent import initial_messages
from contextdelta.providers import MAX_RESPONSE_BYTES
from contextdelta.proxy import REDACTED, ProxyConfig, RecordingProxy, Redactor, reassemble_stream
from contextdelta.store import Store
from contextdelta.tasks.loader import load_directory
from contextdelta.testing import serve_scripted
from contextdelta.worlds import ProtectionMode

TASKS = Path(__file__).resolve().parents[2] / "tasks"
CLIENT_KEY = "sk-proxytest-CLIENTKEY-0123456789abcdef"
UPSTREAM_KEY = "sk-proxytest-UPSTREAMKEY-abcdef0123456789"
URL_PASSWORD = "hunter2-url-password"


@pytest.fixture(scope="module")
def oracle_url() -> Iterator[str]:
    with serve_scripted("oracle", TASKS, in_process=True) as url:
        yield url


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(f"sqlite:///{tmp_path / 'proxy.db'}") as opened:
        yield opened


def _task_request() -> dict[str, Any]:
    loaded, _ = load_directory(TASKS)
    task = next(t.task for t in loaded if t.task.id == "order-grinder-refund")
    world = task.build_world(ProtectionMode.UNPROTECTED)
    return {"model": "scripted-oracle", "messages": initial_messages(task.public_task), "tools": world.tool_schemas()}


def _client(proxy: RecordingProxy, key: str = CLIENT_KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.base_url, api_key=key, max_retries=0, timeout=30)


def _database_bytes(tmp_path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in tmp_path.glob("proxy.db*"))


def test_chat_and_models_are_forwarded_and_recorded(oracle_url: str, store: Store) -> None:
    with RecordingProxy(ProxyConfig(upstream=oracle_url), store) as proxy:
        client = _client(proxy)
        completion = client.chat.completions.create(**_task_request())
        models = client.models.list()
    assert completion.choices[0].message.tool_calls, "the oracle's first step is a tool call"
    assert [m.id for m in models.data] == ["scripted-oracle"]
    chat, listing = store.proxy_traces()
    assert (chat.method, chat.path, chat.status_code, chat.stream) == ("POST", "/v1/chat/completions", 200, False)
    assert chat.model == "scripted-oracle" and chat.upstream == oracle_url
    assert chat.request["messages"][1]["role"] == "user"
    assert chat.response["id"] == completion.id
    assert completion.usage is not None
    assert (chat.prompt_tokens, chat.completion_tokens) == (
        completion.usage.prompt_tokens,
        completion.usage.completion_tokens,
    )
    assert chat.latency_s > 0 and chat.first_byte_s is not None and chat.first_byte_s <= chat.latency_s
    assert (listing.method, listing.path, listing.status_code) == ("GET", "/v1/models", 200)
    assert listing.response["data"][0]["id"] == "scripted-oracle"


def test_keys_and_url_credentials_never_reach_the_database_or_the_log(
    oracle_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    upstream = oracle_url.replace("http://", f"http://user:{URL_PASSWORD}@")
    with Store.open(f"sqlite:///{tmp_path / 'proxy.db'}") as opened:
        with RecordingProxy(ProxyConfig(upstream=upstream, upstream_api_key=UPSTREAM_KEY), opened) as proxy:
            _client(proxy).chat.completions.create(
                **_task_request(), extra_body={"api_key": CLIENT_KEY, "metadata": {"note": f"my key is {CLIENT_KEY}"}}
            )
        (trace,) = opened.proxy_traces()
    assert trace.request["api_key"] == REDACTED
    assert trace.request["metadata"]["note"] == f"my key is {REDACTED}"
    assert trace.upstream == oracle_url  # the user:password part is gone
    database = _database_bytes(tmp_path)
    assert b"scripted-oracle" in database  # the file is readable as bytes: the check below means something
    for secret in (CLIENT_KEY, UPSTREAM_KEY, URL_PASSWORD):
        assert secret.encode() not in database
        assert secret not in caplog.text


def test_upstream_500_passes_through_unchanged(store: Store) -> None:
    with (
        serve_scripted("oracle", TASKS, in_process=True, fail_500="all") as failing,
        RecordingProxy(ProxyConfig(upstream=failing), store) as proxy,
        pytest.raises(openai.InternalServerError) as raised,
    ):
        _client(proxy).chat.completions.create(**_task_request())
    assert raised.value.status_code == 500
    assert "failed this request on purpose" in str(raised.value)
    body = raised.value.body
    assert isinstance(body, dict) and body.get("code") == "injected_fault"
    (trace,) = store.proxy_traces()
    assert trace.status_code == 500 and "on purpose" in (trace.error or "")


def test_an_unreachable_upstream_is_a_502_with_an_openai_error(store: Store) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    with (
        RecordingProxy(ProxyConfig(upstream=f"http://127.0.0.1:{port}/v1"), store) as proxy,
        pytest.raises(openai.APIStatusError) as raised,
    ):
        _client(proxy).chat.completions.create(**_task_request())
    assert raised.value.status_code == 502
    (trace,) = store.proxy_traces()
    assert trace.status_code == 502 and "unreachable" in (trace.error or "")


def test_the_bearer_token_protects_the_proxy(oracle_url: str, store: Store) -> None:
    token = "proxy-token-abcdef123456"
    with RecordingProxy(ProxyConfig(upstream=oracle_url, token=token), store) as proxy:
        with pytest.raises(openai.AuthenticationError):
            _client(proxy, key="wrong-token").models.list()
        assert [m.id for m in _client(proxy, key=token).models.list().data] == ["scripted-oracle"]
    (trace,) = store.proxy_traces()  # the refused request was never forwarded, so never recorded
    assert trace.status_code == 200


# ---- streaming --------------------------------------------------------------------------------------------------

PIECES = ["Stale ", "state ", "is ", "dangerous."]


class _SSEHandler(BaseHTTPRequestHandler):
    """A minimal streaming upstream: four content chunks 50 ms apart, then a usage chunk and [DONE]."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        assert body["stream"] is True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        base = {"id": "chatcmpl-sse", "object": "chat.completion.chunk", "created": 0, "model": "sse-model"}
        events = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
        events += [{**base, "choices": [{"index": 0, "delta": {"content": p}}]} for p in PIECES]
        events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        events.append(
            {**base, "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 4, "total_tokens": 11}}
        )
        for event in events:
            self._chunk(f"data: {json.dumps(event)}\n\n".encode())
            time.sleep(0.05)
        self._chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


@contextlib.contextmanager
def serve_handler(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A loopback HTTP server with ``handler`` in a thread; yields its root URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def sse_url() -> Iterator[str]:
    with serve_handler(_SSEHandler) as root:
        yield f"{root}/v1"


@pytest.mark.slow
def test_streaming_is_relayed_chunk_by_chunk_and_reassembled(sse_url: str, store: Store) -> None:
    with RecordingProxy(ProxyConfig(upstream=sse_url), store) as proxy:
        started = time.perf_counter()
        stream = _client(proxy).chat.completions.create(
            model="sse-model",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        arrivals, pieces = [], []
        for chunk in stream:
            arrivals.append(time.perf_counter() - started)
            if chunk.choices and chunk.choices[0].delta.content:
                pieces.append(chunk.choices[0].delta.content)
    assert pieces == PIECES
    assert arrivals[-1] - arrivals[0] > 0.2  # chunks came as the upstream sent them, not in one piece at the end
    (trace,) = store.proxy_traces()
    assert trace.stream and trace.status_code == 200
    assert trace.response["choices"][0]["message"]["content"] == "".join(PIECES)
    assert trace.response["choices"][0]["finish_reason"] == "stop"
    assert (trace.prompt_tokens, trace.completion_tokens, trace.total_tokens) == (7, 4, 11)
    assert trace.response_text is not None and trace.response_text.rstrip().endswith("data: [DONE]")


def test_reassembly_merges_tool_call_fragments() -> None:
    chunks = [
        {
            "id": "x",
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "role": "assistant",
                        "tool_calls": [
                            {"index": 0, "id": "call_1", "function": {"name": "get_order", "arguments": '{"order'}}
                        ],
                    },
                }
            ],
        },
        {
            "id": "x",
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '_id": "A-1"}'}}]},
                    "finish_reason": "tool_calls",
                }
            ],
        },
    ]
    sse = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    merged = reassemble_stream(sse)
    assert merged is not None
    call = merged["choices"][0]["message"]["tool_calls"][0]
    assert call["id"] == "call_1" and json.loads(call["function"]["arguments"]) == {"order_id": "A-1"}


def test_redactor_masks_keys_values_and_key_shaped_strings() -> None:
    redactor = Redactor(["s3cret-token"])
    value = {
        "api_key": "anything",
        "Authorization": "Bearer abc",
        "max_tokens": 5,
        "prompt_tokens": 3,
        "messages": [{"content": "use s3cret-token or sk-abcdefghijklmnop1234 with Bearer abcdefghijkl"}],
    }
    redacted = redactor.json(value)
    assert redacted["api_key"] == REDACTED and redacted["Authorization"] == REDACTED
    assert (redacted["max_tokens"], redacted["prompt_tokens"]) == (5, 3)  # *_tokens are counts, not secrets
    assert redacted["messages"][0]["content"] == f"use {REDACTED} or {REDACTED} with Bearer {REDACTED}"


@pytest.mark.slow
def test_cli_serve_prints_ready_records_and_stops_on_sigterm(oracle_url: str, tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path / 'proxy.db'}"
    # the token comes from .env in the working folder, read like every other setting (SPEC section 2)
    (tmp_path / ".env").write_text("CONTEXTDELTA_PROXY_TOKEN=cli-token-0123456789\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "CONTEXTDELTA_PROXY_TOKEN"}
    process = subprocess.Popen(
        [sys.executable, "-m", "contextdelta", "serve", "--upstream", oracle_url, "--port", "0", "--database-url", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        assert process.stdout is not None
        ready = process.stdout.readline()
        assert ready.startswith("ready port="), ready
        fields = dict(part.split("=", 1) for part in ready.split()[1:])
        assert fields["base_url"].startswith("http://127.0.0.1:") and fields["upstream"] == oracle_url
        stranger = openai.OpenAI(base_url=fields["base_url"], api_key="not-the-token", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            stranger.models.list()
        client = openai.OpenAI(base_url=fields["base_url"], api_key="cli-token-0123456789", max_retries=0)
        assert [m.id for m in client.models.list().data] == ["scripted-oracle"]
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert "GET /v1/models -> 200" in err and "cli-token-0123456789" not in err
    with Store.open(url) as opened:
        assert [t.path for t in opened.proxy_traces()] == ["/v1/models"]


# ---- upstreams that break off, and requests the proxy cannot frame ----------------------------------------------


class _BrokenHandler(BaseHTTPRequestHandler):
    """An upstream that fails after its headers: ``/v1/short/...`` sends fewer bytes than its Content-Length,
    ``/v1/stall/...`` sends half its body and stalls, ``/v1/cut/...`` cuts an SSE stream after two events,
    ``/v1/html/...`` answers 200 with HTML; ``/v1/huge/...`` declares a body past the cap, ``/v1/endless/...``
    sends one (chunked, no Content-Length), ``/v1/flood/...`` an SSE stream past it; ``/v1/surrogate/...``
    answers JSON holding lone surrogates; ``/v1/drip/...`` sends a whole body a byte at a time, for about 5 s;
    ``/v1/gzip/...`` and ``/v1/deflate/...`` answer a compressed completion (``/v1/gzipstream/...`` a compressed
    SSE stream, ``/v1/early/...`` the gzip one after a 103 Early Hints), ``/v1/redirect/...`` a 307,
    ``/v1/hang/...`` nothing for 3 s, ``/v1/text502/...`` a plain-text 502,
    ``/v1/folded/...`` a completion with a header folded over two lines, ``/v1/shouted/...`` a stream
    whose content type is in capitals, ``/v1/quiet/...`` one
    event of a stream and then 3 s of silence."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self, status: int, content_type: str, body: bytes, headers: dict[str, str] | None = None) -> None:
        """One whole answer with its Content-Length."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        kind = self.path.split("/")[2]
        if kind in ("huge", "endless", "flood"):
            self._send_too_much(kind)
            return
        if kind == "early":  # an interim 103 Early Hints, then the answer
            self.send_response_only(103)
            self.send_header("Link", "</style.css>; rel=preload")
            self.end_headers()
            kind = "gzip"
        if kind in ENCODED:
            status, content_type, headers, body = ENCODED[kind]
            self._answer(status, content_type, body, headers)
            return
        if kind == "hang":
            time.sleep(3)
            return
        if kind == "quiet":  # one event of a stream, then silence
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            event = b'data: {"id": "q", "choices": [{"index": 0, "delta": {"content": "thinking"}}]}\n\n'
            self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
            self.wfile.flush()
            time.sleep(3)
            return
        if kind == "garbled":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(GARBLED_STREAM)))
            self.end_headers()
            self.wfile.write(GARBLED_STREAM)
            return
        if kind == "drip":  # a whole, valid body, one byte every 50 ms: each read is quick, the body never ends
            body = json.dumps({"id": "drip", "object": "chat.completion", "choices": [], "padding": " " * 60}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(OSError):  # the proxy stops reading at its deadline
                for byte in body:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.05)
            return
        if kind == "surrogate":
            self._answer(200, "application/json", SURROGATE_COMPLETION)
            return
        if kind == "cut":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
            for piece in ("partial ", "answer"):
                data = f"data: {json.dumps({**chunk, 'choices': [{'index': 0, 'delta': {'content': piece}}]})}\n\n"
                self.wfile.write(f"{len(data):x}\r\n{data}\r\n".encode())
            self.wfile.flush()
        elif kind == "html":
            body = b"<html>not json</html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        else:
            body = b'{"id": "chatcmpl-short", "choices": ['
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body) + 100))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
            if kind == "stall":
                time.sleep(3)
        self.close_connection = True

    def _send_too_much(self, kind: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream" if kind == "flood" else "application/json")
        if kind == "huge":
            self.send_header("Content-Length", str(MAX_RESPONSE_BYTES + 1))
        else:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        piece = b": keep-alive " + b" " * (1024 * 1024) + b"\n\n"  # an SSE comment; whitespace for JSON
        with contextlib.suppress(OSError):  # the proxy stops reading: what the cap is for
            for _ in range(MAX_RESPONSE_BYTES // len(piece) + 2):
                if kind == "huge":
                    self.wfile.write(piece)
                else:
                    self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        self.close_connection = True


GARBLED_CHUNKS: list[Any] = [
    {"id": "g", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Looking "}}]},
    {"id": "g", "choices": ["not an object", {"index": "0", "delta": "not an object"}, {"index": True}]},
    {"id": "g", "choices": [{"index": 0, "delta": {"content": ["a", "list"], "tool_calls": "not a list"}}]},
    {"id": "g", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 10**9, "function": "get_order"}]}}]},
    {"id": "g", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": -1, "function": {"name": 7}}]}}]},
    {"id": "g", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"name": "get_order"}}]}}]},
    {"id": "g", "choices": [{"index": 0, "delta": {"content": "it up."}, "finish_reason": ["stop"]}]},
]
"""Stream chunks of every wrong shape a misbehaving upstream can send, between well-formed ones."""
GARBLED_STREAM = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in GARBLED_CHUNKS).encode() + b"data: [DONE]\n\n"


SURROGATE_COMPLETION = json.dumps(
    {
        "id": "c",
        "object": "chat.completion",
        "model": "m\udc00",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "half \ud800 a pair",
                    "tool_calls": [
                        {"id": "t", "type": "function", "function": {"name": "f", "arguments": '{"a": "\udfff"}'}}
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
    }
).encode()
"""``json.dumps`` writes each lone surrogate as its ``\\ud800`` escape, as a misbehaving server would."""


COMPLETION = {
    "id": "chatcmpl-zip",
    "object": "chat.completion",
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "packed"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}
_COMPLETION_BYTES = json.dumps(COMPLETION).encode()
ENCODED: dict[str, tuple[int, str, dict[str, str], bytes]] = {
    "gzip": (200, "application/json", {"Content-Encoding": "gzip"}, gzip.compress(_COMPLETION_BYTES)),
    "deflate": (200, "application/json", {"Content-Encoding": "deflate"}, zlib.compress(_COMPLETION_BYTES)),
    "gzipstream": (200, "text/event-stream", {"Content-Encoding": "gzip"}, gzip.compress(GARBLED_STREAM)),
    "redirect": (307, "text/plain", {"Location": "https://user:pw@elsewhere.example/v1/chat/completions?k=1"}, b""),
    "text502": (502, "text/plain", {}, b"Bad gateway"),
    "shouted": (200, "Text/Event-Stream; charset=UTF-8", {}, GARBLED_STREAM),
    "folded": (200, "application/json", {"x-request-id": "req-1\r\n\tcontinued"}, _COMPLETION_BYTES),
}
"""What ``_BrokenHandler`` answers for these kinds: status, content type, further headers, body."""


@pytest.fixture
def broken_root() -> Iterator[str]:
    with serve_handler(_BrokenHandler) as root:
        yield root


@pytest.mark.parametrize("kind", ["short", "stall"])
def test_an_upstream_that_breaks_off_its_body_is_a_502_recorded_as_failed(
    kind: str, broken_root: str, store: Store
) -> None:
    config = ProxyConfig(upstream=f"{broken_root}/v1/{kind}", timeout_s=1.0)
    with RecordingProxy(config, store) as proxy, pytest.raises(openai.APIStatusError) as raised:
        _client(proxy).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert raised.value.status_code == 502 and "broke off its response" in str(raised.value)
    (trace,) = store.proxy_traces()
    assert trace.status_code == 502 and "broke off its response" in (trace.error or "")
    if kind == "short":
        assert trace.response_text == '{"id": "chatcmpl-short", "choices": ['  # the part that arrived is kept


def test_an_upstream_that_drips_its_body_is_cut_at_the_timeout_not_held_open(broken_root: str, store: Store) -> None:
    """Every read returns within the socket's timeout, so only a deadline on the whole body ends the request."""
    config = ProxyConfig(upstream=f"{broken_root}/v1/drip", timeout_s=1.0)
    with RecordingProxy(config, store) as proxy, pytest.raises(openai.APIStatusError) as raised:
        _client(proxy).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert raised.value.status_code == 502 and "still arriving 1 s after the request (--timeout-s)" in str(raised.value)
    (trace,) = store.proxy_traces()
    assert trace.status_code == 502 and "still arriving" in (trace.error or "")


def test_a_stream_cut_mid_way_ends_abnormally_for_the_client_and_is_recorded_with_its_part(
    broken_root: str, store: Store
) -> None:
    with RecordingProxy(ProxyConfig(upstream=f"{broken_root}/v1/cut"), store) as proxy:
        stream = _client(proxy).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        pieces = []
        with pytest.raises(openai.APIConnectionError):  # the client sees the stream torn, as it was
            for chunk in stream:
                pieces.append(chunk.choices[0].delta.content)
    assert pieces == ["partial ", "answer"]
    (trace,) = store.proxy_traces()
    assert trace.error is not None and trace.error.startswith("upstream stream broke off after")
    assert trace.response is not None and trace.response["choices"][0]["message"]["content"] == "partial answer"


def test_a_200_that_is_not_json_is_recorded_as_an_error(broken_root: str, store: Store) -> None:
    import urllib.request

    with RecordingProxy(ProxyConfig(upstream=f"{broken_root}/v1/html"), store) as proxy:
        request = urllib.request.Request(
            f"{proxy.base_url}/chat/completions", data=b'{"model": "m", "messages": []}', method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200 and response.read() == b"<html>not json</html>"  # passed on as it came
    (trace,) = store.proxy_traces()
    assert trace.status_code == 200 and trace.error == "upstream answered HTTP 200 with a body that is not JSON"
    assert trace.response_text == "<html>not json</html>"


@pytest.mark.parametrize("kind", ["huge", "endless"])
def test_an_upstream_body_past_the_cap_is_a_502_recorded_as_failed(kind: str, broken_root: str, store: Store) -> None:
    config = ProxyConfig(upstream=f"{broken_root}/v1/{kind}")
    with RecordingProxy(config, store) as proxy, pytest.raises(openai.APIStatusError) as raised:
        _client(proxy).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert raised.value.status_code == 502 and "MAX_RESPONSE_BYTES" in str(raised.value)
    (trace,) = store.proxy_traces()
    assert trace.status_code == 502 and trace.error is not None and "64 MiB" in trace.error
    assert trace.response is None and trace.response_text is None


def test_a_stream_past_the_cap_is_cut_for_the_client_and_recorded_as_failed(broken_root: str, store: Store) -> None:
    import urllib.request

    with RecordingProxy(ProxyConfig(upstream=f"{broken_root}/v1/flood"), store) as proxy:
        request = urllib.request.Request(
            f"{proxy.base_url}/chat/completions", data=b'{"model": "m", "messages": [], "stream": true}'
        )
        with urllib.request.urlopen(request, timeout=30) as response, pytest.raises(http.client.IncompleteRead):
            while response.read(1024 * 1024):
                pass
    (trace,) = store.proxy_traces()
    assert trace.error is not None and trace.error.startswith("upstream stream the response body passed the 64 MiB")
    assert trace.response is None and not trace.response_text


@pytest.mark.parametrize("kind", ["garbled", "shouted"])
def test_a_stream_of_garbled_chunks_is_relayed_and_recorded_as_far_as_it_makes_sense(
    kind: str, broken_root: str, store: Store
) -> None:
    import urllib.request

    with RecordingProxy(ProxyConfig(upstream=f"{broken_root}/v1/{kind}"), store) as proxy:
        request = urllib.request.Request(
            f"{proxy.base_url}/chat/completions", data=b'{"model": "m", "messages": [], "stream": true}'
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.read() == GARBLED_STREAM  # relayed as it came
    (trace,) = store.proxy_traces()
    assert trace.error is None and trace.status_code == 200 and trace.response is not None
    assert trace.response["reassembled_from_chunks"] == len(GARBLED_CHUNKS)
    (choice,) = trace.response["choices"]
    assert choice["message"]["content"] == "Looking it up." and choice["finish_reason"] is None
    # index 10**9 is the next call (the first: nothing allocated for a gap), -1 the next again (the second); the
    # string function and the numeric name are left out; index 0 then names the first
    assert [c["function"]["name"] for c in choice["message"]["tool_calls"]] == ["get_order", ""]


def test_lone_surrogates_are_relayed_as_sent_and_recorded_as_replacement_characters(
    broken_root: str, store: Store
) -> None:
    import urllib.request

    with RecordingProxy(ProxyConfig(upstream=f"{broken_root}/v1/surrogate"), store) as proxy:
        request = urllib.request.Request(
            f"{proxy.base_url}/chat/completions", data=b'{"model": "m", "messages": [{"content": "\\udbff"}]}'
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.read() == SURROGATE_COMPLETION  # the client gets the upstream's bytes
    (trace,) = store.proxy_traces()
    assert trace.error is None and trace.status_code == 200
    assert trace.response is not None and trace.response["model"] == "m\ufffd" and trace.request is not None
    assert trace.request["messages"][0]["content"] == "\ufffd"
    message = trace.response["choices"][0]["message"]
    assert message["content"] == "half \ufffd a pair"
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"a": "\ufffd"}


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        ({"Content-Length": "abc"}, 400, "bad_content_length"),
        ({"Content-Length": "-5"}, 400, "bad_content_length"),
        ({"Transfer-Encoding": "chunked"}, 411, "length_required"),
    ],
)
def test_a_request_the_proxy_cannot_frame_is_refused(
    headers: dict[str, str], status: int, code: str, oracle_url: str, store: Store
) -> None:
    import http.client

    with RecordingProxy(ProxyConfig(upstream=oracle_url), store) as proxy:
        connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        connection.putrequest("POST", "/v1/chat/completions")
        for name, value in {"Content-Type": "application/json", **headers}.items():
            connection.putheader(name, value)
        connection.endheaders()
        if "Transfer-Encoding" in headers:
            connection.send(b"2\r\n{}\r\n0\r\n\r\n")
        response = connection.getresponse()
        body = json.loads(response.read())
        connection.close()
    assert response.status == status and body["error"]["code"] == code
    assert store.proxy_traces() == []  # never forwarded


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0"], "--host 0.0.0.0 is not a loopback address and there is no proxy token"),
        (["--host", "192.168.1.5"], "--host 192.168.1.5 is not a loopback address"),
        (["--upstream", "http://u:pw@127.0.0.1:9/v1"], "--upstream / CONTEXTDELTA_BASE_URL: credentials in the URL"),
        (["--upstream", "http://127.0.0.1:9/v1?key=abcd1234"], "a query string or fragment in the URL"),
    ],
)
def test_serve_refuses_an_open_host_without_a_token_and_credentials_in_the_upstream(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from contextdelta.cli import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CONTEXTDELTA_PROXY_TOKEN", raising=False)
    base = ["serve", "--upstream", "http://127.0.0.1:9/v1", "--database-url", f"sqlite:///{tmp_path / 'p.db'}"]
    result = CliRunner().invoke(app, [*base, *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert "abcd1234" not in result.output and "pw@" not in result.output


# ---- compressed bodies, redirects, silence and plain-text errors from the upstream ----------


@pytest.mark.parametrize("kind", ["gzip", "deflate"])
def test_a_compressed_answer_reaches_the_client_with_its_encoding_and_is_recorded_decoded(
    kind: str, broken_root: str, store: Store
) -> None:
    with RecordingProxy(ProxyConfig(upstream=f"{broken_root}/v1/{kind}"), store) as proxy:
        completion = _client(proxy).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert completion.choices[0].message.content == "packed"  # the client could undo the encoding it was told of
    (trace,) = store.proxy_traces()
    assert trace.status_code == 200 and trace.error is None
    assert trace.response == COMPLETION and (trace.prompt_tokens, trace.total_tokens) == (3, 4)


def test_a_compressed_stream_is_relayed_with_its_encoding_and_recorded_decoded(broken_root: str, store: Store) -> None:
    import urllib.request

    with RecordingProxy(ProxyConfig(upstream=f"{broken_root}/v1/gzipstream"), store) as proxy:
        request = urllib.request.Request(
            f"{proxy.base_url}/chat/completions", data=b'{"model": "m", "messages": [], "stream": true}'
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.headers["Content-Encoding"] == "gzip"
            assert gzip.decompress(response.read()) == GARBLED_STREAM
    (trace,) = store.proxy_traces()
    assert trace.error is None and trace.response is not None
    assert trace.response["choices"][0]["message"]["content"] == "Looking it up."
    assert trace.response_text == GARBLED_STREAM.decode()


def test_a_gzip_bomb_is_passed_on_but_not_unpacked_past_the_cap(store: Store) -> None:
    from contextdelta.proxy._server import _decoded

    bomb = gzip.compress(b" " * (MAX_RESPONSE_BYTES + 1))  # about 64 KiB that unpacks past the cap
    with pytest.raises(ValueError, match="decodes to more than the 64 MiB"):
        _decoded(bomb, "gzip")
    with pytest.raises(ValueError, match="does not decode to record"):
        _decoded(b"...", "br")
    with pytest.raises(ValueError, match="ends short"):
        _decoded(gzip.compress(_COMPLETION_BYTES)[:-12], "gzip")
    assert _decoded(_COMPLETION_BYTES, None) == _COMPLETION_BYTES


def test_an_upstream_redirect_is_a_502_naming_where_it_points_without_its_credentials(
    broken_root: str, store: Store
) -> None:
    config = ProxyConfig(upstream=f"{broken_root}/v1/redirect")
    with RecordingProxy(config, store) as proxy, pytest.raises(openai.APIStatusError) as raised:
        _client(proxy).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert raised.value.status_code == 502
    body = raised.value.body
    assert isinstance(body, dict) and body["code"] == "upstream_redirect"
    assert "HTTP 307, a redirect to https://elsewhere.example/v1/chat/completions;" in body["message"]
    assert "set --upstream" in body["message"] and "pw" not in body["message"] and "k=1" not in body["message"]
    (trace,) = store.proxy_traces()
    assert trace.status_code == 502 and trace.error == body["message"]


def test_an_upstream_that_sends_no_answer_is_a_504_recorded_as_a_timeout(broken_root: str, store: Store) -> None:
    config = ProxyConfig(upstream=f"{broken_root}/v1/hang", timeout_s=1.0)
    with RecordingProxy(config, store) as proxy, pytest.raises(openai.APIStatusError) as raised:
        _client(proxy).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert raised.value.status_code == 504
    body = raised.value.body
    assert isinstance(body, dict) and body["code"] == "upstream_timeout"
    assert body["message"].endswith("did not answer within 1 s (--timeout-s)")
    (trace,) = store.proxy_traces()
    assert trace.status_code == 504 and trace.error == body["message"]


def test_an_upstream_error_that_is_not_json_is_passed_on_and_recorded_as_an_error(
    broken_root: str, store: Store
) -> None:
    import urllib.error
    import urllib.request

    with RecordingProxy(ProxyConfig(upstream=f"{broken_root}/v1/text502"), store) as proxy:
        request = urllib.request.Request(f"{proxy.base_url}/chat/completions", data=b'{"model": "m", "messages": []}')
        with pytest.raises(urllib.error.HTTPError) as raised:
            urllib.request.urlopen(request, timeout=10)
        assert raised.value.code == 502 and raised.value.read() == b"Bad gateway"
    (trace,) = store.proxy_traces()
    assert trace.status_code == 502 and trace.response_text == "Bad gateway"
    assert trace.error == "upstream answered HTTP 502 with a body that is not JSON"


# ---- what the proxy itself refuses: methods, request lines, bodies it will not read or that end short ----------


def _exchange(port: int, data: bytes) -> bytes:
    """Send raw bytes to the proxy and read until it closes the connection (or 2 s pass)."""
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        sock.sendall(data)
        with contextlib.suppress(TimeoutError):
            while piece := sock.recv(65536):
                received += piece
    return received


@pytest.mark.parametrize(
    ("request_line", "status", "code"),
    [
        ("OPTIONS /v1/chat/completions", 405, "method_not_allowed"),
        ("PUT /v1/models", 405, "method_not_allowed"),
        ("DELETE /v1/models", 405, "method_not_allowed"),
        ("BREW /v1/models", 501, "not_implemented"),
        ("GARBAGE", 400, "bad_request"),
    ],
)
def test_what_the_proxy_does_not_serve_is_refused_in_openai_error_shape(
    request_line: str, status: int, code: str, oracle_url: str, store: Store
) -> None:
    with RecordingProxy(ProxyConfig(upstream=oracle_url), store) as proxy:
        answer = _exchange(proxy.port, f"{request_line} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n".encode())
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()) and b"Content-Type: application/json" in head
    assert json.loads(body)["error"]["code"] == code
    assert store.proxy_traces() == []


def test_a_head_request_is_a_405_without_a_body(oracle_url: str, store: Store) -> None:
    with RecordingProxy(ProxyConfig(upstream=oracle_url), store) as proxy:
        connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        connection.request("HEAD", "/v1/models")
        response = connection.getresponse()
        assert (response.status, response.getheader("Allow"), response.read()) == (405, "GET, POST", b"")
        connection.request("GET", "/v1/models")  # the connection is still good for the next request
        assert connection.getresponse().status == 200
        connection.close()


def test_the_body_of_a_refused_oversized_request_is_never_read_as_a_request(oracle_url: str, store: Store) -> None:
    """The bytes after a refused request's headers are its body: were they read as the next request on the
    connection, a client could slip a request past the proxy's framing (request smuggling)."""
    smuggled = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
    with RecordingProxy(ProxyConfig(upstream=oracle_url), store) as proxy:
        answer = _exchange(
            proxy.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 70000000\r\n\r\n" + smuggled
        )
    assert answer.startswith(b"HTTP/1.1 413 ") and answer.count(b"HTTP/1.1 ") == 1
    assert b"larger than the 67108864 bytes the proxy takes" in answer
    assert store.proxy_traces() == []  # the smuggled listing was never forwarded


def test_a_request_body_cut_short_is_not_forwarded(oracle_url: str, store: Store) -> None:
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"
    with (
        RecordingProxy(ProxyConfig(upstream=oracle_url), store) as proxy,
        socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock,
    ):
        sock.sendall(head + b'{"model": "m"}')
        sock.shutdown(socket.SHUT_WR)  # the client gives up after 14 of its 1000 bytes
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 400 ") and b"ended after 14 of its 1000 bytes" in answer
    assert store.proxy_traces() == []  # the upstream never saw the half request


# ---- keys the client sends outside the Authorization header -------------------------------------------------


@pytest.mark.parametrize("parameter", ["api_key", "key"])
def test_a_key_sent_in_an_api_key_header_or_the_query_is_not_recorded(
    parameter: str, broken_root: str, tmp_path: Path, store: Store
) -> None:
    import urllib.request

    header_key, query_key = "azurekey0123XYZ", "querykey0123XYZ"
    with RecordingProxy(ProxyConfig(upstream=f"{broken_root}/v1/html"), store) as proxy:
        body = {"model": "m", "messages": [{"role": "user", "content": f"keys {header_key} and {query_key}"}]}
        request = urllib.request.Request(
            f"{proxy.base_url}/chat/completions?api-version=2024-06-01&{parameter}={query_key}",
            data=json.dumps(body).encode(),
            headers={"api-key": header_key, "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
    (trace,) = store.proxy_traces()
    assert trace.request["messages"][0]["content"] == f"keys {REDACTED} and {REDACTED}"
    database = _database_bytes(tmp_path)
    assert header_key.encode() not in database and query_key.encode() not in database


def test_a_pair_the_store_refuses_is_logged_with_the_request_and_the_reason_not_the_row(
    oracle_url: str, store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import sqlite3

    from sqlalchemy.exc import OperationalError

    def locked(trace: Any) -> int:
        raise OperationalError(
            "INSERT INTO proxy_traces ...",
            {"request": "row-content-0123"},
            sqlite3.OperationalError("database is locked"),
        )

    monkeypatch.setattr(store, "record_proxy_trace", locked)
    caplog.set_level(logging.WARNING)
    with RecordingProxy(ProxyConfig(upstream=oracle_url), store) as proxy:
        assert [m.id for m in _client(proxy).models.list().data] == ["scripted-oracle"]  # the client is served
        assert proxy.wait_idle()
        assert (proxy.recorded, proxy.record_errors) == (0, 1)
    assert (
        "could not record the pair GET /v1/models -> 200 in the trace store: OperationalError: database is locked"
        in caplog.text
    )
    assert "row-content-0123" not in caplog.text


@pytest.mark.parametrize("path", ["/v1/models/../../admin", "/v1/models/%2e%2e/%2E%2E/admin", "/v1/models/./x"])
def test_dot_segments_cannot_take_a_request_past_the_models_route(path: str, oracle_url: str, store: Store) -> None:
    with RecordingProxy(ProxyConfig(upstream=oracle_url, upstream_api_key=UPSTREAM_KEY), store) as proxy:
        connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        connection.request("GET", path)
        response = connection.getresponse()
        body = json.loads(response.read())
        connection.request("GET", "/v1/models/org/model-with-a-slash")  # a slash in a model id is forwarded
        forwarded = connection.getresponse()
        forwarded.read()
        connection.close()
    assert response.status == 404 and body["error"]["code"] == "not_found"
    assert [t.path for t in store.proxy_traces()] == ["/v1/models/org/model-with-a-slash"]  # only it went upstream


def test_an_interim_103_from_the_upstream_is_passed_over_to_the_answer(broken_root: str, store: Store) -> None:
    with RecordingProxy(ProxyConfig(upstream=f"{broken_root}/v1/early"), store) as proxy:
        client = openai.OpenAI(base_url=proxy.base_url, api_key=CLIENT_KEY, max_retries=0, timeout=5)
        completion = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert completion.choices[0].message.content == "packed"  # not a 103 taken for the answer, then silence
    (trace,) = store.proxy_traces()
    assert trace.status_code == 200 and trace.response == COMPLETION


def test_a_header_folded_over_lines_is_passed_on_unfolded(broken_root: str, store: Store) -> None:
    with RecordingProxy(ProxyConfig(upstream=f"{broken_root}/v1/folded"), store) as proxy:
        answer = _exchange(
            proxy.port,
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
        )
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"\r\nx-request-id: req-1 continued\r\n" in head and b"\tcontinued" not in head
    assert json.loads(body) == COMPLETION


def test_stopping_with_a_request_in_flight_says_its_pair_may_be_lost(
    broken_root: str, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    proxy = RecordingProxy(ProxyConfig(upstream=f"{broken_root}/v1/hang", timeout_s=10), store).start()
    proxy.shutdown_grace_s = 0.2
    client = threading.Thread(
        target=lambda: _exchange(proxy.port, b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"),
        daemon=True,
    )
    client.start()
    deadline = time.monotonic() + 5
    while proxy.wait_idle(0.01) and time.monotonic() < deadline:  # until the request is being forwarded
        pass
    proxy.stop()
    assert "stopping with 1 request still in flight after 0.2 s: their pairs may not be recorded" in caplog.text
    assert proxy.wait_idle(15)  # the straggler finishes (and records) before the store closes


def test_a_request_without_the_token_is_refused_before_its_body_is_read(oracle_url: str, store: Store) -> None:
    """A stranger announcing a 60 MiB body is answered at once: the proxy neither waits for it nor buffers it."""
    with RecordingProxy(ProxyConfig(upstream=oracle_url, token="proxy-token-abcdef123456"), store) as proxy:
        started = time.perf_counter()
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 60000000\r\n\r\n{")
            answer = sock.recv(65536)
        waited = time.perf_counter() - started
    assert answer.startswith(b"HTTP/1.1 401 ") and b'"code": "unauthorized"' in answer
    assert waited < 3
    assert store.proxy_traces() == []


@pytest.mark.parametrize("kind", ["hang", "quiet"])
def test_a_client_that_hangs_up_cancels_the_upstream_request_and_the_pair_says_so(
    kind: str, broken_root: str, store: Store
) -> None:
    """The upstream is quiet for 3 s; the client hangs up after 0.3 s: the upstream request ends then, not when the
    upstream is done."""
    stream = kind == "quiet"
    body = json.dumps({"model": "m", "messages": [], "stream": stream}).encode()
    with RecordingProxy(ProxyConfig(upstream=f"{broken_root}/v1/{kind}", timeout_s=10), store) as proxy:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body
            )
            received = b""
            while stream and b"thinking" not in received:  # the head and the first event may come apart
                piece = sock.recv(65536)
                assert piece, received
                received += piece
            time.sleep(0.3)
        hung_up = time.perf_counter()
        assert proxy.wait_idle(2)
        assert time.perf_counter() - hung_up < 1.5
    (trace,) = store.proxy_traces()
    if stream:
        assert trace.status_code == 200
        assert trace.error == "client disconnected during the stream; the upstream request was cancelled"
        assert trace.response is not None and trace.response["choices"][0]["message"]["content"] == "thinking"
    else:
        assert trace.status_code == 499
        assert trace.error == "client disconnected before the answer; the upstream request was cancelled"


# ---- credentials in key headers, HTTP/1.0 streams, bodies that are not JSON, the connection cap ---------------


class _EchoHandler(BaseHTTPRequestHandler):
    """An upstream that keeps each request it gets (headers and body) in ``seen`` and answers a small completion;
    under ``/slow`` after 1.5 s; a body that is not JSON gets a 400 in OpenAI's error shape."""

    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[tuple[dict[str, str], bytes]]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        type(self).seen.append(({k.lower(): v for k, v in self.headers.items()}, body))
        if self.path.startswith("/slow"):
            time.sleep(1.5)
        try:
            json.loads(body)
        except ValueError:
            status = 400
            answer: dict[str, object] = {
                "error": {"message": "We could not parse the JSON body of your request.", "code": None}
            }
        else:
            status = 200
            answer = {
                "id": "chatcmpl-echo",
                "object": "chat.completion",
                "model": "echo",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def echo_root() -> Iterator[str]:
    _EchoHandler.seen = []
    with serve_handler(_EchoHandler) as root:
        yield root


CHAT = json.dumps({"model": "echo", "messages": [{"role": "user", "content": "hi"}]}).encode()


@pytest.mark.parametrize("header", ["api-key", "x-api-key"])
@pytest.mark.parametrize("upstream_key", [None, UPSTREAM_KEY])
def test_a_key_sent_in_an_api_key_header_reaches_the_upstream_and_never_the_store(
    header: str, upstream_key: str | None, echo_root: str, tmp_path: Path, store: Store
) -> None:
    """An Azure OpenAI client sends its key as ``api-key``: the upstream gets it as sent (the proxy dropped it, and
    Azure answered 401), or --upstream-api-key in its place; the store holds neither."""
    azure_key = "azurekey-0123456789-XYZ"
    config = ProxyConfig(upstream=f"{echo_root}/v1", upstream_api_key=upstream_key)
    with RecordingProxy(config, store) as proxy:
        connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        connection.request(
            "POST",
            "/v1/chat/completions?api-version=2024-06-01",
            body=CHAT,
            headers={header: azure_key, "Content-Type": "application/json"},
        )
        assert connection.getresponse().status == 200
        connection.close()
    ((headers, body),) = _EchoHandler.seen
    assert headers[header] == (upstream_key or azure_key)
    assert "authorization" not in headers  # the key header was the client's credential: no bearer beside it
    assert body == CHAT
    (trace,) = store.proxy_traces()
    assert trace.status_code == 200 and trace.error is None
    database = _database_bytes(tmp_path)
    assert b"chatcmpl-echo" in database  # the file is readable as bytes: the check below means something
    assert azure_key.encode() not in database and UPSTREAM_KEY.encode() not in database


def test_a_bearer_client_still_gets_the_upstream_key_as_a_bearer_and_its_own_otherwise(
    echo_root: str, store: Store
) -> None:
    for upstream_key, expected in ((None, f"Bearer {CLIENT_KEY}"), (UPSTREAM_KEY, f"Bearer {UPSTREAM_KEY}")):
        _EchoHandler.seen.clear()
        with RecordingProxy(ProxyConfig(upstream=f"{echo_root}/v1", upstream_api_key=upstream_key), store) as proxy:
            _client(proxy).chat.completions.create(model="echo", messages=[{"role": "user", "content": "hi"}])
        ((headers, _),) = _EchoHandler.seen
        assert headers["authorization"] == expected
        assert "api-key" not in headers and "x-api-key" not in headers


def _read_until_closed(sock: socket.socket) -> bytes:
    received = b""
    while piece := sock.recv(65536):
        received += piece
    return received


def test_an_http_1_0_client_gets_a_stream_as_a_body_that_ends_with_the_connection(sse_url: str, store: Store) -> None:
    """HTTP/1.0 has no chunked encoding: a stream for an HTTP/1.0 client is sent as it comes, without
    Transfer-Encoding, and ends when the proxy closes the connection."""
    body = json.dumps({"model": "sse-model", "messages": [{"role": "user", "content": "hi"}], "stream": True})
    with (
        RecordingProxy(ProxyConfig(upstream=sse_url), store) as proxy,
        socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock,
    ):
        sock.sendall(
            f"POST /v1/chat/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n{body}".encode()
        )
        answer = _read_until_closed(sock)  # the proxy closes: that is the end of the body
    head, _, sse = answer.partition(b"\r\n\r\n")
    head_lines = head.decode().lower().split("\r\n")
    assert head_lines[0].startswith("http/1.1 200 ")
    assert "connection: close" in head_lines and not any(h.startswith("transfer-encoding") for h in head_lines)
    events = [line[6:] for line in sse.decode().split("\n") if line.startswith("data: ")]  # no chunk-size lines
    assert sse.startswith(b"data: ") and events[-1] == "[DONE]"
    pieces = [json.loads(e)["choices"][0]["delta"].get("content") for e in events[:-1] if json.loads(e)["choices"]]
    assert "".join(p for p in pieces if p) == "".join(PIECES)
    (trace,) = store.proxy_traces()
    assert trace.stream and trace.status_code == 200 and trace.error is None
    assert trace.response["choices"][0]["message"]["content"] == "".join(PIECES)


def test_an_http_1_1_client_still_gets_a_stream_chunked(sse_url: str, store: Store) -> None:
    body = json.dumps({"model": "sse-model", "messages": [{"role": "user", "content": "hi"}], "stream": True})
    with RecordingProxy(ProxyConfig(upstream=sse_url), store) as proxy:
        connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        connection.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.getheader("Transfer-Encoding") == "chunked" and response.getheader("Connection") is None
        assert response.read().rstrip().endswith(b"data: [DONE]")
        connection.close()


@pytest.mark.parametrize(
    ("body", "content_type", "note"),
    [
        (b"hello, not json", "text/plain", "request body is not JSON (15 bytes, Content-Type 'text/plain')"),
        (b"\xff\xfe\x00binary", None, "request body is not JSON (9 bytes, no Content-Type)"),
        (b"", "application/json", "request body is empty (0 bytes, Content-Type 'application/json')"),
    ],
)
def test_a_request_body_that_is_not_json_is_recorded_as_received_with_its_size_and_type(
    body: bytes, content_type: str | None, note: str, echo_root: str, store: Store
) -> None:
    """The store keeps a request as JSON; one whose body is not JSON is forwarded as it came, and its pair says so
    (size and Content-Type), also when the upstream's own error about it is recorded (which took the note's place,
    and the pair read as a request without a body)."""
    with RecordingProxy(ProxyConfig(upstream=f"{echo_root}/v1"), store) as proxy:
        connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        connection.putrequest("POST", "/v1/chat/completions", skip_accept_encoding=True)
        if content_type is not None:
            connection.putheader("Content-Type", content_type)
        connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        assert connection.getresponse().status == 400
        connection.close()
    ((_, forwarded),) = _EchoHandler.seen
    assert forwarded == body
    (trace,) = store.proxy_traces()
    assert trace.request is None and trace.status_code == 400
    assert trace.error is not None and trace.error.startswith(note)
    assert trace.error.endswith("; We could not parse the JSON body of your request.")


def test_connections_past_max_connections_get_a_503_with_retry_after_and_none_is_lost(
    echo_root: str, store: Store
) -> None:
    """With --max-connections 2, a slow client (half its request sent) and a request the upstream is slow to answer
    hold both slots: a third connection gets a 503 with Retry-After at once, its request never forwarded; both
    held requests are answered and recorded, and once they are done a new connection is served."""
    with RecordingProxy(ProxyConfig(upstream=f"{echo_root}/slow/v1", max_connections=2), store) as proxy:
        slow_client = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        slow_client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")  # the rest comes later
        answers: list[int] = []

        def held_request() -> None:
            connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
            connection.request("POST", "/v1/chat/completions", body=CHAT, headers={"Content-Type": "application/json"})
            answers.append(connection.getresponse().status)
            connection.close()

        holder = threading.Thread(target=held_request)
        holder.start()
        deadline = time.monotonic() + 5
        while not _EchoHandler.seen and time.monotonic() < deadline:  # the held request reached the upstream
            time.sleep(0.01)
        refused = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        refused.request("POST", "/v1/chat/completions", body=CHAT, headers={"Content-Type": "application/json"})
        response = refused.getresponse()
        assert (response.status, response.getheader("Retry-After"), response.getheader("Connection")) == (
            503,
            "1",
            "close",
        )
        error = json.loads(response.read())["error"]
        assert error["code"] == "too_many_connections" and "--max-connections" in error["message"]
        refused.close()
        assert len(_EchoHandler.seen) == 1  # the refused request never went upstream
        slow_client.sendall(f"Content-Type: application/json\r\nContent-Length: {len(CHAT)}\r\n\r\n".encode() + CHAT)
        slow_answer = slow_client.recv(65536)
        slow_client.close()
        holder.join(10)
        assert answers == [200] and slow_answer.startswith(b"HTTP/1.1 200 ")
        deadline = time.monotonic() + 5
        while proxy._connections and time.monotonic() < deadline:  # both handlers saw their clients go
            time.sleep(0.01)
        later = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        later.request("POST", "/v1/chat/completions", body=CHAT, headers={"Content-Type": "application/json"})
        assert later.getresponse().status == 200
        later.close()
        assert proxy.refused == 1
    traces = store.proxy_traces()
    assert [(t.status_code, t.error) for t in traces] == [(200, None)] * 3
    assert len(_EchoHandler.seen) == 3


def test_serve_refuses_a_max_connections_below_one(oracle_url: str, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from contextdelta.cli import app

    result = CliRunner().invoke(
        app,
        ["serve", "--upstream", oracle_url, "--max-connections", "0", "--database-url", f"sqlite:///{tmp_path / 'x'}"],
    )
    words = " ".join(result.output.replace("│", " ").split())  # the error panel wraps as wide as the terminal is
    assert result.exit_code == 2 and "Invalid value for '--max-connections'" in words, words  # not "No such option"
    assert not (tmp_path / "x").exists()
