"""The dashboard in a real browser: ``contextdelta dashboard`` serves two scripted-server runs, headless Chromium
loads each page, waits for it to render, and saves a screenshot; every page must show the run's id and no
Streamlit exception box.

Needs Debian's ``chromium``: outside CI the test skips when it is missing, in CI (``CI`` set) it fails. Set
``CONTEXTDELTA_SCREENSHOT_DIR`` to keep the screenshots (the README's come from there).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.dashboard.cdp import chromium_page, find_chromium
from tests.report import runs

pytestmark = pytest.mark.browser

EPISODE = "order-address-after-ship.last_n.unprotected.r1"
"""A failure whose fresh observation the strategy dropped, with the hidden mutation that made its view stale."""
WIDTH = 1600
"""Browser window width for the screenshots (px)."""
MUTATION = "(not shown to the agent) warehouse-ships-cookware"
"""The episode's hidden-mutation banner."""


def chromium_or_skip() -> str:
    path = find_chromium()
    if path is None:
        reason = "headless Chromium is not installed (Debian: apt-get install -y chromium)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI installs it in .ci/services.sh")
        pytest.skip(reason)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_healthy(url: str, process: subprocess.Popen[bytes], timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = process.stdout.read().decode(errors="replace") if process.stdout else ""
            raise AssertionError(f"the dashboard exited with {process.returncode}:\n{output[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.read().strip() == b"ok":
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"the dashboard did not answer on {url} within {timeout_s}s")


@pytest.fixture(scope="session")
def chromium() -> str:
    """The Chromium executable (skips outside CI when there is none; fails in CI)."""
    return chromium_or_skip()


@pytest.fixture
def dashboard(chromium: str, tmp_path: Path, trusting_run: Path, unsafe_run: Path) -> Iterator[str]:
    """``contextdelta dashboard`` on a results folder with both runs; yields its base URL."""
    results = tmp_path / "results"
    results.mkdir()
    runs.copy_run(trusting_run, results)
    runs.copy_run(unsafe_run, results)
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "contextdelta", "dashboard", "--results-dir", str(results), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "CONTEXTDELTA_DATABASE_URL": f"sqlite:///{tmp_path / 'store.db'}"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout:
            process.stdout.close()


def test_every_page_renders_in_headless_chromium(
    chromium: str, dashboard: str, tmp_path: Path, trusting_run: Path, unsafe_run: Path
) -> None:
    shots = tmp_path / "screenshots"
    shots.mkdir()
    trusting, unsafe = trusting_run.name, unsafe_run.name
    pages = [
        ("runs", f"/?run={trusting}", trusting, ["Runs", "newest first"]),
        ("conditions", f"/conditions?run={trusting}", trusting, ["Task-level comparisons", "stale action"]),
        ("atlas", f"/atlas?run={unsafe}&protection=unprotected", unsafe, ["Failure atlas", "of 23 failures"]),
        ("episode", f"/episode?run={unsafe}&episode={EPISODE}", unsafe, ["Timeline", EPISODE, MUTATION]),
    ]
    keep = os.environ.get("CONTEXTDELTA_SCREENSHOT_DIR")
    with chromium_page(chromium, width=WIDTH) as page:
        for name, path, run_id, expect in pages:
            state = page.load(dashboard + path, [run_id, *expect])
            assert not state.exception, f"{name}: Streamlit shows an exception:\n{state.text[:3000]}"
            assert run_id in state.text
            assert "Traceback" not in state.text
            shot = page.screenshot(shots / f"{name}.png", width=WIDTH)
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
            if keep:
                Path(keep).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(shot, Path(keep) / f"dashboard-{name}.png")
