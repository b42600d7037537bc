"""``contextdelta serve``: an OpenAI-compatible recording proxy.

``POST /v1/chat/completions`` (plain and ``stream: true``), ``GET /v1/models`` and ``GET /v1/models/<id>`` are
forwarded to the upstream base URL (``--upstream``, e.g. ``http://127.0.0.1:8000/v1``); the answer goes back to
the client unchanged (status, body, content type and encoding, and the rate-limit/retry headers), upstream errors
included. A stream is relayed chunk by chunk as it arrives. After the answer is sent, the pair is stored in the
trace store with its latency, time to first byte and token usage (for a stream: reassembled from the chunks; a
gzip or deflate body: decoded). A redirect is not followed (a client following it would go round the proxy, and
the pair would go unrecorded): the client gets a 502 naming where it points. An upstream that sends no answer
within ``--timeout-s`` is a 504; one that cannot be reached, or breaks off its answer, a 502. A client that
hangs up before its answer, or during a stream, has the upstream request cancelled then (recorded as 499 or
as an interrupted stream). Every failure is recorded as a pair with its error.

Credentials never reach the store or the log: no header is stored, the key a client sent (in Authorization, an
``api-key`` or ``x-api-key`` header, or the query string) is cut out of what is, and the request and response are
redacted (:class:`~contextdelta.proxy.Redactor`) first. The upstream is called with ``--upstream-api-key`` when
given (in place of any ``api-key``/``x-api-key`` header the client sent, else as ``Authorization: Bearer``); without
one, the client's own credential headers are passed on as sent: Authorization (unless it was the proxy's bearer
token), ``api-key`` (Azure OpenAI) and ``x-api-key``.
A request body that is not JSON is forwarded as it came; the pair records that it came, its size and content type
(the store keeps requests as JSON), not the body. An HTTP/1.0 client gets a stream as a body that ends when the
connection closes (HTTP/1.0 has no chunked encoding).

Built on ``http.server.ThreadingHTTPServer`` like the scripted test server, a thread per connection: at most
``--max-connections`` (default 128) are served at once, and one more is answered 503 with ``Retry-After`` (each
connection can hold up to 64 MiB of request body). Sockets use TCP_NODELAY and a non-stream response is written in
one send.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import http.client
import json
import logging
import re
import select
import socket
import threading
import time
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from sqlalchemy.exc import SQLAlchemyError

from contextdelta._loopback import LoopbackService, ThreadedHTTPServer
from contextdelta._words import plural
from contextdelta.providers import (
    MAX_RESPONSE_BYTES,
    READ_CHUNK_BYTES,
    CappedBody,
    EndpointResponseTooLarge,
    load_json_body,
)
from contextdelta.redaction import Redactor, is_secret_key
from contextdelta.settings import redact_url, redact_url_text
from contextdelta.store import ProxyTrace, Store

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024 * 1024
FORWARDED_REQUEST_HEADERS = ("content-type", "accept", "user-agent", "openai-organization", "openai-project")
PASSED_RESPONSE_HEADERS = (
    "content-type",
    "content-encoding",
    "retry-after",
    "x-request-id",
    "openai-processing-ms",
    "openai-version",
)
PASSED_RESPONSE_PREFIXES = ("x-ratelimit-",)
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}
_FOLD = re.compile(r"[\r\n]+[ \t]*")
"""A line break in a header value and the whitespace that continues it."""
CLIENT_KEY_HEADERS = ("api-key", "x-api-key")
"""Headers in which clients (Azure OpenAI, Anthropic-style gateways) send their key: forwarded upstream as sent
(``--upstream-api-key`` replaces their value), never stored, and their values cut out of what is recorded like the
bearer token's."""
DECODED_ENCODINGS = ("gzip", "x-gzip", "deflate")
"""The ``Content-Encoding`` values the proxy decodes to record a body (the client gets the bytes as they came)."""


class _FinalResponse(http.client.HTTPResponse):
    """An upstream response that passes over every interim ``1xx`` answer (``103 Early Hints`` ...) to the final
    one, as HTTP clients do: ``http.client`` passes over ``100 Continue`` only, and took a 103 for the answer (the
    proxy relayed it as final, and a client waited on for the answer that never came)."""

    def _read_status(self) -> tuple[str, int, str]:
        while True:
            version, status, reason = super()._read_status()  # type: ignore[misc]
            if not (100 < status < 200 and status != 101):
                return version, status, reason
            http.client.parse_headers(self.fp)  # the interim answer's headers, passed over


@dataclass(frozen=True)
class Upstream:
    """Where the proxy forwards to: scheme, host, port, the base path (``/v1``) and any credentials."""

    scheme: str
    host: str
    port: int
    base_path: str
    userinfo: tuple[str, str] | None

    @classmethod
    def parse(cls, url: str) -> Upstream:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"--upstream must be an http(s) URL such as http://127.0.0.1:8000/v1, got {redact_url(url)!r}"
            )
        port = parts.port or (443 if parts.scheme == "https" else 80)
        userinfo = (unquote(parts.username or ""), unquote(parts.password or "")) if parts.username else None
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"), userinfo)

    def connection(self, timeout_s: float) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        connection = cls(self.host, self.port, timeout=timeout_s)
        connection.response_class = _FinalResponse
        return connection

    @property
    def display(self) -> str:
        """The URL without credentials (what is stored and printed)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.base_path}"


DEFAULT_MAX_CONNECTIONS = 128
"""How many client connections the proxy serves at once (``--max-connections``): each holds a thread and, while its
request is forwarded, up to ``MAX_BODY_BYTES`` of body (and the upstream's answer); one more is answered 503 with
``Retry-After``, so that memory stays bounded however many clients connect."""
RETRY_AFTER_S = 1
"""The ``Retry-After`` of the 503 for a connection past ``--max-connections``."""
REFUSAL_LINGER_S = 2.0
"""How long the proxy reads (and drops) what a refused client still sends after its 503, before it closes: closed
at once, with the request unread, the connection would be reset and the client could lose the 503."""


@dataclass
class ProxyConfig:
    """How the proxy runs. ``token``: clients must send ``Authorization: Bearer <token>``; None: no check.
    ``max_connections``: client connections served at once (open ones, idle keep-alive ones included); one more
    gets a 503 with ``Retry-After``."""

    upstream: str
    host: str = "127.0.0.1"
    port: int = 0
    token: str | None = None
    upstream_api_key: str | None = None
    timeout_s: float = 600.0
    extra_secrets: list[str] = field(default_factory=list)
    max_connections: int = DEFAULT_MAX_CONNECTIONS


class _CappedServer(ThreadedHTTPServer):
    """The proxy's server: a thread per connection up to the proxy's ``max_connections``; a connection past them
    gets a 503 with ``Retry-After`` from a short-lived thread that reads none of its request."""

    owner: RecordingProxy

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.owner.admit():
            self.owner.refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread started: its slot is free again
            self.owner.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.owner.release()


class RecordingProxy(LoopbackService):
    """The recording proxy. ``start``/``stop`` (background thread), or ``serve_forever`` in the foreground."""

    thread_name = "recording-proxy"
    server_class = _CappedServer
    shutdown_grace_s = 10.0
    """How long stopping waits for the requests in flight to be answered and recorded."""

    def __init__(self, config: ProxyConfig, store: Store | None) -> None:
        self.config = config
        self.upstream = Upstream.parse(config.upstream)
        self.store = store
        self.redactor = Redactor([config.token, config.upstream_api_key, *config.extra_secrets])
        if self.upstream.userinfo:
            self.redactor.add(self.upstream.userinfo[1])
        self.recorded = 0
        self.record_errors = 0
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._in_flight = 0
        if config.max_connections < 1:
            raise ValueError(f"--max-connections must be 1 or more, got {config.max_connections}")
        self._connections = 0
        self._refusing = 0
        self.refused = 0
        """Connections answered 503 because ``max_connections`` were being served."""
        self._bind(config.host, config.port, _Handler)

    def wait_idle(self, timeout_s: float = 10.0) -> bool:
        """Wait until no request is being forwarded or recorded; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._in_flight == 0, timeout_s)

    def _before_close(self) -> None:
        if not self.wait_idle(self.shutdown_grace_s):  # let the requests in flight finish recording
            with self._lock:
                in_flight = self._in_flight
            log.warning(
                "stopping with %s still in flight after %g s: their pairs may not be recorded",
                plural(in_flight, "request"),
                self.shutdown_grace_s,
            )

    # ---- the connection cap (used by the server) --------------------------------------------------------

    def admit(self) -> bool:
        """Take a connection slot; False when ``max_connections`` are taken."""
        with self._lock:
            if self._connections >= self.config.max_connections:
                return False
            self._connections += 1
            return True

    def release(self) -> None:
        with self._lock:
            self._connections -= 1

    def refuse(self, sock: socket.socket) -> None:
        """Answer a connection past ``max_connections`` with a 503 and ``Retry-After``, from a thread of its own
        (at most ``max_connections`` of them at once: past that, the connection is closed unanswered)."""
        with self._lock:
            self.refused += 1
            refused = self.refused
            answering = self._refusing < self.config.max_connections
            self._refusing += answering
        if refused == 1 or refused % 100 == 0:
            log.warning(
                "refused a connection (503): %d connections are being served, the most --max-connections allows "
                "(%d refused so far)",
                self.config.max_connections,
                refused,
            )
        if not answering:
            with contextlib.suppress(OSError):
                sock.close()
            return
        threading.Thread(target=self._answer_refused, args=(sock,), name="proxy-refusal", daemon=True).start()

    def _answer_refused(self, sock: socket.socket) -> None:
        message = (
            f"The proxy is serving as many connections as it takes ({self.config.max_connections}, "
            f"--max-connections); retry after {RETRY_AFTER_S} s."
        )
        body = _error_body(503, message, "too_many_connections")
        head = (
            "HTTP/1.1 503 Service Unavailable\r\n"
            f"Server: {_Handler.server_version}\r\n"
            "Content-Type: application/json\r\n"
            f"Retry-After: {RETRY_AFTER_S}\r\n"
            "Connection: close\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        try:
            sock.settimeout(REFUSAL_LINGER_S)
            sock.sendall(head.encode("latin-1") + body)
            sock.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + REFUSAL_LINGER_S
            drained = 0  # what the client sends meanwhile is dropped: its request is never read
            while time.monotonic() < deadline and drained < MAX_BODY_BYTES:
                piece = sock.recv(65536)
                if not piece:
                    break
                drained += len(piece)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sock.close()
            with self._lock:
                self._refusing -= 1

    # ---- used by the handler ----------------------------------------------------------------------------

    def authorized(self, header: str | None) -> bool:
        if self.config.token is None:
            return True
        expected = f"Bearer {self.config.token}".encode()
        return header is not None and hmac.compare_digest(header.strip().encode(), expected)

    def upstream_headers(self, incoming: Any) -> dict[str, str]:
        """The headers the upstream gets: the forwarded ones, and the credentials. The client's own credential
        headers (Authorization unless it carried the proxy's token, ``api-key``, ``x-api-key``) go on as sent;
        ``--upstream-api-key`` replaces them: it goes in place of the value of each ``api-key``/``x-api-key`` header
        the client sent (an Azure OpenAI client sends ``api-key``), and as ``Authorization: Bearer KEY`` unless the
        client's credential was such a header alone."""
        headers = {name: incoming[name] for name in FORWARDED_REQUEST_HEADERS if incoming.get(name)}
        key_headers = {name: incoming[name] for name in CLIENT_KEY_HEADERS if incoming.get(name)}
        client_authorization = self.config.token is None and bool(incoming.get("authorization"))
        if self.config.upstream_api_key:
            headers.update(dict.fromkeys(key_headers, self.config.upstream_api_key))
            if client_authorization or not key_headers:  # an Azure key alone: no bearer beside it
                headers["Authorization"] = f"Bearer {self.config.upstream_api_key}"
            return headers
        headers.update(key_headers)
        if client_authorization:
            headers["Authorization"] = incoming["authorization"]
        elif self.upstream.userinfo:
            user, password = self.upstream.userinfo
            headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        return headers

    def begin(self) -> None:
        with self._idle:
            self._in_flight += 1

    def end(self) -> None:
        with self._idle:
            self._in_flight -= 1
            self._idle.notify_all()

    def record(self, trace: ProxyTrace) -> None:
        if self.store is None:
            return
        try:
            self.store.record_proxy_trace(trace)
            with self._lock:
                self.recorded += 1
        except Exception as exc:  # a store failure must not break the client's call
            with self._lock:
                self.record_errors += 1
            # the driver's own words ("database is locked", "no such table"), never SQLAlchemy's whole message,
            # which quotes the row's parameters: the request and response
            reason = getattr(exc, "orig", None) or (exc if not isinstance(exc, SQLAlchemyError) else None)
            detail = self.redactor.text(f": {str(reason)[:300]}") if reason is not None and str(reason) else ""
            log.warning(
                "could not record the pair %s %s -> %d in the trace store: %s%s",
                trace.method,
                trace.path,
                trace.status_code,
                type(exc).__name__,
                detail,
            )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _error_body(status: int, message: str, code: str) -> bytes:
    error = {
        "message": message,
        "type": "proxy_error" if status >= 500 else "invalid_request_error",
        "param": None,
        "code": code,
    }
    return json.dumps({"error": error}).encode()


def _json_or_none(raw: bytes) -> Any:
    """The JSON value of a body, decoded as the provider decodes one (lone surrogates made U+FFFD, so that the
    stored trace encodes; nesting past the provider's limit refused); None when it is not JSON."""
    try:
        return load_json_body(raw) if raw.strip() else None
    except ValueError:  # not JSON, not UTF-8, or nested too deeply
        return None


def _request_note(body: bytes | None, content_type: str | None) -> str | None:
    """What a recorded pair says of a request body that is not stored: one that is not JSON (its size and
    Content-Type, which is what the upstream was sent), or an empty one; None for a request without a body (GET)."""
    if body is None:
        return None
    kind = _FOLD.sub(" ", content_type).strip()[:200] if content_type else None
    sent = f"Content-Type {kind!r}" if kind else "no Content-Type"
    if not body:
        return f"request body is empty (0 bytes, {sent})"
    return f"request body is not JSON ({len(body)} bytes, {sent}); it was forwarded but is not stored"


def _read_body(response: http.client.HTTPResponse, deadline: float, timeout_s: float) -> bytes:
    """The whole upstream body, read in chunks and given up past the provider's cap (``MAX_RESPONSE_BYTES``) or
    past ``deadline`` (``time.perf_counter()``: the request's start plus ``--timeout-s``), as the provider gives up
    an attempt: the socket's timeout bounds each read only, and an upstream that drips a byte now and then would
    hold the request open for ever.

    Raises EndpointResponseTooLarge; IncompleteRead, with all that arrived as its ``partial``, when the body ends
    short; OSError when the connection fails, stalls past the timeout, or the body is still arriving at the
    deadline (TimeoutError)."""
    body = CappedBody(response.getheader("content-length"))
    try:
        while chunk := response.read1(READ_CHUNK_BYTES):  # what has arrived, so the deadline is checked as it comes
            body.add(chunk)
            if time.perf_counter() > deadline:
                raise TimeoutError(
                    f"the body was still arriving {timeout_s:g} s after the request (--timeout-s); "
                    f"{body.size} bytes had come"
                )
    except http.client.IncompleteRead as exc:
        raise http.client.IncompleteRead(body.value() + exc.partial, exc.expected) from None
    if response.length:  # read(n) returns short, where read() raises, when a Content-Length is not met
        raise http.client.IncompleteRead(body.value(), response.length)
    return body.value()


def _decoded(raw: bytes, encoding: str | None) -> bytes:
    """A body as it reads once its ``Content-Encoding`` is undone, for recording (the client gets the bytes as they
    came). gzip and deflate are decoded, to no more than ``MAX_RESPONSE_BYTES`` (a small body can unpack to
    gigabytes). Raises ValueError naming what could not be decoded."""
    name = (encoding or "").strip().lower()
    if name in ("", "identity"):
        return raw
    if name not in DECODED_ENCODINGS:
        raise ValueError(f"the body came in Content-Encoding {encoding!r}, which the proxy does not decode to record")
    tries = (16 + zlib.MAX_WBITS,) if "gzip" in name else (zlib.MAX_WBITS, -zlib.MAX_WBITS)  # deflate: zlib or raw
    for wbits in tries:
        decoder = zlib.decompressobj(wbits)
        try:
            value = decoder.decompress(raw, MAX_RESPONSE_BYTES + 1)
        except zlib.error:
            continue
        if len(value) > MAX_RESPONSE_BYTES:
            raise ValueError(
                f"the {name} body decodes to more than the {MAX_RESPONSE_BYTES // (1024 * 1024)} MiB a response may "
                "have (MAX_RESPONSE_BYTES); it was not recorded"
            )
        if not decoder.eof:
            raise ValueError(f"the {name} body ends short of its end; it was not recorded")
        return value
    raise ValueError(f"the body is not valid {name} (Content-Encoding); it was not recorded")


def _is_key_parameter(name: str) -> bool:
    """Whether a query parameter carries a credential: a credential-like name (``api_key``, ``access_token``), or
    the bare ``key`` and ``token`` some endpoints take (Google's ``?key=``)."""
    return is_secret_key(name) or name.strip().lower() in ("key", "token")


def _usage(value: Any) -> tuple[int | None, int | None, int | None]:
    usage = value.get("usage") if isinstance(value, dict) else None
    if not isinstance(usage, dict):
        return None, None, None
    prompt, completion, total = (usage.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens"))
    if total is None and isinstance(prompt, int) and isinstance(completion, int):
        total = prompt + completion
    return (
        prompt if isinstance(prompt, int) else None,
        completion if isinstance(completion, int) else None,
        total if isinstance(total, int) else None,
    )


def reassemble_stream(sse: str) -> dict[str, Any] | None:
    """A chat.completion built from the ``data:`` chunks of a chat-completions stream (None if none parse).

    Whatever in a chunk is not of the shape a stream's chunks have (a choice or a tool call that is not an object,
    an index that is not a small whole number, a name that is not text) is left out: a misbehaving upstream's
    stream is still recorded, as far as it makes sense."""
    chunks = []
    for line in sse.splitlines():
        if line.startswith("data:"):
            data = line[5:].strip()
            if data and data != "[DONE]":
                parsed = _json_or_none(data.encode())
                if isinstance(parsed, dict):
                    chunks.append(parsed)
    if not chunks:
        return None
    choices: dict[int, dict[str, Any]] = {}
    usage = None
    for chunk in chunks:
        if isinstance(chunk.get("usage"), dict):
            usage = chunk["usage"]
        for choice in _objects(chunk.get("choices")):
            index = _index(choice.get("index"), 0)
            slot = choices.setdefault(
                index, {"index": index, "message": {"role": "assistant", "content": None}, "finish_reason": None}
            )
            delta = _object(choice.get("delta"))
            message = slot["message"]
            if isinstance(delta.get("role"), str) and delta["role"]:
                message["role"] = delta["role"]
            if isinstance(delta.get("content"), str):
                message["content"] = (message["content"] or "") + delta["content"]
            for call in _objects(delta.get("tool_calls")):
                calls = message.setdefault("tool_calls", [])
                # no gaps: an index past the next one (10**9) is the next one, so a wild index cannot allocate
                position = min(_index(call.get("index"), len(calls)), len(calls))
                if position == len(calls):
                    calls.append({"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
                target = calls[position]
                if isinstance(call.get("id"), str) and call["id"]:
                    target["id"] = call["id"]
                function = _object(call.get("function"))
                for key in ("name", "arguments"):
                    if isinstance(function.get(key), str):
                        target["function"][key] += function[key]
            if isinstance(choice.get("finish_reason"), str) and choice["finish_reason"]:
                slot["finish_reason"] = choice["finish_reason"]
    first = chunks[0]
    return {
        "id": first.get("id"),
        "object": "chat.completion",
        "created": first.get("created"),
        "model": first.get("model"),
        "choices": [choices[i] for i in sorted(choices)],
        "usage": usage,
        "reassembled_from_chunks": len(chunks),
    }


def _objects(value: Any) -> list[dict[str, Any]]:
    """The objects of a JSON array (nothing when it is not one)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _object(value: Any) -> dict[str, Any]:
    """A JSON object (an empty one when ``value`` is not one)."""
    return value if isinstance(value, dict) else {}


def _index(value: Any, default: int) -> int:
    """A stream's ``index``: a whole number from 0, else ``default``."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


class _ClientWatch:
    """Watches the client's connection while the upstream works on its request: when the client hangs up (before
    the answer, or while a stream is quiet), the upstream connection is shut down, so that the upstream stops
    generating for nobody and the pair is recorded as cancelled at once, not when the upstream is done. A client
    that sends its next request meanwhile (pipelining) is not watched further."""

    POLL_S = 0.1

    def __init__(self, client: socket.socket, upstream: http.client.HTTPConnection) -> None:
        self.gone = False
        self._client = client
        self._upstream = upstream
        self._done = threading.Event()
        threading.Thread(target=self._watch, name="proxy-client-watch", daemon=True).start()

    def _watch(self) -> None:
        while not self._done.is_set():
            try:
                readable, _, _ = select.select([self._client], [], [], self.POLL_S)
                if not readable or self._done.is_set():
                    continue
                if self._client.recv(1, socket.MSG_PEEK):
                    return  # the client's next request: it is still there
            except ValueError:  # the client's socket was closed: the request is over
                return
            except OSError:
                pass  # reset by the client: gone too
            self.gone = True
            upstream = self._upstream.sock
            if upstream is not None and not self._done.is_set():
                with contextlib.suppress(OSError):
                    # the plain socket's shutdown: an SSLSocket's own drops its TLS state under the reading thread
                    socket.socket.shutdown(upstream, socket.SHUT_RDWR)
            return

    def stop(self) -> None:
        """Stop watching (the thread ends within ``POLL_S``; nobody waits for it)."""
        self._done.set()


CLIENT_GONE = 499
"""The status recorded for a request whose client hung up before its answer (nginx's "client closed request")."""
CLIENT_GONE_BEFORE_ANSWER = "client disconnected before the answer; the upstream request was cancelled"
CLIENT_GONE_DURING_STREAM = "client disconnected during the stream; the upstream request was cancelled"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "contextdelta-proxy/1"
    timeout = 300
    server: ThreadedHTTPServer

    @property
    def proxy(self) -> RecordingProxy:
        owner: RecordingProxy = self.server.owner
        return owner

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the default logs the request line; the handler logs method, path, status and latency itself

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The server's own refusals (a request line it cannot parse, a header block too long, a method nobody
        serves) in OpenAI's error shape, as JSON, not ``http.server``'s HTML page; the connection is closed."""
        self.close_connection = True
        text = message or http.client.responses.get(code, "Error")
        body = _error_body(code, f"{text.rstrip('.')}.", "bad_request" if code < 500 else "not_implemented")
        self._send_whole(code, [("Content-Type", "application/json"), ("Connection", "close")], body)

    def _not_allowed(self) -> None:
        """405 for a method the proxy does not serve (the API has GET and POST); a HEAD answer has no body."""
        path = urlsplit(self.path).path.rstrip("/") or "/"
        body = _error_body(
            405, f"Method {self.command} is not allowed on {path}; use GET or POST.", "method_not_allowed"
        )
        headers = [("Content-Type", "application/json"), ("Allow", "GET, POST")]
        if self.command == "HEAD":
            with contextlib.suppress(OSError):
                self.wfile.write(self._head(405, [*headers, ("Content-Length", str(len(body)))]) + b"\r\n")
                self.wfile.flush()
        else:
            self.close_connection = True  # any body it came with is left unread
            self._send_whole(405, headers, body)

    do_HEAD = do_OPTIONS = do_PUT = do_PATCH = do_DELETE = _not_allowed

    # ---- routing ----------------------------------------------------------------------------------------

    def do_GET(self) -> None:
        path = urlsplit(self.path).path.rstrip("/")
        # a model id may hold slashes (``org/model``) but no ``..``: forwarded, ``/v1/models/../../x`` would reach
        # any upstream path, with --upstream-api-key attached
        segments = unquote(path).split("/")
        if (path == "/v1/models" or path.startswith("/v1/models/")) and not {".", ".."} & set(segments):
            self._forward(None)
        else:
            self._send_simple(404, _error_body(404, f"No route for GET {path or '/'}.", "not_found"))

    def do_POST(self) -> None:
        if not self.proxy.authorized(self.headers.get("authorization")):
            self.close_connection = True  # the body is left unread: a stranger's 64 MiB is never buffered
            self._refuse_unauthorized()
            return
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            self.close_connection = True  # the chunked body is left unread
            message = "Chunked request bodies are not accepted; send the body with a Content-Length."
            self._send_simple(411, _error_body(411, message, "length_required"))
            return
        try:
            length = int(self.headers.get("content-length") or 0)
            if length < 0:
                raise ValueError
        except ValueError:
            self.close_connection = True
            message = f"Content-Length {self.headers.get('content-length')!r} is not a byte count."
            self._send_simple(400, _error_body(400, message, "bad_content_length"))
            return
        if length > MAX_BODY_BYTES:
            self.close_connection = True  # the body is left unread: read as requests, it would be obeyed
            message = f"Request body of {length} bytes is larger than the {MAX_BODY_BYTES} bytes the proxy takes."
            self._send_simple(413, _error_body(413, message, "body_too_large"))
            return
        raw = self.rfile.read(length) if length else b""
        if len(raw) < length:  # the client went away mid-body: what came is not the request it meant
            self.close_connection = True
            message = f"The request body ended after {len(raw)} of its {length} bytes (Content-Length)."
            self._send_simple(400, _error_body(400, message, "incomplete_body"))
            log.info("%s %s -> 400 (body cut short)", self.command, urlsplit(self.path).path)
            return
        path = urlsplit(self.path).path.rstrip("/")
        if path != "/v1/chat/completions":
            self._send_simple(404, _error_body(404, f"No route for POST {path or '/'}.", "not_found"))
            return
        self._forward(raw)

    # ---- forwarding -------------------------------------------------------------------------------------

    def _forward(self, body: bytes | None) -> None:
        proxy = self.proxy
        proxy.begin()
        try:
            self._forward_and_record(proxy, body)
        finally:
            proxy.end()

    def _forward_and_record(self, proxy: RecordingProxy, body: bytes | None) -> None:
        started = time.perf_counter()
        created = _now()
        client_auth = self.headers.get("authorization")
        if not proxy.authorized(client_auth):
            self._refuse_unauthorized()
            return
        parts = urlsplit(self.path)
        client_secrets = [  # the client's own key, however it sent it, is cut out of what is recorded
            client_auth.split(None, 1)[-1] if client_auth else "",
            *(self.headers.get(name) or "" for name in CLIENT_KEY_HEADERS),
            *(value for name, value in parse_qsl(parts.query) if _is_key_parameter(name)),
        ]
        request_json = _json_or_none(body) if body is not None else None
        stream = bool(isinstance(request_json, dict) and request_json.get("stream"))
        model = request_json.get("model") if isinstance(request_json, dict) else None
        target = proxy.upstream.base_path + parts.path[len("/v1") :] + (f"?{parts.query}" if parts.query else "")
        trace = ProxyTrace(
            created_at=created,
            method=self.command,
            path=parts.path,
            upstream=proxy.upstream.display,
            status_code=0,
            latency_s=0.0,
            stream=stream,
            model=model if isinstance(model, str) else None,
            request=proxy.redactor.json(request_json, client_secrets) if request_json is not None else None,
        )
        # a body that is not JSON is not stored (the store keeps JSON requests), but the pair says one came, of what
        # size and type, whatever else goes wrong (an upstream's 400 about it would otherwise take its place)
        request_note = _request_note(body, self.headers.get("content-type")) if request_json is None else None
        trace.error = request_note
        connection = proxy.upstream.connection(proxy.config.timeout_s)
        watch: _ClientWatch | None = None
        try:
            try:
                connection.request(self.command, target, body=body, headers=proxy.upstream_headers(self.headers))
                if connection.sock is not None:
                    connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                watch = _ClientWatch(self.connection, connection)
                response = connection.getresponse()
            except TimeoutError:
                timeout_s = proxy.config.timeout_s
                message = f"upstream {proxy.upstream.display} did not answer within {timeout_s:g} s (--timeout-s)"
                self._send_simple(504, _error_body(504, message, "upstream_timeout"))
                trace.status_code, trace.error = 504, message
                return
            except (OSError, http.client.HTTPException) as exc:
                if watch is not None and watch.gone:
                    trace.status_code, trace.error = CLIENT_GONE, CLIENT_GONE_BEFORE_ANSWER
                    return
                message = f"upstream {proxy.upstream.display} unreachable: {type(exc).__name__}: {exc}"
                message = proxy.redactor.text(message, client_secrets)
                self._send_simple(502, _error_body(502, message, "upstream_unreachable"))
                trace.status_code, trace.error = 502, message
                return
            if 300 <= response.status < 400 and response.status != 304:  # a client following it would go round us
                location = redact_url_text(response.getheader("location") or "") or "nowhere"
                message = proxy.redactor.text(
                    f"upstream {proxy.upstream.display} answered HTTP {response.status}, a redirect to {location}; "
                    "the proxy does not follow redirects: set --upstream to where the endpoint is",
                    client_secrets,
                )
                self._send_simple(502, _error_body(502, message, "upstream_redirect"))
                trace.status_code, trace.error = 502, message
                return
            trace.first_byte_s = time.perf_counter() - started
            trace.status_code = response.status
            headers = self._passed_headers(response)
            content_type = (response.getheader("content-type") or "").lower()  # media types ignore case
            if stream and response.status == 200 and "text/event-stream" in content_type:
                raw = self._relay_stream(response, headers, trace)
                watch.stop()
                if watch.gone and trace.error is not None:  # the stream broke off because the client went
                    trace.error = CLIENT_GONE_DURING_STREAM
                try:
                    text = _decoded(raw, response.getheader("content-encoding")).decode("utf-8", errors="replace")
                except ValueError as exc:
                    text = ""
                    trace.error = trace.error or str(exc)
                reassembled = reassemble_stream(text)
                trace.response = proxy.redactor.json(reassembled, client_secrets) if reassembled else None
                trace.response_text = proxy.redactor.text(text, client_secrets) if text else None
            else:
                try:
                    raw = _read_body(response, started + proxy.config.timeout_s, proxy.config.timeout_s)
                except EndpointResponseTooLarge as exc:
                    message = proxy.redactor.text(f"upstream {proxy.upstream.display} sent {exc.message}")
                    self._send_simple(502, _error_body(502, message, "upstream_response_too_large"))
                    trace.status_code, trace.error = 502, message
                    return
                except (OSError, http.client.HTTPException) as exc:  # cut short, or stalled past --timeout-s
                    partial = exc.partial if isinstance(exc, http.client.IncompleteRead) else b""
                    if watch.gone:
                        trace.status_code, trace.error = CLIENT_GONE, CLIENT_GONE_BEFORE_ANSWER
                        text = partial.decode("utf-8", errors="replace")
                        trace.response_text = proxy.redactor.text(text, client_secrets) if text else None
                        return
                    message = f"upstream {proxy.upstream.display} broke off its response: {type(exc).__name__}: {exc}"
                    message = proxy.redactor.text(message, client_secrets)
                    self._send_simple(502, _error_body(502, message, "upstream_broken_response"))
                    trace.status_code, trace.error = 502, message
                    text = partial.decode("utf-8", errors="replace")
                    trace.response_text = proxy.redactor.text(text, client_secrets) if text else None
                    return
                self._send_whole(response.status, headers, raw)
                try:
                    decoded = _decoded(raw, response.getheader("content-encoding"))
                except ValueError as exc:
                    decoded, trace.error = b"", str(exc)
                parsed = _json_or_none(decoded)
                if parsed is not None:
                    trace.response = proxy.redactor.json(parsed, client_secrets)
                elif decoded or not trace.error:
                    text = decoded.decode("utf-8", errors="replace")
                    trace.response_text = proxy.redactor.text(text, client_secrets)
                    trace.error = f"upstream answered HTTP {response.status} with a body that is not JSON"
            if isinstance(trace.response, dict):
                trace.prompt_tokens, trace.completion_tokens, trace.total_tokens = _usage(trace.response)
                if isinstance(trace.response.get("model"), str) and trace.model is None:
                    trace.model = trace.response["model"]
                error = trace.response.get("error")
                if response.status >= 400 and isinstance(error, dict):
                    trace.error = str(error.get("message"))[:2000]
        finally:
            if watch is not None:
                watch.stop()
            connection.close()
            if request_note is not None and not (trace.error or "").startswith(request_note):
                trace.error = f"{request_note}; {trace.error}" if trace.error else request_note
            trace.latency_s = time.perf_counter() - started
            log.info("%s %s -> %d in %.3fs", self.command, parts.path, trace.status_code, trace.latency_s)
            proxy.record(trace)

    def _refuse_unauthorized(self) -> None:
        self._send_simple(401, _error_body(401, "Missing or wrong bearer token for this proxy.", "unauthorized"))
        log.info("%s %s -> 401 (bad proxy token)", self.command, urlsplit(self.path).path)

    def _passed_headers(self, response: http.client.HTTPResponse) -> list[tuple[str, str]]:
        passed = []
        for name, value in response.getheaders():
            lower = name.lower()
            if lower in HOP_BY_HOP:
                continue
            if lower in PASSED_RESPONSE_HEADERS or lower.startswith(PASSED_RESPONSE_PREFIXES):
                # a value folded over lines (obs-fold) is unfolded, as RFC 9112 asks of a proxy: passed on as it
                # came, its continuation lines would be written into the client's header block
                passed.append((name, _FOLD.sub(" ", value).strip()))
        return passed

    def _head(self, status: int, headers: list[tuple[str, str]]) -> bytes:
        reason = http.client.responses.get(status, "")
        lines = [f"HTTP/1.1 {status} {reason}", f"Server: {self.server_version}"]
        lines += [f"{name}: {value}" for name, value in headers]
        return ("\r\n".join(lines) + "\r\n").encode("latin-1")

    def _send_whole(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        head = self._head(status, [*headers, ("Content-Length", str(len(body)))])
        with contextlib.suppress(OSError):
            self.wfile.write(head + b"\r\n" + body)
            self.wfile.flush()

    def _send_simple(self, status: int, body: bytes) -> None:
        self._send_whole(status, [("Content-Type", "application/json")], body)

    def _relay_stream(
        self, response: http.client.HTTPResponse, headers: list[tuple[str, str]], trace: ProxyTrace
    ) -> bytes:
        """Pass an SSE stream on chunk by chunk (chunked transfer encoding); returns every byte relayed. A stream
        past the provider's cap (``MAX_RESPONSE_BYTES``) is cut there, as one that broke off, and none of it is
        returned to be recorded. An HTTP/1.0 client, which knows no chunked encoding, gets the stream as a body
        that ends when the connection closes (``Connection: close``, no ``Transfer-Encoding``)."""
        received = CappedBody()
        client_open = True
        chunked = self.request_version != "HTTP/1.0"
        if not chunked:
            self.close_connection = True  # the end of the body is the end of the connection
        framing = ("Transfer-Encoding", "chunked") if chunked else ("Connection", "close")
        try:
            self.wfile.write(self._head(200, [*headers, framing]) + b"\r\n")
            self.wfile.flush()
        except OSError:
            client_open = False
        while True:
            try:
                piece = response.read1(65536)
            except (OSError, http.client.HTTPException) as exc:  # cut short, or stalled past --timeout-s
                trace.error = self.proxy.redactor.text(
                    f"upstream stream broke off after {received.size} bytes: {type(exc).__name__}: {exc}"
                )
                self.close_connection = True  # no final chunk: the client sees the stream end abnormally too
                return received.value()
            if not piece:
                break
            try:
                received.add(piece)
            except EndpointResponseTooLarge as exc:
                trace.error = f"upstream stream {exc.message}"
                self.close_connection = True  # no final chunk: the client sees the stream end abnormally
                return b""
            if client_open:
                try:
                    self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n" if chunked else piece)
                    self.wfile.flush()
                except OSError:
                    client_open = False
                    trace.error = CLIENT_GONE_DURING_STREAM
                    break
        if client_open and chunked:
            with contextlib.suppress(OSError):
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
        return received.value()
