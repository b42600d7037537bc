"""The local model's OpenAI-compatible HTTP endpoint (FastAPI on uvicorn), bound to 127.0.0.1 by default.

Routes: ``GET /v1/models``, ``GET /v1/models/{id}``, ``POST /v1/chat/completions``, ``GET /health``. Errors use
OpenAI's body shape (``{"error": {"message", "type", "param", "code"}}``); a prompt longer than the context
window is a 400 with code ``context_length_exceeded``. Generation runs in a worker thread so the event loop
keeps accepting requests while it waits on the engine's lock. A client that disconnects (e.g. its timeout ran
out) cancels its request: it leaves the queue, or its generation stops between prompt batches or tokens, so the
model is not kept busy for a reply nobody will read.

:class:`EndpointServer` binds the socket itself (port 0 picks a free one) and calls ``on_ready`` with the bound
port once uvicorn has started, i.e. once requests are answered; the command line prints its ``ready`` line there.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from contextdelta.local_model.engine import EndpointError, GenerationCancelled, LocalChatEngine

log = logging.getLogger(__name__)

DISCONNECT_POLL_S = 0.5
CLIENT_CLOSED_REQUEST = 499
"""Status logged for a request whose client went away (nginx's convention; nobody receives it)."""
KEEP_ALIVE_S = 120
"""Idle keep-alive: longer than a generation, so a client's pooled connection is not closed under it."""


def create_app(engine: LocalChatEngine) -> FastAPI:
    """The FastAPI application serving ``engine``."""
    app = FastAPI(title="ContextDelta local model", docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(EndpointError)
    async def _endpoint_error(request: Request, exc: EndpointError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": engine.served_name, "requests_served": engine.requests_served}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return engine.models()

    @app.get("/v1/models/{model_id}")
    async def model(model_id: str) -> dict[str, Any]:
        if model_id != engine.served_name:
            raise EndpointError(404, f"The model {model_id!r} does not exist.", code="model_not_found")
        return engine.model_card()

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Any:
        try:
            body = json.loads(await request.body())
        except ValueError:
            raise EndpointError(400, "the request body is not valid JSON") from None
        gone = threading.Event()

        async def watch_client() -> None:
            while not gone.is_set():
                if await request.is_disconnected():
                    gone.set()
                    return
                await anyio.sleep(DISCONNECT_POLL_S)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(watch_client)
            try:
                return await run_in_threadpool(engine.chat_completion, body, gone.is_set)
            except EndpointError as exc:  # answered here: raised out of a task group it would be wrapped
                return JSONResponse(exc.body(), status_code=exc.status)
            except GenerationCancelled as exc:
                log.info("request abandoned: %s", exc)
                return Response(status_code=CLIENT_CLOSED_REQUEST)
            finally:
                gone.set()  # stops the watcher
                tasks.cancel_scope.cancel()

    return app


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: a free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


class EndpointServer:
    """``engine`` served on ``host:port`` (port 0: a free port, see :attr:`port`); the socket is bound at once.

    :meth:`run` serves in the foreground until SIGINT/SIGTERM (uvicorn's own handlers shut it down gracefully);
    :meth:`start` / :meth:`stop` (or ``with``) serve from a background thread, for tests.
    """

    def __init__(
        self, engine: LocalChatEngine, *, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning"
    ) -> None:
        self.engine = engine
        self.host = host
        self._socket = bind_socket(host, port)
        self.port = int(self._socket.getsockname()[1])
        config = uvicorn.Config(
            create_app(engine), log_level=log_level, access_log=False, timeout_keep_alive=KEEP_ALIVE_S
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI base URL clients use, e.g. ``http://127.0.0.1:8080/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    def run(self, on_ready: Callable[[int], None] | None = None) -> None:
        """Serve until stopped; ``on_ready(port)`` is called once requests are answered."""

        def announce() -> None:
            while not self._server.started and not self._server.should_exit:
                time.sleep(0.05)
            if self._server.started and on_ready is not None:
                on_ready(self.port)

        threading.Thread(target=announce, name="local-model-ready", daemon=True).start()
        try:
            self._server.run(sockets=[self._socket])
        finally:
            self._socket.close()

    def start(self, timeout_s: float = 30.0) -> EndpointServer:
        """Serve from a daemon thread; returns once requests are answered."""
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self.run, kwargs={"on_ready": lambda port: ready.set()}, name="local-model-server", daemon=True
        )
        self._thread.start()
        if not ready.wait(timeout_s):
            self.stop()
            raise RuntimeError(f"the local model endpoint did not start within {timeout_s}s")
        return self

    def stop(self) -> None:
        """Ask the server to shut down and wait for its thread."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> EndpointServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
