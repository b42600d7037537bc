"""Words for counts, shared by every package that writes a sentence (light: the CLI imports it before any run)."""

from __future__ import annotations


def plural(count: int, word: str, many: str | None = None) -> str:
    """``"1 task"``, ``"3 tasks"``; ``many`` for a plural other than word + s (``plural(2, "story", "stories")``)."""
    return f"{count} {word}" if count == 1 else f"{count} {many or word + 's'}"
