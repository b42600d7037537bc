"""Run-directory file primitives: JSONL append, torn-line recovery, atomic writes, run id validation."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from contextdelta.rundir.ids import RunIdError, run_dir, validate_run_id
from contextdelta.rundir.io import (
    JsonlError,
    JsonlWriter,
    SessionLock,
    atomic_write_json,
    read_jsonl,
    repair_torn_tail,
)


def test_jsonl_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "raw.jsonl"
    with JsonlWriter(path) as writer:
        writer.append([{"b": 1, "a": 2}])
        writer.append([{"n": 2}, {"n": 3}])
    assert path.read_text() == '{"a":2,"b":1}\n{"n":2}\n{"n":3}\n'
    assert [n for n, _ in read_jsonl(path)] == [1, 2, 3]


@pytest.mark.parametrize("tail", [b'{"n": 3', b'{"n": 3}', b"\x00\x00\x00"])
def test_torn_last_line_is_dropped_on_read_and_repaired_on_reopen(tmp_path: Path, tail: bytes) -> None:
    path = tmp_path / "raw.jsonl"
    path.write_bytes(b'{"n": 1}\n{"n": 2}\n' + tail)
    assert [v["n"] for _, v in read_jsonl(path)] == [1, 2]
    assert repair_torn_tail(path) is True
    assert path.read_bytes() == b'{"n": 1}\n{"n": 2}\n'
    with JsonlWriter(path) as writer:
        writer.append([{"n": 3}])
    assert [v["n"] for _, v in read_jsonl(path)] == [1, 2, 3]


@pytest.mark.parametrize("tail", [b'{"n": 3\n', b"\xff\xfe\x00garbage\n"])
def test_a_bad_last_line_that_ends_in_a_newline_is_corruption_not_a_tear(tmp_path: Path, tail: bytes) -> None:
    """A killed writer never leaves a newline after a partial line (a line and its newline are one write), yet such
    a line was dropped as torn: `replay` of a raw_runs.jsonl replaced by one garbage line showed 0 episodes, exit 0."""
    path = tmp_path / "raw.jsonl"
    path.write_bytes(b'{"n": 1}\n{"n": 2}\n' + tail)
    with pytest.raises(JsonlError, match=r"raw.jsonl: line 3 is not valid JSON"):
        list(read_jsonl(path))
    assert repair_torn_tail(path) is False
    assert path.read_bytes().endswith(tail)


def test_intact_file_is_not_repaired(tmp_path: Path) -> None:
    path = tmp_path / "raw.jsonl"
    path.write_bytes(b'{"n": 1}\n')
    assert repair_torn_tail(path) is False
    assert path.read_bytes() == b'{"n": 1}\n'


def test_corruption_in_the_middle_is_an_error_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "raw.jsonl"
    path.write_bytes(b'{"n": 1}\nnot json\n{"n": 3}\n')
    with pytest.raises(JsonlError, match="line 2"):
        list(read_jsonl(path))


def test_atomic_write_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "aggregate_metrics.json"
    atomic_write_json(target, {"b": 1, "a": [1, 2]})
    atomic_write_json(target, {"c": 3})
    assert target.read_text() == '{\n  "c": 3\n}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["aggregate_metrics.json"]


@pytest.mark.parametrize("bad", ["../etc", "a/b", "..", "", "/abs", "run id", "x\\y", ".hidden"])
def test_run_ids_cannot_escape_the_results_dir(bad: str) -> None:
    with pytest.raises(RunIdError):
        validate_run_id(bad)


def test_run_dir_names_the_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(RunIdError, match="no run directory"):
        run_dir(tmp_path, "20261130T000000Z-abcdef")


def test_a_session_lock_excludes_a_second_holder_until_released(tmp_path: Path) -> None:
    first = SessionLock.acquire(tmp_path)
    assert first is not None
    assert SessionLock.acquire(tmp_path) is None  # another open of the folder: another session
    first.release()
    first.release()  # idempotent
    again = SessionLock.acquire(tmp_path)
    assert again is not None
    again.release()
    assert list(tmp_path.iterdir()) == []  # the lock is on the folder itself: no file for the seal to see


def test_a_file_system_without_flock_runs_unlocked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import fcntl

    def refuse(fd: int, operation: int) -> None:
        raise OSError(37, "No locks available")

    monkeypatch.setattr(fcntl, "flock", refuse)
    lock = SessionLock.acquire(tmp_path)
    assert lock is not None
    lock.release()


class _FullDisk:
    """A file handle on a full disk: every write fails as the operating system fails it (ENOSPC, no file name)."""

    closed = False

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def fileno(self) -> int:
        return -1

    def close(self) -> None:
        self.closed = True


def test_a_full_disk_is_named_with_the_file_the_run_could_not_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "raw_runs.jsonl"
    writer = JsonlWriter(path)
    writer._handle.close()
    writer._handle = _FullDisk()  # type: ignore[assignment]
    writes: list[Callable[[], None]] = [
        lambda: writer.append([{"n": 1}]),
        lambda: writer.append_lines(['{"n":1}']),
        writer.close,
    ]
    for write in writes:
        with pytest.raises(OSError) as caught:
            write()
        assert (caught.value.errno, caught.value.filename) == (errno.ENOSPC, str(path))
        assert f"No space left on device: '{path}'" in str(caught.value)

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)  # the data reached the disk's cache, not the disk
    target = tmp_path / "run_manifest.json"
    with pytest.raises(OSError) as caught:
        atomic_write_json(target, {"a": 1})
    assert (caught.value.errno, caught.value.filename) == (errno.ENOSPC, str(target))  # not the temp file's name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw_runs.jsonl"]  # the temp file is gone


class _FillsHalfWay:
    """A real file handle on a disk that fills mid-write: the first write takes half its bytes, every later one
    fails with ENOSPC (as the operating system does), until ``room`` is set again."""

    def __init__(self, handle: object) -> None:
        self.handle = handle
        self.writes = 0
        self.room = False

    def write(self, data: bytes) -> int:
        self.writes += 1
        if self.room:
            return self.handle.write(data)  # type: ignore[attr-defined,no-any-return]
        if self.writes == 1:
            return self.handle.write(bytes(data[: len(data) // 2]))  # type: ignore[attr-defined,no-any-return]
        raise OSError(errno.ENOSPC, "No space left on device")

    def __getattr__(self, name: str) -> object:
        return getattr(self.handle, name)


def test_an_append_cut_short_by_a_full_disk_leaves_nothing_of_itself_and_close_completes_nothing(
    tmp_path: Path,
) -> None:
    """A full disk mid-line: the append raises (naming the file), the file is cut back to where the append began,
    and neither closing the writer nor a later append once there is room writes the rest of the failed line."""
    path = tmp_path / "raw_runs.jsonl"
    writer = JsonlWriter(path)
    writer.append([{"n": 1}])
    disk = _FillsHalfWay(writer._handle)
    writer._handle = disk  # type: ignore[assignment]
    with pytest.raises(OSError) as caught:
        writer.append_lines(['{"n":2,"padding":"' + "x" * 1000 + '"}'])
    assert (caught.value.errno, caught.value.filename) == (errno.ENOSPC, str(path))
    assert path.read_bytes() == b'{"n":1}\n'
    disk.room = True
    writer.append([{"n": 3}])
    writer.close()
    assert path.read_bytes() == b'{"n":1}\n{"n":3}\n'


@pytest.mark.parametrize(("data", "line"), [(b'{"n": 1}\n\n', 2), (b'{"n": 1}\n \t\n{"n": 3}\n', 2)])
def test_an_empty_line_is_named_as_such_with_the_remedy(tmp_path: Path, data: bytes, line: int) -> None:
    """A blank line (an editor's trailing newline, say) read as "Expecting value: line 1 column 1 (char 0)"."""
    path = tmp_path / "raw_runs.jsonl"
    path.write_bytes(data)
    with pytest.raises(JsonlError) as caught:
        list(read_jsonl(path))
    assert str(caught.value) == (
        f"{path}: line {line} is empty: no run writes an empty line, so it was added after the run; delete it"
    )
