"""Analysis parameters: the few numbers every interval and test depends on, recorded in the manifest."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class AnalysisParams(BaseModel):
    """Parameters of the statistical analysis.

    They are part of the receipt: the same episodes, the same parameters and the same analysis source
    (`analysis_sha256`) give byte-identical intervals.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    resamples: int = Field(default=10_000, ge=1, description="Bootstrap resamples per interval.")
    seed: int = Field(default=0, ge=0, description="Seed of the numpy Generator that draws the resample indices.")
    confidence: float = Field(default=0.95, gt=0.0, lt=1.0, description="Two-sided level of percentile intervals.")

    @property
    def percentiles(self) -> tuple[float, float]:
        """The lower and upper percentiles (0-100) of the bootstrap distribution that bound the interval."""
        tail = (1.0 - self.confidence) / 2.0
        return 100.0 * tail, 100.0 * (1.0 - tail)


DEFAULT_PARAMS = AnalysisParams()
