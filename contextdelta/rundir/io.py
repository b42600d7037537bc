"""File primitives for run directories: all-or-nothing JSONL appends, torn-line recovery, atomic replace."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from contextdelta.canonical import canonical_json

_UMASK = os.umask(0)
os.umask(_UMASK)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (no run writes it; canonical JSON has no NaN or Infinity)")


def parse_json(data: str | bytes) -> Any:
    """A JSON value of a run directory's file, parsed as strictly as the runner writes it.

    ``json.loads`` accepts ``NaN``, ``Infinity`` and ``-Infinity``, which no run writes and which canonical JSON
    (every digest, every comparison) cannot encode, and it raises RecursionError on nesting deeper than the
    interpreter's stack: an edited file must read as malformed JSON, a ValueError every reader already handles,
    never as a crash.
    """
    try:
        return json.loads(data, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("nested too deeply to be a record a run wrote") from None


def named(exc: OSError, path: Path) -> OSError:
    """``exc`` naming ``path``: a write to an open file that fails (a full disk, ``EFBIG``) raises an OSError without
    a file name, and "No space left on device" alone does not say which file the run could not write."""
    if exc.filename is not None:
        return exc
    return OSError(exc.errno, exc.strerror or str(exc), str(path))


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never a partial one. An OSError
    names ``path`` (not the temp file it wrote first)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp creates 0600; results are meant to be shared like any file
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc
        raise


def atomic_write_json(path: Path, value: Any) -> None:
    """Pretty, key-sorted JSON written atomically."""
    atomic_write_text(path, json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


class JsonlWriter:
    """Appends one JSON document per line, each batch in whole or not at all: the bytes go to the file unbuffered,
    and a write that fails part way (a full disk) is cut back to where the batch began before the error is raised,
    so no later write (nor :meth:`close`) ever completes half a line. A killed process loses at most the line being
    written (:func:`read_jsonl` detects and drops such a torn last line). Data reaches the disk (fsync) when the
    writer closes; an episode lost to a machine crash before that is simply missing, and ``--resume`` runs it again.
    An fsync per episode would block the event loop that runs the episodes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        repair_torn_tail(path)
        self._handle = path.open("ab", buffering=0)
        self.end = os.fstat(self._handle.fileno()).st_size
        """The file's length after the last append: where the next one begins (one writer, the session's)."""

    def append(self, records: list[BaseModel | dict[str, Any]]) -> None:
        lines = []
        for record in records:
            data = record.model_dump(mode="json") if isinstance(record, BaseModel) else record
            lines.append(canonical_json(data) + "\n")
        self._write("".join(lines))

    def append_lines(self, lines: list[str]) -> None:
        """Append JSON documents already rendered (one per item, without the newline)."""
        self._write("".join(line + "\n" for line in lines))

    def truncate(self, end: int) -> None:
        """Cut the file back to ``end`` bytes (an earlier :attr:`end`): appends since then are undone."""
        try:
            os.ftruncate(self._handle.fileno(), end)
        except OSError as exc:
            raise named(exc, self.path) from exc
        self.end = end

    def _write(self, text: str) -> None:
        data = memoryview(text.encode("utf-8"))
        start = self.end
        try:
            written = 0
            while written < len(data):  # a write to a regular file may take fewer bytes than it was given
                written += self._handle.write(data[written:])
        except OSError as exc:
            with contextlib.suppress(OSError):  # the error that stopped the write is the one to report
                self.truncate(start)
            raise named(exc, self.path) from exc
        self.end = start + len(data)

    def close(self) -> None:
        if not self._handle.closed:
            try:
                self._handle.flush()
                os.fsync(self._handle.fileno())
            except OSError as exc:
                with contextlib.suppress(OSError):  # the file is closed all the same; the first error says why
                    self._handle.close()
                raise named(exc, self.path) from exc
            self._handle.close()

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SessionLock:
    """An exclusive, advisory lock on a run directory, held by the one session that writes it (``flock`` on the
    folder itself, so the run directory gains no file). The operating system drops it when the process ends, however
    it ends, so a killed session never leaves a stale lock behind. Where ``fcntl`` is missing (Windows) it locks
    nothing."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd

    @classmethod
    def acquire(cls, folder: Path) -> SessionLock | None:
        """The lock on ``folder``, or None when another process holds it."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not on POSIX
            return cls(None)
        try:
            fd = os.open(folder, os.O_RDONLY)
        except OSError:  # a folder that cannot be opened for reading: nothing to lock with, the run goes on
            return cls(None)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except OSError:  # a file system without flock (some network mounts): the run goes on unlocked
            os.close(fd)
            return cls(None)
        except BaseException:
            os.close(fd)
            raise
        return cls(fd)

    @property
    def held(self) -> bool:
        """Whether this really locks its folder (False where ``flock`` is missing or the folder cannot be opened)."""
        return self._fd is not None

    def release(self) -> None:
        """Let the next session in (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


class JsonlError(ValueError):
    """A JSONL file has a malformed line that is not a torn last line."""


def repair_torn_tail(path: Path) -> bool:
    """Drop an incomplete last line (no trailing newline) left by a killed writer.

    Returns True when something was dropped. Only the last line can be torn, and a torn line never ends in a
    newline: the writer writes each line and its newline in one piece, and canonical JSON escapes every newline
    inside. A bad line that ends in one, the last or any other, is corruption and is left for :func:`read_jsonl`
    to report.
    """
    if not path.exists():
        return False
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return False
    with path.open("r+b") as handle:
        handle.truncate(data.rfind(b"\n") + 1)
    return True


def read_jsonl(path: Path, *, allow_torn_tail: bool = True) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each line. A torn last line (no trailing newline) is skipped when allowed;
    any other malformed line, the last included when it ends in a newline, raises :class:`JsonlError` naming the
    file and line."""
    lines = path.read_bytes().split(b"\n")
    trailing_newline = lines[-1] == b""
    if trailing_newline:
        lines = lines[:-1]
    for number, raw in enumerate(lines, start=1):
        is_last = number == len(lines)
        if is_last and not trailing_newline and allow_torn_tail:
            return  # no newline: the writer died before finishing the line (see repair_torn_tail)
        if not raw.strip():
            raise JsonlError(
                f"{path}: line {number} is empty: no run writes an empty line, so it was added after the run; delete it"
            )
        try:
            value = parse_json(raw)
        except ValueError as exc:
            raise JsonlError(f"{path}: line {number} is not valid JSON ({exc})") from exc
        if not isinstance(value, dict):
            raise JsonlError(f"{path}: line {number} is not a JSON object")
        yield number, value
