"""The dashboard in a real browser: ``contextdelta dashboard`` serves three scripted-server runs, headless Chromium
(a 1366 px window) loads every page by its URL (``/runs`` too, a text search, a comparison and a NOT COMPARABLE
one), waits for it to render, and saves a screenshot; every page must show its run and no Streamlit exception
box, its tables' key columns must be in view, and no request the browser made (every DevTools ``Network`` event)
nor any resource the page names (the favicon included) may leave loopback.

Needs Debian's ``chromium``: outside CI the test skips when it is missing, in CI (``CI`` set) it fails. Set
``CONTEXTDELTA_SCREENSHOT_DIR`` to keep the screenshots (the README's come from there).
"""

from __future__ import annotations

import contextlib
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

from contextdelta.dashboard.data import load_run, search_episodes
from tests.dashboard.cdp import Page, chromium_page, find_chromium
from tests.report import runs

pytestmark = pytest.mark.browser

EPISODE = "order-address-after-ship.last_n.unprotected.r1"
"""A failure whose fresh observation the strategy dropped, with the hidden mutation that made its view stale."""
WIDTH = 1366
"""Browser window width (px): the key columns of every table must be in view at this width."""
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


@contextlib.contextmanager
def served_dashboard(results: Path, store: Path) -> Iterator[str]:
    """``contextdelta dashboard`` on ``results`` (its own trace store at ``store``) in a process of its own; yields
    its base URL once healthy, and stops it."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "contextdelta", "dashboard", "--results-dir", str(results), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "CONTEXTDELTA_DATABASE_URL": f"sqlite:///{store}"},
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


@pytest.fixture(scope="session")
def chromium() -> str:
    """The Chromium executable (skips outside CI when there is none; fails in CI)."""
    return chromium_or_skip()


@pytest.fixture(scope="module")
def dashboard(
    chromium: str, tmp_path_factory: pytest.TempPathFactory, trusting_run: Path, unsafe_run: Path
) -> Iterator[str]:
    """``contextdelta dashboard`` on a results folder with the two runs and the oracle run on the trusting run's
    tasks (comparable with it); yields its base URL."""
    tmp_path = tmp_path_factory.mktemp("dashboard-browser")
    results = tmp_path / "results"
    results.mkdir()
    for path in (trusting_run, unsafe_run, runs.oracle_pair_run()):
        runs.copy_run(path, results)
    with served_dashboard(results, tmp_path / "store.db") as url:
        yield url


HEADERS = (
    "Array.from(document.querySelectorAll('[data-testid=stDataFrame]'), "
    "d => Array.from(d.querySelectorAll('th'), t => t.innerText.trim()))"
)
"""Per table on the page, the headers of the columns it renders: the grid draws on a canvas and mirrors only the
columns in view (and the one cut by the edge) in an accessibility table."""


def in_view(page: Page) -> list[list[str]]:
    """Per table, the headers of the columns wholly in view (the last rendered one may be cut by the edge)."""
    return [headers[:-1] for headers in page.evaluate(HEADERS) or []]


def test_every_page_renders_in_headless_chromium_and_stays_on_loopback(
    chromium: str, dashboard: str, tmp_path: Path, trusting_run: Path, unsafe_run: Path
) -> None:
    shots = tmp_path / "screenshots"
    shots.mkdir()
    trusting, unsafe, pair = trusting_run.name, unsafe_run.name, runs.oracle_pair_run().name
    found = len(search_episodes(load_run(trusting_run).search, "issue_refund"))
    pages = [
        ("runs", f"/?run={trusting}", trusting, ["Runs", "newest first"], []),
        ("runs-url", "/runs", pair, ["Runs", "newest first"], []),  # no run given: the newest
        (
            "conditions",
            f"/conditions?run={trusting}",
            trusting,
            ["Difference from full_history", "Task-level comparisons", "stale action"],
            [["comparison", "difference a - b", "p (Holm)", "p (sign-flip)", "discordant"]],
        ),
        (
            "episodes",
            f"/episodes?run={trusting}",
            trusting,
            ["Episodes", "48 of 48 episodes"],
            [["outcome", "failure mode", "task"]],
        ),
        (
            "search",
            f"/episodes?run={trusting}&q=issue_refund&protection=unprotected",
            trusting,
            ["of 48 episodes", "match the filters and contain “issue_refund”"],
            [["outcome", "failure mode", "match", "task"]],
        ),
        (
            "atlas",
            f"/atlas?run={unsafe}&protection=unprotected",
            unsafe,
            ["Failure atlas", "of 23 failures"],
            [["failure mode", "decisive action", "relied on", "hidden mutation"]],
        ),
        ("episode", f"/episode?run={unsafe}&episode={EPISODE}", unsafe, ["Timeline", EPISODE, MUTATION], []),
        (
            "compare",
            f"/compare?a={trusting}&b={pair}",
            pair,
            ["Compare", "harmful action", "run a - run b"],
            [["condition", "difference a - b", "p (sign-flip)", "discordant (a / b higher)"]] * 3,
        ),
        ("not-comparable", f"/compare?a={trusting}&b={unsafe}", unsafe, ["NOT COMPARABLE", "task set differs"], []),
    ]
    assert found  # the search page shows some of them
    keep = os.environ.get("CONTEXTDELTA_SCREENSHOT_DIR")
    with chromium_page(chromium, width=WIDTH) as page:
        for name, path, run_id, expect, key_columns in pages:
            state = page.load(dashboard + path, [run_id, *expect])
            assert not state.exception, f"{name}: Streamlit shows an exception:\n{state.text[:3000]}"
            assert run_id in state.text
            assert "Traceback" not in state.text and "Page not found" not in state.text, name
            visible = [v for v in in_view(page) if v]
            for wanted in key_columns:  # each listed table shows these columns in view (a header's prefix enough)
                table = next((v for v in visible if any(h.startswith(wanted[0]) for h in v)), None)
                assert table is not None, f"{name}: no table with {wanted[0]!r} in view: {visible}"
                visible.remove(table)
                for column in wanted:
                    assert any(h.startswith(column) for h in table), f"{name}: {column!r} off-screen: {table}"
            shot = page.screenshot(shots / f"{name}.png", width=WIDTH)
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
            outside = page.outside_requests()
            assert not outside, f"{name}: requests that leave loopback: {outside}"
            if keep:
                Path(keep).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(shot, Path(keep) / f"dashboard-{name}.png")
        assert len(page.requests) > 20 and all(
            u.startswith(("http://127.0.0.1", "ws://127.0.0.1")) or u.startswith("data:") for u in page.requests
        )


def test_a_request_to_an_outside_host_is_caught(chromium: str, dashboard: str) -> None:
    """The check above can fail: a page that loads an image from an outside host is reported (the host resolver
    maps the name to nothing, so nothing leaves the machine)."""
    with chromium_page(chromium, width=WIDTH) as page:
        page.load(dashboard + "/", ["Runs"])
        assert page.outside_requests() == []
        page.evaluate("document.body.appendChild(Object.assign(new Image(), {src: 'https://example.com/x.png'})), 1")
        page.evaluate("document.querySelector('link[rel*=icon]').href = 'https://fonts.gstatic.com/icon.svg'")
        time.sleep(1.0)
        page.state()  # drains the events received meanwhile
        outside = page.outside_requests()
        assert "https://example.com/x.png" in outside and "https://fonts.gstatic.com/icon.svg" in outside


HOSTILE_DOM = (
    "[...document.querySelectorAll('img, a, iframe, script, object, embed')].filter(e => "
    "/attacker/.test(e.getAttribute('src') || '') || /attacker/.test(e.getAttribute('href') || '') || "
    "/alert\\(1\\)/.test(e.textContent || '')).map(e => e.outerHTML.slice(0, 200))"
)
"""Elements the page made of what the hostile run holds: an image or link to the attacker, a script with its code."""


@pytest.fixture(scope="module")
def hostile_dashboard(chromium: str, tmp_path_factory: pytest.TempPathFactory, unsafe_run: Path) -> Iterator[str]:
    """``contextdelta dashboard`` on a results folder with `make_hostile`'s copy of the unsafe run and a folder
    whose name and manifest are hostile; yields its base URL."""
    from tests.dashboard.conftest import make_hostile

    tmp_path = tmp_path_factory.mktemp("dashboard-browser-hostile")
    results = tmp_path / "results"
    results.mkdir()
    make_hostile(unsafe_run, results)
    broken = results / "zz `![n](https:attacker.example) <img src=x onerror=alert(1)>"
    broken.mkdir()
    (broken / "run_manifest.json").write_text('{"run_group_id": "![m](http://attacker.example/m.png)"}')
    with served_dashboard(results, tmp_path / "store.db") as url:
        yield url


def test_a_hostile_run_loads_nothing_from_outside_and_runs_no_script(
    chromium: str, hostile_dashboard: str, unsafe_run: Path
) -> None:
    from urllib.parse import urlencode

    run = unsafe_run.name
    episode = sorted(runs.records(unsafe_run))[0]
    injected = "`![r](http://attacker.example/r.png)` [l](http://attacker.example/l)"
    pages = [
        ("runs", {"run": run}, ["Runs", "not readable run directories"]),
        ("conditions", {"run": run}, ["Conditions", "was changed after its run"]),
        ("atlas", {"run": run}, ["Failure atlas"]),
        ("episode", {"run": run, "episode": episode}, ["Timeline", "Episode error"]),
        ("episodes", {"run": run, "q": "alert"}, ["Episodes", "contain"]),
        ("episodes", {"run": injected, "q": injected, "outcome": injected}, ["There is no run group"]),
        ("compare", {"a": run, "b": injected}, ["Compare", "There is no readable run group", "needs two"]),
    ]
    with chromium_page(chromium, width=WIDTH) as page:
        for name, query, expect in pages:
            state = page.load(f"{hostile_dashboard}/{name}?{urlencode(query)}", expect)
            assert not state.exception, f"{name}: Streamlit shows an exception:\n{state.text[:3000]}"
            assert "Traceback" not in state.text, name
            assert page.evaluate(HOSTILE_DOM) == [], name
            assert page.outside_requests() == [], name
            assert page.evaluate("window.__hostile_ran === true") is False, name
