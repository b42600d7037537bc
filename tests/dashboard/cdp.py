"""A minimal headless-Chromium driver over the Chrome DevTools Protocol, for the dashboard's browser test.

Streamlit renders in JavaScript over a websocket, so ``chromium --screenshot`` fires before the page exists;
this driver loads a page, polls the rendered text until what the test expects is there and has stopped changing,
then takes the screenshot. It speaks CDP with ``websockets`` (a Streamlit dependency), nothing else.

Every network request the page makes is recorded from the DevTools ``Network`` events (``requestWillBeSent``,
``webSocketCreated``), and `Page.resource_urls` lists every URL the document refers to (scripts, style sheets,
icons, images, frames), so a test can fail on anything that leaves loopback, the favicon included (headless
Chromium may not fetch it, but its ``<link rel="icon">`` names the host).

Chromium runs with ``--headless --no-sandbox --disable-gpu --disable-background-networking
--disable-component-update --no-first-run`` and a fresh ``--user-data-dir``: no background traffic, no
downloads. Its host resolver maps every name but loopback to nothing, so a request to an outside host fails
here (and is still recorded) instead of leaving the machine.
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
)

EXCEPTION_SELECTOR = '[data-testid="stException"]'
"""Streamlit's exception box (a traceback shown in the page)."""


def find_chromium() -> str | None:
    """The path of an installed Chromium, or None."""
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


class BrowserError(RuntimeError):
    """Chromium did not start, or a page did not render what was expected in time."""


@dataclass(frozen=True)
class PageState:
    """What a loaded page shows: its visible text and whether a Streamlit exception box is present."""

    text: str
    exception: bool


RESOURCE_URLS = "Array.from(document.querySelectorAll('[src], link[href]'), e => e.src || e.href).filter(Boolean)"
"""Every URL the document loads from: ``src`` of scripts, images, frames and media, ``href`` of ``<link>``s."""
LOCAL_SCHEMES = ("data:", "blob:", "about:")


def is_loopback(url: str) -> bool:
    """A URL that stays on this machine: loopback http(s)/ws(s), or a data/blob/about URL."""
    if url.startswith(LOCAL_SCHEMES):
        return True
    host = urllib.parse.urlsplit(url).hostname or ""
    return host in ("127.0.0.1", "localhost", "::1")


class Page:
    """One browser tab, driven over its DevTools websocket; every network request it makes is recorded."""

    def __init__(self, socket: ClientConnection) -> None:
        self._socket = socket
        self._ids = itertools.count(1)
        self.requests: list[str] = []
        """Every URL the page requested (``Network.requestWillBeSent``, ``Network.webSocketCreated``), in order."""

    def _event(self, message: dict[str, Any]) -> None:
        params = message.get("params", {})
        if message.get("method") == "Network.requestWillBeSent":
            self.requests.append(str(params.get("request", {}).get("url", "")))
        elif message.get("method") == "Network.webSocketCreated":
            self.requests.append(str(params.get("url", "")))

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command and return its result (events received meanwhile are recorded)."""
        number = next(self._ids)
        self._socket.send(json.dumps({"id": number, "method": method, "params": params}))
        while True:
            message = json.loads(self._socket.recv(timeout=60))
            if message.get("id") == number:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            self._event(message)

    def resource_urls(self) -> list[str]:
        """Every URL the current document refers to for a resource (see `RESOURCE_URLS`)."""
        return [str(u) for u in self.evaluate(RESOURCE_URLS) or []]

    def outside_requests(self) -> list[str]:
        """The recorded requests and the document's resource URLs that leave loopback (empty: none)."""
        return [u for u in dict.fromkeys([*self.requests, *self.resource_urls()]) if not is_loopback(u)]

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    def state(self) -> PageState:
        text = self.evaluate("document.body ? document.body.innerText : ''") or ""
        exception = bool(self.evaluate(f"!!document.querySelector('{EXCEPTION_SELECTOR}')"))
        return PageState(text=str(text), exception=exception)

    def time_to_render(self, url: str, expect: list[str], *, timeout_s: float = 60.0, poll_s: float = 0.05) -> float:
        """Navigate to ``url`` and return the seconds until its text first holds every string in ``expect``;
        raises BrowserError on timeout or when Streamlit shows an exception."""
        started = time.perf_counter()
        self.call("Page.navigate", url=url)
        while time.perf_counter() - started < timeout_s:
            current = self.state()
            if current.exception:
                raise BrowserError(f"{url}: Streamlit shows an exception:\n{current.text[:2000]}")
            if all(e in current.text for e in expect):
                return time.perf_counter() - started
            time.sleep(poll_s)
        raise BrowserError(
            f"{url}: {expect} did not render within {timeout_s}s; the page shows:\n{current.text[:2000]}"
        )

    def load(self, url: str, expect: list[str], *, timeout_s: float = 60.0, settle_s: float = 1.0) -> PageState:
        """Navigate to ``url`` and wait until the text holds every string in ``expect`` (or an exception box
        shows) and stays the same for ``settle_s``; raises BrowserError on timeout."""
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout_s
        last: PageState | None = None
        stable_since = time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.25)
            current = self.state()
            ready = current.exception or all(e in current.text for e in expect)
            if last is None or current != last:
                last, stable_since = current, time.monotonic()
            elif ready and time.monotonic() - stable_since >= settle_s:
                return current
        shown = (last.text if last else "")[:2000]
        raise BrowserError(f"{url}: {expect} did not render within {timeout_s}s; the page shows:\n{shown}")

    def screenshot(self, path: Path, *, width: int = 1400, max_height: int = 4000) -> Path:
        """Save a PNG of the whole page: the viewport is grown to the content's height (Streamlit scrolls inside
        its main container, so a plain full-page capture would stop at the window)."""
        height = self.evaluate(
            "Math.max(document.body.scrollHeight, ...Array.from(document.querySelectorAll("
            '\'[data-testid="stMain"], [data-testid="stAppViewContainer"], section.main\'), e => e.scrollHeight))'
        )
        height = max(800, min(int(height or 800) + 40, max_height))
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        time.sleep(1.0)  # let the layout follow the new viewport
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=1000, deviceScaleFactor=1, mobile=False)
        return path


@contextmanager
def chromium_page(executable: str, *, width: int = 1400, height: int = 1000) -> Iterator[Page]:
    """Start a headless Chromium with a fresh profile and yield its first tab; everything is removed after."""
    profile = Path(tempfile.mkdtemp(prefix="contextdelta-chromium-"))
    process = subprocess.Popen(
        [executable, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            if process.poll() is not None or time.monotonic() > deadline:
                error = process.stderr.read().decode(errors="replace")[-2000:] if process.stderr else ""
                raise BrowserError(f"chromium did not start (exit {process.poll()}): {error}")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as response:
            targets = json.loads(response.read())
        page = next(t for t in targets if t.get("type") == "page")
        with connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=10) as socket:
            tab = Page(socket)
            tab.call("Page.enable")
            tab.call("Network.enable")
            tab.call(
                "Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False
            )
            yield tab
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr:
            process.stderr.close()
        shutil.rmtree(profile, ignore_errors=True)
