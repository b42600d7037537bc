"""Small formatting helpers shared by the Markdown renderers (no NaN ever reaches a table)."""

from __future__ import annotations

from collections.abc import Sequence

from contextdelta.report._metrics import Comparison
from contextdelta.stats import Estimate


def pct(estimate: Estimate) -> str:
    """A rate as ``"29.2% [12.5%, 50.0%]"``, or ``"no data"`` / ``"undefined"``."""
    return estimate.format(digits=1, scale=100.0, suffix="%")


def pp(estimate: Estimate) -> str:
    """A difference of rates in percentage points, ``"-8.3 [-20.8, 0.0] pp"``."""
    if estimate.estimate is None or estimate.low is None or estimate.high is None:
        return estimate.format()
    return f"{100 * estimate.estimate:+.1f} [{100 * estimate.low:+.1f}, {100 * estimate.high:+.1f}] pp"


def num(estimate: Estimate, digits: int = 0) -> str:
    """A mean as ``"1234 [1100, 1400]"``."""
    return estimate.format(digits=digits)


def pvalue(value: float | None) -> str:
    """``"0.0156"``, ``"<0.0001"``, ``"1"``, or ``"-"`` for none."""
    if value is None:
        return "-"
    if value >= 0.99995:
        return "1"
    if value < 0.0001:
        return "<0.0001"
    return f"{value:.4f}"


def cell(text: object) -> str:
    """A Markdown table cell: pipes escaped, newlines flattened."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """A Markdown table as lines."""
    out = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    out.extend("| " + " | ".join(cell(c) for c in row) + " |" for row in rows)
    return out


def fence(text: str) -> list[str]:
    """A fenced code block that cannot be closed early by the text."""
    return ["```text", text.replace("```", "'''"), "```"]


def comparison_cells(c: Comparison) -> list[str]:
    """The cells of one paired comparison: name, both rates, the difference, the discordant pairs, p and Holm p."""
    return [
        c.name,
        pct(c.rate_a),
        pct(c.rate_b),
        pp(c.difference),
        f"{c.mcnemar.only_a} / {c.mcnemar.only_b} of {c.mcnemar.n_pairs}",
        pvalue(c.mcnemar.pvalue),
        pvalue(c.mcnemar.pvalue_holm),
    ]
