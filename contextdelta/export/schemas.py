"""``python -m contextdelta.export.schemas [--check] [ROOT]`` (``make schemas``): regenerate the JSON Schemas in
``docs/schemas/`` and the reference part of ``docs/run-directory.md`` from the record models, or with ``--check``
only list what is stale (exit 1)."""

from __future__ import annotations

import sys
from pathlib import Path

from contextdelta.export._schemas import REGENERATE, stale_files, write_generated


def main(argv: list[str]) -> int:
    check = "--check" in argv
    rest = [a for a in argv if a != "--check"]
    root = Path(rest[0]) if rest else Path.cwd()
    if check:
        stale = stale_files(root)
        for name in stale:
            print(f"stale: {name} (run `{REGENERATE}`)", file=sys.stderr)
        return 1 if stale else 0
    for name in write_generated(root):
        print(f"updated {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
