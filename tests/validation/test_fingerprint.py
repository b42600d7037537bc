"""``suite_fingerprint``: the run-benchmark preflight's cache key reads no more of a file than the loader would."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

from contextdelta.tasks import MAX_FILE_BYTES
from contextdelta.validation import suite_fingerprint
from tests.tasks.helpers import task_data, write_task

BIG = 64 << 20
"""A stray file far over the loader's limit (sparse: no disk is used)."""


def _folder_with_a_big_file(root: Path, size: int) -> Path:
    write_task(root, task_data())
    big = root / "order" / "dump.yaml"
    with big.open("wb") as handle:
        os.truncate(handle.fileno(), size)
    return big


def test_a_file_over_the_limit_is_not_read_into_memory(tmp_path: Path) -> None:
    """The whole file was read (`read_bytes`) before the loader refused it by size: an 800 MB stray file cost
    run-benchmark 10 s and 880 MB of memory, a larger one all of it."""
    _folder_with_a_big_file(tmp_path, BIG)
    tracemalloc.start()
    try:
        suite_fingerprint(tmp_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * MAX_FILE_BYTES, peak


def test_the_fingerprint_still_follows_every_change(tmp_path: Path) -> None:
    big = _folder_with_a_big_file(tmp_path, BIG)
    before = suite_fingerprint(tmp_path)
    os.truncate(big, BIG + 1)
    grown = suite_fingerprint(tmp_path)
    os.truncate(big, MAX_FILE_BYTES)  # within the limit: read, so its bytes count
    within = suite_fingerprint(tmp_path)
    with big.open("r+b") as handle:
        handle.write(b"x")
    edited = suite_fingerprint(tmp_path)
    assert len({before, grown, within, edited}) == 4
