"""``read_lock``: every malformed line of a ``SUITE.lock`` is a problem on the lock, never an exception."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextdelta.tasks import read_lock

HEADER = "suite_hash: " + "0" * 64 + "\n"


@pytest.mark.parametrize(
    ("record", "why"),
    [
        ('{"a":' * 100_000 + "1" + "}" * 100_000, "not JSON: nested too deeply"),
        ('{"generator_version": NaN}', "not JSON: NaN is not a JSON number"),
        ('{"seed": -Infinity}', "not JSON: -Infinity is not a JSON number"),
        ('{"seed": 1,}', "not JSON: Expecting property name"),
    ],
)
def test_a_generator_record_that_is_not_json_is_a_problem_not_a_crash(tmp_path: Path, record: str, why: str) -> None:
    """A record nested past the interpreter's stack raised RecursionError out of validate-tasks (a traceback), and
    NaN or Infinity, which no generator writes, was taken as the suite's provenance."""
    path = tmp_path / "SUITE.lock"
    path.write_text(f"generator: {record}\n{HEADER}", encoding="utf-8")
    lock = read_lock(path)
    assert lock.generator is None
    (problem,) = [p for p in lock.problems if p.field == "generator"]
    assert problem.field == "generator" and problem.line == 1
    assert why in problem.render()


def test_a_lock_saved_with_a_byte_order_mark_reads_as_without_one(tmp_path: Path) -> None:
    """Task files may start with a UTF-8 byte-order mark (YAML allows it); the lock's first line with one was "not an
    'id@version:sha256' line", whatever it held."""
    line = "order-grinder-refund@1:" + "a" * 64
    path = tmp_path / "SUITE.lock"
    path.write_text(f"\ufeff{line}\n{HEADER}", encoding="utf-8")
    lock = read_lock(path)
    assert [e.text for e in lock.entries.values()] == [line]
    assert not [p for p in lock.problems if "not an 'id@version:sha256' line" in p.message]
