"""examples/agents: the example agent (an MCP client plus an OpenAI-compatible model) measured with run-external
against the scripted test server over real HTTP: the README's three commands, end to end."""

from __future__ import annotations

import csv
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from contextdelta.testing import serve_scripted

pytest.importorskip("mcp")

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "examples" / "agents" / "openai_mcp_agent.py"

pytestmark = pytest.mark.slow


def test_the_example_agent_succeeds_on_the_oracle_and_its_run_verifies(tmp_path: Path) -> None:
    with serve_scripted("oracle", ROOT / "tasks") as url:
        env = dict(os.environ, AGENT_BASE_URL=url, AGENT_MODEL="scripted-oracle", AGENT_API_KEY="unused")
        args = [
            sys.executable, "-m", "contextdelta", "run-external",
            "--agent", "example",
            "--agent-cmd", f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}",
            "--tasks", str(ROOT / "tasks"),
            "--task-ids", "order-grinder-refund,cal-design-review,cfg-search-ramp",
            "--repeats", "1",
            "--results-dir", str(tmp_path),
            "--no-store",
            "--quiet",
        ]  # fmt: skip
        done = subprocess.run(
            args,
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=600,
        )
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.strip().splitlines()[-1])
    with (path / "task_results.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 6 and {r["success"] for r in rows} == {"true"}, rows
    assert {r["strategy"] for r in rows} == {"external:example"}
    verified = subprocess.run(
        [sys.executable, "-m", "contextdelta", "verify", path.name, "--results-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert verified.stdout.strip() == "MATCH", verified.stdout + verified.stderr
