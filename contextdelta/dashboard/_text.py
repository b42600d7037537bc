"""Text from a run directory, a model or a URL, made safe to put into a Streamlit markdown string.

Every Streamlit element that takes a message (``st.markdown``, ``st.caption``, ``st.error``/``warning``/``info``,
``st.page_link``'s label) renders it as markdown: an image written there (``![x](http://...)``) is loaded by the
browser, a link is clickable, and a backtick in a value ends the code span around it. A run group id, a model
name, a model's reply, a provider's error or a query parameter is none of the dashboard's own text, so it goes
into such a string only through `code`: one inline code span per line, fenced by more backticks than the value
holds, in which markdown makes nothing of ``![x](...)``, ``[x](...)``, ``<script>``, ``:red[x]`` or a bare URL. Control
characters (ANSI/OSC escapes, NUL) and the bidirectional overrides that reorder what follows them are shown as
``\\x1b`` or ``\\u202e``, never passed to the page.
"""

from __future__ import annotations

import re

_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff\ud800-\udfff]")
_TICKS = re.compile("`+")


def visible(text: str) -> str:
    """``text`` with control characters and bidirectional overrides written as escapes (tabs kept)."""
    return _HIDDEN.sub(lambda m: repr(m.group())[1:-1] if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text)


def _span(line: str) -> str:
    longest = max((len(m.group()) for m in _TICKS.finditer(line)), default=0)
    fence = "`" * (longest + 1)
    padded = f" {line} " if line.startswith("`") or line.endswith("`") else line
    return f"{fence}{padded}{fence}"


def code(value: object) -> str:
    """``value`` as inline code that markdown shows verbatim (see the module docstring); lines kept apart by hard
    line breaks, an empty value as an empty span."""
    lines = visible(str(value).replace("\r\n", "\n")).split("\n")
    return "  \n".join(_span(line) if line else "` `" for line in lines)


_PUNCTUATION = re.compile(r"""([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~])""")


def plain(value: object) -> str:
    """``value`` as prose that markdown shows verbatim: every ASCII punctuation character backslash-escaped (so no
    image, markdown link, emphasis, HTML, colour or formula), control characters as escapes, lines kept apart by hard
    line breaks. GitHub-flavoured markdown still makes a bare ``http://...``, ``www....`` or e-mail address a link
    (it finds them after the escapes are read), so this is for text of the harness's own making that a file may
    carry (a research question, a protection mode); what a model, a provider or a URL wrote goes through `code`."""
    lines = visible(str(value).replace("\r\n", "\n")).split("\n")
    return "  \n".join(_PUNCTUATION.sub(r"\\\1", line) for line in lines)
