"""Talking to a ``serve-world --transport stdio`` process line by line, as a raw JSON-RPC client."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from collections.abc import Callable
from typing import Any


def line_exchange(server: subprocess.Popen[str]) -> Callable[[str], dict[str, Any]]:
    """A function that writes one line to the server's stdin and returns its next reply (read by a thread of its
    own); no reply within 60 s fails the test there instead of hanging it."""
    assert server.stdin is not None and server.stdout is not None
    replies: queue.Queue[dict[str, Any]] = queue.Queue()
    stdout = server.stdout

    def read() -> None:
        for line in stdout:
            replies.put(json.loads(line))

    threading.Thread(target=read, daemon=True).start()

    def send(line: str) -> dict[str, Any]:
        assert server.stdin is not None
        server.stdin.write(line + "\n")
        server.stdin.flush()
        return replies.get(timeout=60)

    return send
