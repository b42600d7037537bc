"""The threaded HTTP server lifecycle shared by the scripted test server and the recording proxy."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class ThreadedHTTPServer(ThreadingHTTPServer):
    """Daemon handler threads, a deep accept queue, and a reference back to the object that owns the server."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 512

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], owner: Any) -> None:
        self.owner = owner
        super().__init__(address, handler)


class LoopbackService:
    """Serve ``handler`` on (host, port) from a daemon thread; ``with`` starts and stops it."""

    thread_name = "loopback-service"
    server_class: type[ThreadedHTTPServer] = ThreadedHTTPServer

    def _bind(self, host: str, port: int, handler: type[BaseHTTPRequestHandler]) -> None:
        self._httpd = self.server_class((host, port), handler, self)
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        return str(self._httpd.server_address[0])

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The OpenAI base URL clients use, e.g. ``http://127.0.0.1:54321/v1``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    def serve_forever(self) -> None:
        """Serve until :meth:`stop` is called from another thread."""
        self._httpd.serve_forever(poll_interval=0.1)

    def start(self) -> Self:
        """Serve in a daemon thread; returns self (the socket already listens)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self.serve_forever, name=self.thread_name, daemon=True)
            self._thread.start()
        return self

    def _before_close(self) -> None:
        """Called after the server stopped accepting and before the socket closes."""

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._before_close()
        self._httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
