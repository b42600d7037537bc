"""How many decimals an interval end deserves, given the Monte-Carlo error of the bootstrap that made it."""

from __future__ import annotations

import math


def printed_decimals(mc_se: float | None, scale: float = 100.0, max_decimals: int = 1) -> int:
    """Decimals (on ``scale``, e.g. 100 for percent) at which a value with Monte-Carlo standard error ``mc_se``
    is printed: the finest power-of-ten unit that is still at least the standard error, so the last printed digit
    is not resampling noise (0.69 pp -> whole percent, 0.05 pp -> one decimal). ``None`` or 0 (no resampling
    error) gives ``max_decimals``."""
    if mc_se is None or mc_se <= 0.0:
        return max_decimals
    return max(0, min(max_decimals, math.floor(-math.log10(mc_se * scale))))
