"""One episode's world as an MCP server (the official ``mcp`` SDK, low-level ``Server``), over streamable HTTP on
loopback or over stdio.

What the agent is offered: the world's tools in the episode's protection mode with the JSON schemas the built-in
agent gets, plus ``finish``; the server instructions (:func:`~contextdelta.mcp._episode.server_instructions`:
the fixed system prompt, how to finish, the task message); and one prompt, ``task``, holding the task message.
Tool calls go to :class:`~contextdelta.mcp._episode.WorldEpisode`; a tool result is the world's JSON text,
flagged ``isError`` when the call was not executed (invalid, forbidden, blocked or rejected).

The ``mcp`` package is an optional extra (``pip install 'contextdelta[mcp]'``): it is imported here only, and
this module is imported only by the commands that serve a world.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import os
import socket
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import Any

import anyio

from contextdelta import __version__
from contextdelta.agent import task_message_text
from contextdelta.mcp._episode import FINISH_DESCRIPTION, FINISH_SCHEMA, FINISH_TOOL, WorldEpisode

SERVER_NAME = "contextdelta-world"
TASK_PROMPT = "task"
MCP_PATH = "/mcp"
GRACEFUL_SHUTDOWN_S = 2
SHUTDOWN_GRACE_S = 3
"""Beyond uvicorn's graceful shutdown, how long the server may take to stop before it is cancelled."""


_NO_ARGUMENTS = object()
_RAW_ARGUMENTS: ContextVar[Any] = ContextVar("contextdelta_raw_tool_arguments", default=_NO_ARGUMENTS)
"""The ``arguments`` of the ``tools/call`` being handled when they are not an object (a list, a string, a number),
set by :func:`_keep_malformed_arguments` for the handler to pass on to the world."""


async def _keep_malformed_arguments(ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
    """Server middleware: a ``tools/call`` whose ``arguments`` are not an object reaches the handler (with ``{}``
    in their place and the value itself in `_RAW_ARGUMENTS`) instead of the SDK's bare "Invalid request
    parameters", which no step records; the world answers the value as malformed arguments (outcome ``invalid``),
    recorded as the built-in loop records a model's."""
    params = ctx.params
    if ctx.method != "tools/call" or not isinstance(params, Mapping):
        return await call_next(ctx)
    arguments = params.get("arguments")
    if arguments is None or isinstance(arguments, Mapping):
        return await call_next(ctx)
    token = _RAW_ARGUMENTS.set(arguments)
    try:
        return await call_next(dataclasses.replace(ctx, params={**params, "arguments": {}}))
    finally:
        _RAW_ARGUMENTS.reset(token)


class McpUnavailable(RuntimeError):
    """The optional ``mcp`` extra is not installed."""


def require_mcp() -> None:
    """Raise McpUnavailable (with the install command) when the ``mcp`` package cannot be imported."""
    try:
        import mcp  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise McpUnavailable(
            f"serving a world over MCP needs the mcp extra ({exc.name} is not installed): "
            "pip install 'contextdelta[mcp]'"
        ) from None


def build_server(episode: WorldEpisode) -> Any:
    """The MCP server of ``episode`` (an ``mcp.server.Server``)."""
    import mcp_types as types
    from mcp.server import Server
    from mcp.shared.exceptions import MCPError

    tools = [
        types.Tool(
            name=schema["function"]["name"],
            description=schema["function"].get("description"),
            input_schema=schema["function"]["parameters"],
        )
        for schema in episode.tool_schemas()
    ]
    tools.append(types.Tool(name=FINISH_TOOL, description=FINISH_DESCRIPTION, input_schema=FINISH_SCHEMA))
    task_text = task_message_text(episode.task.public_task)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        raw = _RAW_ARGUMENTS.get()
        arguments = params.arguments if raw is _NO_ARGUMENTS else raw
        if params.name == FINISH_TOOL:
            answer = arguments.get("answer") if isinstance(arguments, dict) else None
            text, is_error = episode.finish(answer)  # not a string (or none): an error, and the episode goes on
        else:
            # in a worker thread: a call that takes its time holds neither the event loop nor the other requests
            # (the episode's lock still runs calls one at a time, in the order they came)
            request_id = getattr(ctx, "request_id", None)
            text, is_error = await anyio.to_thread.run_sync(episode.call, params.name, arguments, request_id)
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=is_error)

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(
            prompts=[types.Prompt(name=TASK_PROMPT, description="The task to carry out with this server's tools.")]
        )

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        if params.name != TASK_PROMPT:
            raise MCPError(
                code=types.INVALID_PARAMS, message=f"unknown prompt {params.name!r}; the one prompt is 'task'"
            )
        return types.GetPromptResult(
            description="The task to carry out with this server's tools.",
            messages=[types.PromptMessage(role="user", content=types.TextContent(text=task_text))],
        )

    server = Server(
        SERVER_NAME,
        version=__version__,
        instructions=episode.instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )
    server.middleware.append(_keep_malformed_arguments)
    return server


def loopback_socket(port: int = 0) -> socket.socket:
    """A listening TCP socket on 127.0.0.1 (``port`` 0: a free port, with no window for another process to take
    it between choosing and binding)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    sock.set_inheritable(False)
    return sock


@contextlib.asynccontextmanager
async def serve_http(episode: WorldEpisode, sock: socket.socket) -> AsyncIterator[str]:
    """Serve ``episode`` over streamable HTTP on ``sock`` for the duration of the block; yields the URL once the
    server answers. Signals are left to the caller (several episodes may be served at once)."""
    import uvicorn

    class _Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Any:
            yield

    app = EpisodeGate(build_server(episode).streamable_http_app(host="127.0.0.1"), episode)
    config = uvicorn.Config(
        app, log_level="warning", lifespan="on", timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S, access_log=False
    )
    server = _Server(config)
    host, port = sock.getsockname()[:2]
    # The server runs shielded: when the block is cancelled (Ctrl-C of run-external with episodes in flight), it is
    # told to exit and shuts down as on a normal end, within a bounded time, instead of being cancelled mid-way,
    # which left uvicorn's lifespan task waiting and printed its CancelledError traceback as the loop closed.
    shield = anyio.CancelScope(shield=True)

    async def serve() -> None:
        with shield:
            await server.serve([sock])

    async with anyio.create_task_group() as group:
        group.start_soon(serve)
        try:
            while not server.started:
                if server.should_exit:
                    raise RuntimeError("the MCP HTTP server did not start")
                await anyio.sleep(0.01)
            yield f"http://{host}:{port}{MCP_PATH}"
        finally:
            server.should_exit = True
            shield.deadline = anyio.current_time() + GRACEFUL_SHUTDOWN_S + SHUTDOWN_GRACE_S


async def serve_stdio(episode: WorldEpisode) -> None:
    """Serve ``episode`` over this process's stdin/stdout until the client closes the session (stdin ends).

    A line that is not a JSON-RPC message is answered with a JSON-RPC error and the server goes on: the SDK's stdio
    transport hands such a line to the server as an exception, which the server only logs, so a client that sent a
    request it mangled waited for its answer for good."""
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    server = build_server(episode)
    stdin = sys.stdin.fileno() if sys.stdin is not None else -1  # started with stdin closed: it ends at once
    async with stdio_server(stdin=StdinLines(stdin)) as (read, write):  # type: ignore[arg-type]
        messages, received = anyio.create_memory_object_stream[Any](0)

        async def answer_unreadable_lines() -> None:
            async with messages:
                async for item in read:
                    if isinstance(item, Exception):
                        await write.send(SessionMessage(unreadable_message_error(item)))
                    elif (error := idless_request_error(item.message)) is not None:
                        await write.send(SessionMessage(error))
                    else:
                        await messages.send(item)

        async with anyio.create_task_group() as group:
            group.start_soon(answer_unreadable_lines)
            await server.run(received, write, server.create_initialization_options())


def envelope_problem(message: Any) -> tuple[str | int | None, str] | None:
    """Why a parsed JSON-RPC body is not a valid JSON-RPC 2.0 message for MCP: (the ``id`` to answer with, what is
    wrong), or None when its envelope is valid. An ``id`` must be a string or an integer (MCP allows no null, and
    JSON-RPC's booleans, objects and fractions are none of these); a message without one is a notification, and
    every MCP notification's method starts with ``notifications/``, so a ``tools/list`` without an id was a request
    whose id was lost. What the envelope holds (the method's params) is left to the SDK."""
    if isinstance(message, list):
        if not message:
            return None, "an empty batch (`[]`) is no message; send one JSON-RPC object per request"
        return None, "a batch (a JSON array) is not supported by MCP 2025-06-18; send each message on its own"
    if not isinstance(message, Mapping):
        return None, f"the body is a JSON {type(message).__name__}, not a JSON-RPC message (an object)"
    raw_id = message.get("id")
    valid_id = isinstance(raw_id, str | int) and not isinstance(raw_id, bool)
    request_id = raw_id if valid_id else None
    if message.get("jsonrpc") != "2.0":
        got = "missing" if "jsonrpc" not in message else f"{json_text(message['jsonrpc'])}"
        return request_id, f'`jsonrpc` must be "2.0"; it is {got}'
    if "method" not in message:
        return None  # a response (result or error) from the client: the SDK's to read
    method = message["method"]
    if not isinstance(method, str):
        return request_id, f"`method` must be a string; it is {json_text(method)}"
    if "params" in message and not isinstance(message["params"], Mapping | list):
        return request_id, f"`params` must be an object or an array; it is {json_text(message['params'])}"
    if "id" in message and not valid_id:
        return (
            None,
            f"{method} needs an `id` that is a string or an integer (JSON-RPC 2.0, MCP); it is {json_text(raw_id)}",
        )
    if "id" not in message and not method.startswith("notifications/"):
        return None, (
            f"{method} needs an `id` that is a string or an integer (JSON-RPC 2.0); without one it is a "
            "notification, and a notification of that method does not exist"
        )
    return None


def json_text(value: Any, limit: int = 80) -> str:
    """A value as JSON text for an error message, cut to ``limit`` characters."""
    import json

    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def jsonrpc_error_body(request_id: str | int | None, code: int, message: str) -> bytes:
    """A JSON-RPC error response as the bytes of an HTTP body."""
    import mcp_types as types

    error = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))
    return error.model_dump_json(by_alias=True, exclude_unset=True).encode()


class EpisodeGate:
    """ASGI middleware in front of the SDK's streamable HTTP app: what the SDK lets through that would reach the
    episode wrongly.

    One episode belongs to one MCP session: the first ``initialize`` claims it, and every later one (a second
    client, or the first reconnecting) is refused with HTTP 409 and a JSON-RPC error that says why, instead of
    joining the episode and interleaving its calls into the same world and record. And a body whose JSON-RPC
    envelope is invalid (:func:`envelope_problem`) is answered HTTP 400 with a JSON-RPC -32600 Invalid Request
    naming what is wrong: the SDK took a request with an ``id`` of ``true``, ``1.5`` or an object for a
    notification (HTTP 202, never answered) and answered the other malformed envelopes -32602 "Invalid params"
    with a pydantic dump."""

    def __init__(self, app: Any, episode: WorldEpisode | None = None, max_body: int | None = None) -> None:
        from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

        self.app = app
        self.episode = episode
        self.max_body = DEFAULT_MAX_REQUEST_BODY_SIZE if max_body is None else max_body
        """The most bytes one request body may have (the SDK's own limit): a larger one is refused unread."""
        self.claimed = False
        self.owner: bytes | None = None
        """The session id of the session that holds the episode (from its ``initialize`` answer)."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "DELETE":
            await self._delete(scope, receive, send)
            return
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        import json

        import mcp_types as types
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

        version = dict(scope.get("headers") or []).get(b"mcp-protocol-version")
        if version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS:
            # the sessionless era (2026-07-28): each request stands alone, so nothing tells two clients apart and
            # one episode cannot belong to one of them; a client in mode "auto" (the SDK's default) takes this
            # error as "legacy server" and opens a session with initialize
            text = (
                f"this server serves one episode to one MCP session, so it speaks only the session protocol "
                f"(initialize; versions {', '.join(sorted(HANDSHAKE_PROTOCOL_VERSIONS))}), not the sessionless "
                f"{version.decode('latin-1')!r}: connect with one of those versions"
            )
            await _json_response(send, 400, jsonrpc_error_body(None, types.INVALID_REQUEST, f"Invalid request: {text}"))
            return
        messages: list[Any] = []
        body = bytearray()
        declared = dict(scope.get("headers") or []).get(b"content-length", b"0")
        too_large = declared.isdigit() and int(declared) > self.max_body
        while not too_large:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            too_large = len(body) > self.max_body
            if not message.get("more_body", False):
                break
        if too_large:  # the SDK answered a bare "Request body too large" that no JSON-RPC client could read
            text = (
                f"Invalid request: the request body is over {self.max_body} bytes, the most one message may have; "
                "send smaller arguments"
            )
            await _json_response(send, 413, jsonrpc_error_body(None, types.INVALID_REQUEST, text))
            return
        replay = iter(messages)

        async def replayed() -> Any:
            return next(replay, None) or await receive()

        try:
            parsed = json.loads(body)
        except (ValueError, RecursionError):  # nested deeper than Python's parser goes: the SDK's reader refuses it
            await self.app(scope, replayed, send)  # not JSON: the SDK's parse error (-32700) says so
            return
        problem = envelope_problem(parsed)
        if problem is not None:
            request_id, text = problem
            await _json_response(
                send, 400, jsonrpc_error_body(request_id, types.INVALID_REQUEST, f"Invalid request: {text}")
            )
            return
        if isinstance(parsed, Mapping) and parsed.get("method") == "initialize":
            if self.claimed:
                text = (
                    "this server serves one ContextDelta episode, and an MCP session already holds it: a second "
                    "session would interleave its calls into the same world and record. Use the session that "
                    "initialized first, or start another serve-world for another episode"
                )
                await _json_response(send, 409, jsonrpc_error_body(parsed.get("id"), types.INVALID_REQUEST, text))
                return
            self.claimed = True

            async def sent(message: Any) -> None:  # the session id the SDK gave the one session
                if message["type"] == "http.response.start":
                    self.owner = dict(message.get("headers") or []).get(b"mcp-session-id", self.owner)
                await send(message)

            await self.app(scope, replayed, sent)
            return
        if self.episode is None or not _is_tool_call(parsed):
            await self.app(scope, replayed, send)
            return
        # a tools/call: whether its answer went out before the client disconnected
        answered = disconnected = False

        async def watched_receive() -> Any:
            nonlocal disconnected
            message = await replayed()
            if message["type"] == "http.disconnect" and not answered:
                disconnected = True
            return message

        async def watched_send(message: Any) -> None:
            nonlocal answered
            if message["type"] == "http.response.body" and message.get("body"):
                answered = answered or not disconnected
            await send(message)

        await self.app(scope, watched_receive, watched_send)
        if disconnected and not answered:
            episode, request_id, tool = self.episode, parsed["id"], str(parsed["params"].get("name"))
            await anyio.to_thread.run_sync(episode.undelivered, request_id, tool)  # once the call has returned

    async def _delete(self, scope: Any, receive: Any, send: Any) -> None:
        """The client ends its session (HTTP DELETE): once the SDK has ended the one session that holds the episode,
        the episode is over as a closed session (no other session may take it up, so waiting would hang)."""
        status: list[int] = []

        async def sent(message: Any) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        await self.app(scope, receive, sent)
        session = dict(scope.get("headers") or []).get(b"mcp-session-id")
        if self.episode is not None and session is not None and session == self.owner and status[:1] == [200]:
            self.episode.close("session_closed")


def _is_tool_call(message: Any) -> bool:
    """Whether a (valid) JSON-RPC message is a ``tools/call`` request of a tool of the world (``finish`` aside)."""
    return (
        isinstance(message, Mapping)
        and message.get("method") == "tools/call"
        and "id" in message
        and isinstance(message.get("params"), Mapping)
        and message["params"].get("name") != FINISH_TOOL
    )


async def _json_response(send: Any, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def idless_request_error(message: Any) -> Any:
    """The JSON-RPC error (-32600, ``id`` null) that answers a request whose ``id`` is neither a string nor an
    integer (``true``, ``1.5``, an object), or None for any other message. The SDK reads such a line as a
    notification, dropping the ``id``, and a notification is never answered: the client waited for its answer for
    good. Every MCP notification's method starts with ``notifications/``; one that does not was a request."""
    import mcp_types as types

    if not isinstance(message, types.JSONRPCNotification) or message.method.startswith("notifications/"):
        return None
    text = (
        f"Invalid request: {message.method} needs an `id` that is a string or an integer (JSON-RPC 2.0); "
        "without one it is a notification, and a notification of that method does not exist"
    )
    return types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(code=types.INVALID_REQUEST, message=text))


def unreadable_message_error(exc: Exception) -> Any:
    """The JSON-RPC error (a ``JSONRPCError``) that answers a line the stdio transport could not read as a message:
    a parse error (-32700) when it is not JSON, else an invalid request (-32600), with the line's ``id`` when it has
    one (so the client waiting for that request gets its answer) and ``null`` otherwise."""
    import mcp_types as types
    from pydantic import ValidationError

    errors = exc.errors() if isinstance(exc, ValidationError) else []
    if not errors or any(error["type"] == "json_invalid" for error in errors):
        detail = errors[0]["msg"] if errors else str(exc)
        error = types.ErrorData(code=types.PARSE_ERROR, message=f"Parse error: the line is not JSON ({detail})")
        return types.JSONRPCError(jsonrpc="2.0", id=None, error=error)
    request_id: str | int | None = None
    for found in errors:  # the whole message is the input of the errors about it (a missing field)
        value = found.get("input")
        if isinstance(value, Mapping) and isinstance(value.get("id"), str | int) and not isinstance(value["id"], bool):
            request_id = value["id"]
            break
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"][1:]) or "the message"
    message = f"Invalid request: not a JSON-RPC 2.0 message ({where}: {first['msg']})"
    error = types.ErrorData(code=types.INVALID_REQUEST, message=message)
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)


class StdinLines:
    """The lines of a file descriptor (stdin), read by a daemon thread, for the SDK's stdio transport.

    The SDK's own reader waits for each line in a worker thread that cancellation cannot stop and the event loop
    waits for: a SIGTERM or Ctrl-C while the client still held stdin open left serve-world hanging (and the episode
    unwritten) until the client closed it. Here a read blocked on stdin holds nothing: waiting for the next line is
    cancellable, and the thread is a daemon that dies with the process (it reads the descriptor with ``os.read``:
    a daemon thread blocked inside a buffered file object aborts the interpreter at exit)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lines: Any = None

    def __aiter__(self) -> StdinLines:
        return self

    async def __anext__(self) -> str:
        if self._lines is None:
            send, self._lines = anyio.create_memory_object_stream[str | None](math.inf)
            loop = asyncio.get_running_loop()
            threading.Thread(target=self._read, args=(loop, send), name="stdin lines", daemon=True).start()
        line: str | None = await self._lines.receive()
        if line is None:
            self._lines.close()
            raise StopAsyncIteration
        return line

    def _read(self, loop: asyncio.AbstractEventLoop, send: Any) -> None:
        pending = bytearray()  # appended to in place: a line of megabytes costs no quadratic copying
        while True:
            try:
                chunk = os.read(self._fd, 65536)
            except OSError:
                chunk = b""
            pending += chunk
            lines: list[bytes] = []
            if b"\n" in chunk:
                *lines, rest = bytes(pending).split(b"\n")
                pending = bytearray(rest)
            items: list[str | None] = [line.decode("utf-8", "replace") + "\n" for line in lines]
            if not chunk:
                items += [pending.decode("utf-8", "replace")] if pending else []
                items.append(None)
            try:
                for item in items:
                    loop.call_soon_threadsafe(send.send_nowait, item)
                if not chunk:
                    loop.call_soon_threadsafe(send.close)
            except RuntimeError:  # the event loop is closed: nobody reads any more
                return
            if not chunk:
                return


async def wait_for_end(episode: WorldEpisode, poll_s: float = 0.05) -> None:
    """Return once the episode is over (``finish`` or the step limit)."""
    while not episode.over:
        await anyio.sleep(poll_s)


Ready = Callable[[str], None]
