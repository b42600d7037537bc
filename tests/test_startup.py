"""A wrong endpoint is reported before the heavy parts of the package load (statistics, the trace store): what keeps
the time to the first error short (benchmarks/startup_time.py). The task folder, which needs no network, is checked
before it (tests/runner/test_preflight.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import json, sys
from contextdelta.cli import app
try:
    app(sys.argv[1:], standalone_mode=False)
except SystemExit:
    pass
except Exception as exc:
    print(type(exc).__name__, file=sys.stderr)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {"scipy", "numpy", "sqlalchemy", "streamlit"}
                  or m in {"contextdelta.report", "contextdelta.stats", "contextdelta.store"})))
"""


@pytest.mark.slow
def test_a_wrong_endpoint_is_refused_before_heavy_imports(tmp_path: Path) -> None:
    args = ["run-benchmark", "--tasks", str(ROOT / "tasks"), "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    args += ["--results-dir", str(tmp_path / "results")]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert "cannot reach http://127.0.0.1:9/v1" in done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
    assert list(tmp_path.iterdir()) == []
