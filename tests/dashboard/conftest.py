"""Run directories for the dashboard tests: real runs from the scripted HTTP server (`tests.report.runs`), copied
into a results folder of the dashboard's own, plus broken and unfinished variants built from those copies."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from contextdelta.rundir import RunDirectory, RunStatus
from contextdelta.rundir.layout import AGGREGATE_METRICS, MANIFEST, RAW_RUNS, RAW_RUNS_RECEIPTS
from tests.report import runs


@pytest.fixture(scope="session")
def trusting_run() -> Path:
    """context_trusting, 3 tasks, every condition, 2 repeats: never_refreshed failures after hidden mutations."""
    return runs.trusting_run()


@pytest.fixture(scope="session")
def unsafe_run() -> Path:
    """unsafe, 3 tasks, every condition: removed context, duplicates, forbidden calls."""
    return runs.unsafe_run()


@pytest.fixture(scope="session")
def results(tmp_path_factory: pytest.TempPathFactory, trusting_run: Path, unsafe_run: Path) -> Path:
    """A results folder holding the two runs (read-only for the tests)."""
    folder = tmp_path_factory.mktemp("dashboard-results")
    runs.copy_run(trusting_run, folder)
    runs.copy_run(unsafe_run, folder)
    return folder


@pytest.fixture(scope="session")
def compare_results(tmp_path_factory: pytest.TempPathFactory, trusting_run: Path, unsafe_run: Path) -> Path:
    """trusting_run, the oracle run on the same tasks (comparable with it) and unsafe_run (other tasks)."""
    folder = tmp_path_factory.mktemp("dashboard-compare")
    for path in (trusting_run, runs.oracle_pair_run(), unsafe_run):
        runs.copy_run(path, folder)
    return folder


def make_running(source: Path, into: Path, keep: int) -> Path:
    """A copy of ``source`` as a run still in progress: status running, ``keep`` episodes, a torn last line, and
    no report files yet."""
    target = runs.copy_run(source, into)
    directory = RunDirectory(target)  # sealed as the runner writes a running manifest, not edited after it
    manifest = directory.read_manifest()
    counts = manifest.counts.model_copy(update={"finished": 0, "succeeded": 0, "failed": 0})
    receipts = target / RAW_RUNS_RECEIPTS  # sealed when the session opened (no receipt yet), then one per record
    kept = b"".join(receipts.read_bytes().splitlines(keepends=True)[:keep])
    receipts.write_bytes(b"")
    directory.write_manifest(
        manifest.model_copy(update={"status": RunStatus.RUNNING, "finished_at": None, "counts": counts})
    )
    receipts.write_bytes(kept)
    lines = (target / RAW_RUNS).read_text().splitlines(keepends=True)
    (target / RAW_RUNS).write_text("".join(lines[:keep]) + lines[keep][: len(lines[keep]) // 2])
    (target / AGGREGATE_METRICS).unlink()
    return target


def make_malformed(source: Path, into: Path, name: str) -> Path:
    """A copy of ``source`` under ``name`` whose ``raw_runs.jsonl`` line 2 is not an episode."""
    target = into / name
    shutil.copytree(source, target)
    manifest = json.loads((target / MANIFEST).read_text())
    manifest["run_group_id"] = name
    (target / MANIFEST).write_text(json.dumps(manifest))
    lines = (target / RAW_RUNS).read_text().splitlines(keepends=True)
    lines[1] = json.dumps({"run_id": "broken", "steps": "not a list"}) + "\n"
    (target / RAW_RUNS).write_text("".join(lines))
    return target


HOSTILE = (
    "x`</code><script>alert(1)</script>![p](http://attacker.example/p.png) [l](http://attacker.example/l) "
    ":red[red] $x^2$ **bold** \x1b]8;;http://attacker.example\x07link\x1b]8;;\x07 \x1b[31mred\x1b[0m \x00 "
    "\ud800 \u202eevil`"
)
"""Text a model, a provider or an edited file could write: HTML and a script, a markdown image and link, Streamlit's
colour and formula syntax, ANSI/OSC escapes, a NUL, a lone surrogate (which UTF-8 cannot encode) and a right-to-left
override, with backticks around it all."""


def make_hostile(source: Path, into: Path) -> Path:
    """A copy of ``source`` whose every final answer, episode error, step note, step error and tool-call argument,
    and whose model name (less its lone surrogate), are `HOSTILE` (the seal then names the change, as it would for
    an edited run)."""
    target = runs.copy_run(source, into)
    records = []
    for line in (target / RAW_RUNS).read_text().splitlines():
        record = json.loads(line)
        trace = record["trace"]
        trace["final_answer"] = HOSTILE
        trace["error"] = HOSTILE
        for step in trace["steps"]:
            step["note"] = HOSTILE
            step["error"] = HOSTILE
            for message in step["appended"]:
                for call in message.get("tool_calls") or []:
                    call["function"]["arguments"] = json.dumps({"order_id": HOSTILE})
        records.append(json.dumps(record) + "\n")
    (target / RAW_RUNS).write_text("".join(records))
    manifest = json.loads((target / MANIFEST).read_text())
    manifest["provider"]["model"] = HOSTILE.replace("\ud800", "")  # the manifest's reader refuses a lone surrogate
    (target / MANIFEST).write_text(json.dumps(manifest))
    return target
