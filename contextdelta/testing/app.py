"""The scripted OpenAI-compatible HTTP server: ``POST /v1/chat/completions`` and ``GET /v1/models``.

Built on ``http.server.ThreadingHTTPServer`` (one thread per connection, HTTP/1.1 keep-alive). Every response
is assembled in full (status line, headers, body) and written with ONE ``sendall`` on a socket with
``TCP_NODELAY`` set: a response written in pieces meets Nagle's algorithm and the client's delayed ACK and
stalls ~40 ms per call on loopback, which would swamp the harness timings this server exists to measure.

Other endpoints: ``GET /v1/models/<id>``, and ``GET /scripted/stats`` (request and fault counters, for
tests; never subject to injected faults). Anything else is 404; in particular ``/models`` without ``/v1``, as on
real servers, so a base URL that lacks ``/v1`` meets a 404. ``stream: true`` is refused with 400 (the scripted
server answers in one piece only), as are bodies that are not a JSON object with a non-empty ``messages`` list.

Replies are deterministic: the same request body gives the same response body (``created`` is 0 and ids
derive from the messages). Token usage is counted as characters / 4 (rounded up) of the canonical JSON of the
messages and tools (prompt) and of the reply (completion); ``cached_tokens`` is reported as 0, unless the server
simulates a provider's prompt cache (``prompt_cache``, see `PromptCache`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import select
import socket
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from contextdelta._loopback import LoopbackService, ThreadedHTTPServer
from contextdelta.canonical import canonical_json
from contextdelta.providers import ENDPOINT_CHECK_TOOL, SUMMARY_MODEL_CHECK
from contextdelta.testing.faults import REPLY_FAULTS, RESPONSE_FAULTS, FaultKind, FaultPlan
from contextdelta.testing.policies import (
    PolicyName,
    ScriptedPolicy,
    ScriptedReply,
    ScriptedToolCall,
    TaskCatalog,
    UnknownTask,
)
from contextdelta.testing.transcript import CallId, Phase, nonce_of

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024 * 1024
SYSTEM_FINGERPRINT = "contextdelta-scripted-1"


def approx_tokens(text: str) -> int:
    """The scripted server's token count: characters / 4, rounded up (0 for empty text)."""
    return math.ceil(len(text) / 4)


@dataclass
class _Answer:
    status: int
    payload: dict[str, Any] | None
    headers: list[tuple[str, str]] = field(default_factory=list)
    drop: bool = False
    """Close the connection without sending anything."""
    hold: bool = False
    """Never answer: keep the request open until the client gives up or the server stops."""


class PromptCacheMode(StrEnum):
    """Whether and how the scripted server reports prompt caching (``--prompt-cache``)."""

    OFF = "off"
    """``cached_tokens`` is always 0."""
    READS = "reads"
    """Prompt tokens of a prefix an earlier request sent are reported as ``prompt_tokens_details.cached_tokens``
    (OpenAI's automatic prefix caching)."""
    READS_AND_WRITES = "reads_and_writes"
    """The same, and the rest of every prompt is reported as written to the cache
    (``prompt_tokens_details.cache_write_tokens``, as OpenRouter reports Anthropic's cache writes)."""


class PromptCache:
    """A provider's prompt-prefix cache, simulated: a request's cached tokens are those of the longest prefix
    (tool schemas, then whole messages) that any earlier request sent, counted with `approx_tokens` per part.

    Keeping the full history keeps every request's prefix the previous request's, so it is served from the
    cache; a strategy that rewrites older messages (a summary, a digest, a sliding window) breaks the prefix after
    the pinned messages. The cache is shared by every request the server answers, as a provider's is by an
    account's requests, so which of two concurrent first requests writes a shared prefix depends on arrival.
    """

    def __init__(self, mode: PromptCacheMode) -> None:
        self.mode = mode
        self._lock = threading.Lock()
        self._seen: set[bytes] = set()

    def usage(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Any], prompt_tokens: int) -> dict[str, int]:
        """The ``prompt_tokens_details`` of a request (and remember its prefixes)."""
        if self.mode is PromptCacheMode.OFF:
            return {"cached_tokens": 0}
        digest = hashlib.sha256(canonical_json(list(tools)).encode()).digest()
        tokens = approx_tokens(canonical_json(list(tools))) if tools else 0
        prefixes: list[tuple[bytes, int]] = []
        for message in messages:
            digest = hashlib.sha256(digest + canonical_json(message).encode()).digest()
            tokens += approx_tokens(canonical_json(message))
            prefixes.append((digest, tokens))
        with self._lock:
            cached = max((n for d, n in prefixes if d in self._seen), default=0)
            self._seen.update(d for d, _ in prefixes)
        cached = min(cached, prompt_tokens)
        if self.mode is PromptCacheMode.READS:
            return {"cached_tokens": cached}
        return {"cached_tokens": cached, "cache_write_tokens": prompt_tokens - cached}


class ScriptedServer(LoopbackService):
    """A scripted policy served over HTTP on ``host:port`` (port 0 picks a free port).

    Use :meth:`start` (background thread) and :meth:`stop`, or ``with ScriptedServer(...) as server``; or
    :meth:`serve_forever` in the foreground (the command-line entry point does).
    """

    thread_name = "scripted-server"

    def __init__(
        self,
        policy: PolicyName | str,
        tasks: TaskCatalog | str | Path,
        *,
        faults: FaultPlan | None = None,
        latency_ms: int = 0,
        host: str = "127.0.0.1",
        port: int = 0,
        keep_requests: bool = False,
        prompt_cache: PromptCacheMode | str = PromptCacheMode.OFF,
    ) -> None:
        catalog = tasks if isinstance(tasks, TaskCatalog) else TaskCatalog.from_dir(tasks)
        if latency_ms < 0:
            raise ValueError("latency_ms must not be negative")
        self.policy = ScriptedPolicy(policy, catalog)
        self.faults = faults or FaultPlan()
        self.latency_ms = latency_ms
        self.prompt_cache = PromptCache(PromptCacheMode(prompt_cache))
        self._lock = threading.Lock()
        self._requests = 0
        self._busy_s = 0.0
        self._first_arrival: float | None = None
        self._last_arrival: float | None = None
        self._in_flight = 0
        self._max_in_flight = 0
        self._sends_without_nodelay = 0
        self._endpoint_checks = 0
        self._outage_until: float | None = None
        self.stopping = threading.Event()
        """Set when the server stops: held requests let go."""
        self.received: list[bytes] | None = [] if keep_requests else None
        """With ``keep_requests``: every POST body exactly as received (tests check what reaches a model)."""
        self._fault_counts: Counter[str] = Counter()
        self._bind(host, port, _Handler)

    @property
    def model_name(self) -> str:
        return self.policy.model_name

    def stats(self) -> dict[str, Any]:
        """Chat-completions requests received and faults injected so far."""
        with self._lock:
            first, last = self._first_arrival, self._last_arrival
            return {
                "policy": self.policy.name.value,
                "model": self.model_name,
                "tasks": len(self.policy.catalog),
                "requests": self._requests,
                "endpoint_checks": self._endpoint_checks,
                # how long the chat requests took to arrive, first to last (server clock): with the request count,
                # what a client-side rate limit let through (tests check limits without a stopwatch of their own)
                "arrival_span_s": (last - first) if first is not None and last is not None else None,
                # the same instants on this machine's monotonic clock (benchmarks compare them with their own)
                "first_arrival_monotonic": first,
                "busy_s": round(self._busy_s, 6),
                "last_arrival_monotonic": last,
                "faults": dict(sorted(self._fault_counts.items())),
                "max_in_flight": self._max_in_flight,
                "sends_without_nodelay": self._sends_without_nodelay,
                # CPU time of the process serving (the server's own, or the caller's with in_process=True): two
                # reads around a run give what the server cost the machine it shares with the client
                "process_cpu_s": round(time.process_time(), 6),
            }

    # ---- request handling (called from handler threads) --------------------------------------------------

    def admit(self, authorization: str | None) -> _Answer | None:
        """Whole-server misbehaviour that meets every request (silence, an outage, a missing key); None: go on."""
        faults = self.faults
        if faults.silent:
            self._count("silent")
            return _Answer(0, None, hold=True)
        with self._lock:
            down = self._outage_until is not None and time.monotonic() < self._outage_until
        if down:
            self._count("outage")
            return _error(503, "The server is temporarily unavailable (injected outage).", "outage", "server_error")
        if faults.require_api_key is not None and authorization != f"Bearer {faults.require_api_key}":
            self._count("unauthorized")
            return _error(401, "Incorrect API key provided.", "invalid_api_key", "invalid_request_error")
        return None

    def _count(self, name: str) -> None:
        with self._lock:
            self._fault_counts[name] += 1

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [self._model_entry()]}

    def model(self, name: str) -> _Answer:
        if name != self.model_name:
            return _error(
                404, f"The model {name!r} does not exist; this server serves {self.model_name!r}.", "model_not_found"
            )
        return _Answer(200, self._model_entry())

    def _model_entry(self) -> dict[str, Any]:
        return {"id": self.model_name, "object": "model", "created": 0, "owned_by": "contextdelta"}

    def chat(self, body: Any, headers: Mapping[str, str] | None = None) -> _Answer:
        echo = _echo(headers or {})
        authorization = next((v for k, v in (headers or {}).items() if k.lower() == "authorization"), None)
        check = _is_endpoint_check(body) or _is_summary_model_check(body)
        arrived = time.monotonic()
        with self._lock:
            if check:  # not numbered: selectors address the run's own requests ("all" reaches it too)
                self._endpoint_checks += 1
                hits = [k for k in FaultKind if self.faults.covers_unnumbered(k)]
                fault = next((k for k in RESPONSE_FAULTS if k in hits), None)
            else:
                self._requests += 1
                number = self._requests
                if self._first_arrival is None:
                    self._first_arrival = arrived
                self._last_arrival = arrived
                if number == self.faults.outage_after:
                    self._outage_until = time.monotonic() + self.faults.outage_s
                hits = self.faults.hits(number)
                fault = self.faults.response_fault(number)
        refused = self.admit(authorization)
        if refused is not None:
            return refused
        refusal = None if check else self.faults.refusal(number)
        if refusal is not None:
            self._count(f"refused_{refusal[0]}")
            return _error(*refusal)
        if self.faults.reject_tools and isinstance(body, dict) and body.get("tools"):
            self._count("reject_tools")
            return _error(
                400,
                '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set '
                "(injected by the scripted server: it rejects requests that carry tools)",
                "tools_not_supported",
                param="tools",
            )
        with self._lock:
            counted = [fault] if fault is not None else []
            counted += [k for k in hits if k in (FaultKind.SLOW, FaultKind.ECHO_CREDENTIALS)]
            self._fault_counts.update(k.value for k in counted)
        if fault is FaultKind.HANG:
            return _Answer(0, None, hold=True)
        if fault is FaultKind.DROP_CONNECTION:
            return _Answer(0, None, drop=True)
        if fault is FaultKind.FAIL_500:
            message = "The scripted server failed this request on purpose."
            if FaultKind.ECHO_CREDENTIALS in hits:
                message += f" {echo}"
            return self._delayed(hits, _error(500, message, "injected_fault", "server_error"))
        if fault is FaultKind.FAIL_429:
            header = self.faults.retry_after_header()
            answer = _error(
                429, "Rate limit reached (injected by the scripted server).", "rate_limit_exceeded", "requests"
            )
            if header is not None:
                answer.headers.append(("Retry-After", header))
            return self._delayed(hits, answer)
        problem = _request_problem(body)
        if problem is not None:
            return _error(400, problem, "invalid_request")
        messages: list[dict[str, Any]] = body["messages"]
        tools: list[dict[str, Any]] = body.get("tools") or []
        prompt_tokens = approx_tokens(canonical_json(messages) + (canonical_json(tools) if tools else ""))
        if check:
            return self._delayed(hits, self._endpoint_check_reply(messages, prompt_tokens))
        if fault is FaultKind.FAIL_CONTEXT_LENGTH:
            message = (
                f"This model's maximum context length is 8192 tokens. However, your messages resulted in "
                f"{max(prompt_tokens, 8193)} tokens. Please reduce the length of the messages."
            )
            return self._delayed(hits, _error(400, message, "context_length_exceeded", param="messages"))
        details = self.prompt_cache.usage(messages, tools, prompt_tokens)
        if fault is FaultKind.NO_CHOICES:
            return self._delayed(hits, _Answer(200, self._completion(messages, [], prompt_tokens, 0, details)))
        try:
            reply = self.policy.respond(messages, tools)
        except UnknownTask as exc:
            return _error(400, f"scripted server: {exc}", "unknown_task")
        reply = _corrupt(reply, hits, messages)
        if FaultKind.ECHO_CREDENTIALS in hits:
            reply = ScriptedReply(content=f"{reply.content or ''} {echo}".strip(), tool_calls=reply.tool_calls)
        if reply.tool_calls:
            with self._lock:
                self._fault_counts.update(k.value for k in hits if k in REPLY_FAULTS)
        choice = {
            "index": 0,
            "message": _message(reply),
            "finish_reason": reply.finish_reason,
            "logprobs": None,
        }
        completion_tokens = approx_tokens(canonical_json(_message(reply)))
        completion = self._completion(messages, [choice], prompt_tokens, completion_tokens, details)
        if FaultKind.NO_USAGE in hits:
            del completion["usage"]
            self._count(FaultKind.NO_USAGE.value)
        return self._delayed(hits, _Answer(200, completion))

    def _endpoint_check_reply(self, messages: list[dict[str, Any]], prompt_tokens: int) -> _Answer:
        if messages and messages[-1].get("content") == SUMMARY_MODEL_CHECK:  # the summary model's check: a text
            reply = ScriptedReply(content="OK")
        else:
            reply = ScriptedReply(
                content=None, tool_calls=(ScriptedToolCall("call_endpoint_check", ENDPOINT_CHECK_TOOL, "{}"),)
            )
        choice = {"index": 0, "message": _message(reply), "finish_reason": reply.finish_reason, "logprobs": None}
        completion_tokens = approx_tokens(canonical_json(_message(reply)))
        return _Answer(200, self._completion(messages, [choice], prompt_tokens, completion_tokens))

    def _completion(
        self,
        messages: Sequence[Mapping[str, Any]],
        choices: list[dict[str, Any]],
        prompt: int,
        completion: int,
        details: dict[str, int] | None = None,
    ) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{nonce_of(messages)}",
            "object": "chat.completion",
            "created": 0,
            "model": self.model_name,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": details or {"cached_tokens": 0},
            },
        }

    def _delayed(self, hits: list[FaultKind], answer: _Answer) -> _Answer:
        delay_ms = self.latency_ms + (self.faults.slow_ms if FaultKind.SLOW in hits else 0)
        if delay_ms:
            with self._lock:  # how many requests overlap in time: tests check concurrency without a stopwatch
                self._in_flight += 1
                self._max_in_flight = max(self._max_in_flight, self._in_flight)
            try:
                time.sleep(delay_ms / 1000)
            finally:
                with self._lock:
                    self._in_flight -= 1
        return answer

    def _before_close(self) -> None:
        self.stopping.set()

    def keep(self, raw: bytes) -> None:
        if self.received is not None:
            with self._lock:
                self.received.append(raw)

    def note_busy(self, seconds: float) -> None:
        """Add the time one POST took from its body's first byte to its response's last (latency included)."""
        with self._lock:
            self._busy_s += seconds

    def note_send(self, nodelay: bool) -> None:
        """Record a response written on a socket without TCP_NODELAY (there should be none)."""
        if not nodelay:
            with self._lock:
                self._sends_without_nodelay += 1


def _echo(headers: Mapping[str, str]) -> str:
    """The request's credential headers quoted back, as a misconfigured endpoint's debug output would."""
    parts = [f"{name}: {value}" for name, value in headers.items() if name.lower() in ("authorization", "api-key")]
    return "(received " + "; ".join(parts or ["no credentials"]) + ")"


def _is_summary_model_check(body: Any) -> bool:
    """Whether a chat request is ``run-benchmark``'s check of a summary model apart from the agent's."""
    if not isinstance(body, dict) or body.get("tools") or not isinstance(body.get("messages"), list):
        return False
    messages = body["messages"]
    return len(messages) == 1 and isinstance(messages[0], dict) and messages[0].get("content") == SUMMARY_MODEL_CHECK


def _is_endpoint_check(body: Any) -> bool:
    """Whether a chat request is ``run-benchmark``'s endpoint check (its only tool is the check tool)."""
    if not isinstance(body, dict) or not isinstance(body.get("tools"), list) or len(body["tools"]) != 1:
        return False
    tool = body["tools"][0]
    function = tool.get("function") if isinstance(tool, dict) else None
    return isinstance(function, dict) and function.get("name") == ENDPOINT_CHECK_TOOL


def _request_problem(body: Any) -> str | None:
    if not isinstance(body, dict):
        return "The request body must be a JSON object."
    if body.get("stream"):
        return "Streaming is not supported by the scripted server; send stream: false (or omit it)."
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty list."
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            return f"messages[{index}] must be an object with a string 'role'."
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        return "'tools' must be a list."
    return None


def _message(reply: ScriptedReply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.tool_calls
        ]
    return message


def _corrupt(reply: ScriptedReply, hits: list[FaultKind], messages: Sequence[Mapping[str, Any]]) -> ScriptedReply:
    """Apply the malformed-arguments / unknown-tool faults; the corrupted call gets phase ``fault``."""
    malformed = FaultKind.MALFORMED_ARGS in hits
    unknown = FaultKind.UNKNOWN_TOOL in hits
    if not reply.tool_calls or not (malformed or unknown):
        return reply
    calls = []
    for call in reply.tool_calls:
        parsed = CallId.parse(call.id)
        new_id = CallId(parsed.policy, parsed.step, Phase.FAULT, nonce_of(messages)).render() if parsed else call.id
        name = f"nonexistent_{call.name}" if unknown else call.name
        arguments = call.arguments[:-1] if malformed else call.arguments  # drop the closing brace: not JSON
        calls.append(ScriptedToolCall(new_id, name, arguments))
    return ScriptedReply(content=reply.content, tool_calls=tuple(calls))


def _error(
    status: int, message: str, code: str, error_type: str = "invalid_request_error", param: str | None = None
) -> _Answer:
    return _Answer(status, {"error": {"message": message, "type": error_type, "param": param, "code": code}})


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "contextdelta-scripted/1"
    timeout = 300  # an idle keep-alive connection is closed after this many seconds
    server: ThreadedHTTPServer

    @property
    def app(self) -> ScriptedServer:
        owner: ScriptedServer = self.server.owner
        return owner

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        path = urlsplit(self.path).path.rstrip("/")
        app = self.app
        refused = app.admit(self.headers.get("Authorization")) if path != "/scripted/stats" else None
        if refused is not None:
            self._answer(refused)
        elif path == "/v1/models" and app.faults.no_models:
            self._send(_error(404, "This server does not list its models.", "not_found"))
        elif path == "/v1/models":
            self._send(_Answer(200, app.models()))
        elif path.startswith("/v1/models/"):
            self._send(app.model(path[len("/v1/models/") :]))
        elif path == "/scripted/stats":
            self._send(_Answer(200, app.stats()))
        else:
            self._send(_error(404, f"No route for GET {path or '/'}.", "not_found"))

    def do_POST(self) -> None:
        started = time.perf_counter()
        try:
            self._post()
        finally:
            self.app.note_busy(time.perf_counter() - started)

    def _post(self) -> None:
        raw = self._read_body()
        if raw is None:
            return
        self.app.keep(raw)
        path = urlsplit(self.path).path.rstrip("/")
        if path != "/v1/chat/completions":
            self._send(_error(404, f"No route for POST {path or '/'}.", "not_found"))
            return
        try:
            body = json.loads(raw) if raw.strip() else None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self._send(_error(400, f"The request body is not valid JSON: {exc}.", "invalid_json"))
            return
        try:
            answer = self.app.chat(body, dict(self.headers.items()))
        except Exception as exc:  # a policy bug must answer 500, not hang the client
            log.exception("scripted policy failed")
            answer = _error(
                500, f"scripted server error: {type(exc).__name__}: {exc}", "internal_error", "server_error"
            )
        self._answer(answer)

    def _answer(self, answer: _Answer) -> None:
        if answer.hold:
            self._hold()
        if answer.drop or answer.hold:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        self._send(answer)

    def _hold(self) -> None:
        """Answer nothing until the client closes its end (it timed out) or the server stops."""
        while not self.app.stopping.wait(0.1):
            try:
                readable, _, _ = select.select([self.connection], [], [], 0)
                if readable and not self.connection.recv(1, socket.MSG_PEEK):
                    return  # the client gave up
            except OSError:
                return

    def _read_body(self) -> bytes | None:
        length_header = self.headers.get("Content-Length")
        if length_header is None:
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                return self._read_chunked()
            return b""
        try:
            length = int(length_header)
        except ValueError:
            self.close_connection = True
            self._send(_error(400, "Bad Content-Length header.", "bad_request"))
            return None
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            self._send(_error(413, "The request body is too large.", "too_large"))
            return None
        return self.rfile.read(length)

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline()

    def _send(self, answer: _Answer) -> None:
        body = json.dumps(answer.payload, ensure_ascii=False).encode("utf-8")
        try:
            reason = HTTPStatus(answer.status).phrase
        except ValueError:
            reason = "Unknown"
        lines = [
            f"HTTP/1.1 {answer.status} {reason}",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
            f"Connection: {'close' if self.close_connection else 'keep-alive'}",
            *(f"{name}: {value}" for name, value in answer.headers),
        ]
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
        self.app.note_send(bool(self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)))
        try:
            self.connection.sendall(data)  # the whole response in one send (see the module docstring)
        except OSError:  # the client went away (e.g. it timed out on a slow response)
            self.close_connection = True
        self.log_request(answer.status, len(body))
