"""``--executor ray --ray-address ADDR`` where no Ray cluster answers: refused at once (exit 2, naming the address
and what to do), before anything is created. ``ray.init`` retried such an address for many minutes in a thread that
neither Ctrl-C nor SIGTERM could stop."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contextdelta.testing import serve_scripted
from tests.runner.conftest import TASKS


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.parametrize("form", ["127.0.0.1:{port}", "ray://127.0.0.1:{port}"])
def test_a_ray_address_where_nothing_answers_is_refused_before_anything_is_created(form: str, tmp_path: Path) -> None:
    port = _closed_port()
    address = form.format(port=port)
    results = tmp_path / "results"
    with serve_scripted("oracle", TASKS) as url:
        started = time.monotonic()
        command = [sys.executable, "-m", "contextdelta", "run-benchmark", "--tasks", str(TASKS), "--quiet"]
        command += ["--task-ids", "cfg-legacy-cleanup", "--strategies", "full_history", "--repeats", "1"]
        command += ["--protection-modes", "unprotected", "--base-url", url, "--model", "scripted-oracle"]
        command += ["--executor", "ray", "--ray-address", address, "--results-dir", str(results), "--no-store"]
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=120,
        )
        took = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    message = " ".join(done.stderr.split())
    assert f"--ray-address '{address}': cannot reach a Ray cluster there" in message
    assert f"nothing answers at 127.0.0.1:{port}" in message and "ray start --head" in message
    assert "Traceback" not in done.stderr
    assert not results.exists() or list(results.iterdir()) == []
    assert took < 60
