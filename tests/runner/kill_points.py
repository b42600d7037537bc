"""The command line with one deterministic kill point (``python -m tests.runner.kill_points ARGS``): the process
SIGKILLs itself at the moment ``CONTEXTDELTA_TEST_KILL_POINT`` names, so that a test can cut a run exactly there
(no handler runs, as with a power cut or the OOM killer) and check what ``--resume`` makes of it.

Kill points (each fires once, the first time its moment comes, in the process that armed it; run with
``CONTEXTDELTA_WORKERS=1`` so that episodes are recorded in this process):

- ``creating``: the new run directory is written, manifest included, in its hidden folder, not yet in place
- ``opened``: the run is open (its ``running`` manifest written), before any recorder started
- ``torn-record``: half of the second record of ``raw_runs.jsonl`` is written and flushed
- ``before-receipt``: the second record is appended, its receipt is not
- ``store-commit``: the trace store's second write transaction has written its rows and is about to commit
- ``report``: the finalisation is about to put ``benchmark_report.md`` in place
- ``seal``: the final manifest's seal is computed, the manifest not yet written
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any

POINT = "CONTEXTDELTA_TEST_KILL_POINT"
POINTS = ("creating", "opened", "torn-record", "before-receipt", "store-commit", "report", "seal")


def _die() -> None:
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _nth(n: int) -> Callable[[], bool]:
    """True on the ``n``-th call only."""
    calls = [0]

    def hit() -> bool:
        calls[0] += 1
        return calls[0] == n

    return hit


def arm(point: str) -> None:
    """Patch the moment ``point`` names to SIGKILL this process (see the module docstring)."""
    from contextdelta.rundir import io, layout, receipts, recorder

    if point == "creating":
        real_replace = os.replace

        def replace(source: Any, target: Any, *args: Any, **kwargs: Any) -> None:
            if str(source).endswith(".creating"):
                _die()
            real_replace(source, target, *args, **kwargs)

        os.replace = replace  # type: ignore[assignment]
    elif point == "opened":
        real_start = recorder.Recorders.start

        def start(self: Any, run: Any) -> None:
            _die()
            real_start(self, run)

        recorder.Recorders.start = start  # type: ignore[method-assign]
    elif point in ("torn-record", "before-receipt"):
        real_append = io.JsonlWriter.append_lines
        second = _nth(2)

        def append_lines(self: Any, lines: list[str]) -> None:
            if self.path.name == "raw_runs.jsonl" and second():
                text = "".join(line + "\n" for line in lines)
                if point == "torn-record":
                    data = text.encode("utf-8")  # the writer's handle takes bytes, unbuffered
                    self._handle.write(data[: len(data) // 2])
                    self._handle.flush()
                    _die()
                real_append(self, lines)
                _die()
            real_append(self, lines)

        io.JsonlWriter.append_lines = append_lines  # type: ignore[method-assign]
    elif point == "store-commit":
        from contextdelta.store._store import Store

        real_write = Store._write
        second = _nth(2)

        def write(self: Any, work: Callable[[Any], Any]) -> Any:
            if not second():
                return real_write(self, work)

            def then_die(session: Any) -> Any:
                work(session)
                session.flush()  # the rows are written inside the transaction, which never commits
                _die()

            return real_write(self, then_die)

        Store._write = write  # type: ignore[method-assign]
    elif point == "report":
        real_replace = os.replace

        def replace_report(source: Any, target: Any, *args: Any, **kwargs: Any) -> None:
            if str(target).endswith("benchmark_report.md"):
                _die()
            real_replace(source, target, *args, **kwargs)

        os.replace = replace_report  # type: ignore[assignment]
    elif point == "seal":
        real_seal = receipts.seal_directory

        def seal_directory(root: Any, manifest: Any, *args: Any, **kwargs: Any) -> Any:
            sealed = real_seal(root, manifest, *args, **kwargs)
            if manifest.get("status") != "running":
                _die()
            return sealed

        layout.seal_directory = seal_directory  # type: ignore[attr-defined]  # the name write_manifest calls
    else:
        raise SystemExit(f"{POINT}={point!r}: not one of {', '.join(POINTS)}")


if __name__ == "__main__":
    arm(os.environ[POINT])
    from contextdelta.cli import main

    sys.argv = ["contextdelta", *sys.argv[1:]]
    main()
