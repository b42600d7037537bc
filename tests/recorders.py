"""A recorder that presses Ctrl-C at a chosen moment of a run, shared by the runner's and the MCP tests."""

from __future__ import annotations

import signal
from typing import Literal


class CtrlC:
    """A recorder that receives SIGINT when the run is opened (``at="start"``) or as each episode is recorded
    (``at="episode"``: the run stops early after the first, or, for ``serve-world``, while its one episode is
    written)."""

    def __init__(self, at: Literal["start", "episode"] = "episode") -> None:
        self.at = at

    def start(self, run: object) -> None:
        if self.at == "start":
            signal.raise_signal(signal.SIGINT)

    def episode(self, record: object) -> None:
        if self.at == "episode":
            signal.raise_signal(signal.SIGINT)

    def finish(self, run: object) -> None:
        pass
