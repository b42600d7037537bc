"""Counted nouns read in the singular for one and the plural otherwise: no user-visible string in the package or
its scripts writes "problem(s)", "strategy(ies)" or "repeat(s)"; `make demo` says "1 repeat"."""

from __future__ import annotations

import io
import os
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

from contextdelta._words import plural

ROOT = Path(__file__).resolve().parents[1]
HEDGED = re.compile(r"[A-Za-z]\((s|es|ies)\)")
"""A noun hedged between singular and plural ("episode(s)"); "http(s)" is a URL scheme, not a count."""


def _hedged_strings(path: Path) -> list[str]:
    found = []
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
    for token in tokens:
        if token.type != tokenize.STRING or token.string.lstrip("rbfRBF").startswith(('"""', "'''")):
            continue  # docstrings and comments are not shown to a user
        text = token.string.replace("http(s)", "http")
        if HEDGED.search(text):
            found.append(f"{path.relative_to(ROOT)}:{token.start[0]}: {token.string}")
    return found


def test_no_string_of_the_package_hedges_a_count() -> None:
    found = [hit for path in sorted((ROOT / "contextdelta").rglob("*.py")) for hit in _hedged_strings(path)]
    assert not found, "use contextdelta._words.plural:\n" + "\n".join(found)


def test_no_script_line_hedges_a_count() -> None:
    found = [
        f"{path.name}:{number}: {line.strip()}"
        for path in sorted((ROOT / "scripts").iterdir())
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if not line.lstrip().startswith("#") and HEDGED.search(line.replace("http(s)", "http"))
    ]
    assert not found, "\n".join(found)


def test_plural() -> None:
    assert [plural(1, "problem"), plural(0, "problem"), plural(2, "strategy", "strategies")] == [
        "1 problem",
        "0 problems",
        "2 strategies",
    ]


STUB = """#!/usr/bin/env bash
case "$1" in
  local-model) echo "ready port=1 base_url=http://127.0.0.1:1/v1 model=stub"; exec sleep 30 ;;
  run-benchmark) echo "$RESULTS/stub-run" ;;
esac
"""


@pytest.mark.parametrize(("repeats", "words"), [("1", "x 1 repeat,"), ("5", "x 5 repeats,")])
def test_the_demo_counts_its_repeats(tmp_path: Path, repeats: str, words: str) -> None:
    """scripts/demo.sh printed "x 1 repeat(s)": it now says "1 repeat" and "5 repeats" (a stub stands in for the
    contextdelta command)."""
    stub = tmp_path / "bin" / "contextdelta"
    stub.parent.mkdir()
    stub.write_text(STUB)
    stub.chmod(0o755)
    env = {
        **os.environ,
        "BIN": str(stub.parent),
        "RESULTS": str(tmp_path),
        "DEMO_REPEATS": repeats,
        "DEMO_RESULTS_DIR": str(tmp_path),
        "TMPDIR": str(tmp_path),
    }
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "demo.sh")], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("== run-benchmark:")]
    assert words in line and "(s)" not in line, line
