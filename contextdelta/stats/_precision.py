"""Printed precision: how many decimals an interval end deserves, given the Monte-Carlo error of the bootstrap that
made it, and the one rounding rule every printed rate, percentage and difference follows (`fixed`)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from decimal import ROUND_HALF_UP, Decimal, localcontext

_HALF_EVEN: ContextVar[bool] = ContextVar("contextdelta_half_even", default=False)


def printed_decimals(mc_se: float | None, scale: float = 100.0, max_decimals: int = 1) -> int:
    """Decimals (on ``scale``, e.g. 100 for percent) at which a value with Monte-Carlo standard error ``mc_se``
    is printed: the finest power-of-ten unit that is still at least the standard error, so the last printed digit
    is not resampling noise (0.69 pp -> whole percent, 0.05 pp -> one decimal). ``None`` or 0 (no resampling
    error) gives ``max_decimals``."""
    if mc_se is None or mc_se <= 0.0:
        return max_decimals
    return max(0, min(max_decimals, math.floor(-math.log10(mc_se * scale))))


def fixed(value: float, decimals: int, *, scale: float = 1.0, signed: bool = False) -> str:
    """``value`` times ``scale`` with exactly ``decimals`` decimals, rounded half up (away from zero on a tie), as a
    reader rounds: 0.125 as a percentage is ``"13"``, not Python's half-to-even ``"12"``; 0.145 is ``"15"`` (the
    product is taken on the shortest decimal that reads back as each float, so 100 * 0.145 is 14.5, not
    14.499999999999998). A value that rounds to zero prints without a minus sign; ``signed`` prefixes ``+`` to
    every other (``"+0"``, ``"+1.5"``, ``"-2"``).
    """
    if _HALF_EVEN.get():
        text = f"{float(value) * float(scale):.{max(0, decimals)}f}"
        if float(text) == 0:
            text = text.lstrip("-")
            return "+" + text if signed else text
        return f"+{text}" if signed and not text.startswith("-") else text
    if not math.isfinite(float(value) * float(scale)):  # nothing to round ("inf", "nan"), as Python prints it
        return f"{float(value) * float(scale):{'+' if signed else ''}.{max(0, decimals)}f}"
    exact = Decimal(repr(float(value))) * Decimal(repr(float(scale)))
    with localcontext() as context:  # enough digits for any finite float at any number of decimals
        context.prec = max(28, exact.adjusted() + max(0, decimals) + 2)
        rounded = exact.quantize(Decimal(1).scaleb(-max(0, decimals)), rounding=ROUND_HALF_UP)
    if rounded.is_zero():
        rounded = rounded.copy_abs()
    return f"{rounded:+f}" if signed else f"{rounded:f}"


@contextmanager
def rounded_half_even() -> Iterator[None]:
    """Within it, `fixed` rounds as reports of 0.12.0 and earlier printed (Python's format of the binary product,
    half to even: 12.5% as "12%"), so that ``verify`` can tell a report of such a version from an edited one."""
    token = _HALF_EVEN.set(True)
    try:
        yield
    finally:
        _HALF_EVEN.reset(token)
