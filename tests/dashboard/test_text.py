"""`code` and `plain`: any text, put into a markdown string through them, renders as exactly that text (control
characters and bidirectional overrides as visible escapes) and as nothing else: no image, link, HTML, emphasis."""

from __future__ import annotations

import html
import re

import pytest
from markdown_it import MarkdownIt

from contextdelta.dashboard._text import code, plain, visible

MARKDOWN = MarkdownIt("commonmark")
VALUES = [
    "20261207T034736Z-29fe67",
    "a`b",
    "`starts and ends`",
    "x```y`",
    "![p](http://attacker.example/p.png)",
    "[l](http://attacker.example/l) <http://attacker.example>",
    "<script>alert(1)</script><img src=x onerror=alert(1)>",
    "**bold** _it_ ~~s~~ :red[red] $x^2$ # head",
    "1. list\n- item\n> quote",
    "\x1b]8;;http://a\x07link\x1b[31m \x00 \u202eevil \ud800",
    " ",
    "",
]


def shown(markdown: str) -> str:
    """The text a reader sees of one markdown string (tags dropped, entities decoded, line breaks as newlines)."""
    rendered = MARKDOWN.render(markdown).replace("<br />\n", "\n")
    assert not re.search(r"<(?!/?(p|code)>)", rendered), rendered  # no tag but a paragraph and code
    return html.unescape(re.sub(r"</?(p|code)>", "", rendered)).strip("\n")


@pytest.mark.parametrize("value", VALUES)
def test_code_shows_the_value_verbatim(value: str) -> None:
    assert shown(code(value)).split("\n") == [line or " " for line in visible(value).split("\n")]


@pytest.mark.parametrize("value", VALUES)
def test_plain_shows_the_value_verbatim(value: str) -> None:
    assert shown(plain(value)) == visible(value).strip(" ")


def test_visible_writes_control_characters_and_overrides_as_escapes() -> None:
    assert visible("a\x1b[31m\x00\u202e\ud800\tb\nc") == "a\\x1b[31m\\x00\\u202e\\ud800\tb\nc"
