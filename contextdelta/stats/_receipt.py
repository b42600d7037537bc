"""The analysis receipt: a hash of the statistics source, recorded in the manifest as ``analysis_sha256``."""

from __future__ import annotations

import hashlib
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def analysis_sha256() -> str:
    """SHA-256 (hex) of the statistics package's own ``.py`` files.

    Recipe, so that anyone can recompute it: for every ``*.py`` file under ``contextdelta/stats/``, in sorted
    order of its POSIX path relative to that folder, feed ``path``, a NUL byte, the file's raw bytes and a
    NUL byte into one SHA-256.
    """
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE_DIR.rglob("*.py"), key=lambda p: p.relative_to(_PACKAGE_DIR).as_posix()):
        digest.update(path.relative_to(_PACKAGE_DIR).as_posix().encode("utf-8") + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()
