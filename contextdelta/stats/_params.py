"""Analysis parameters: the few numbers every interval, test and power figure depends on, recorded in
``aggregate_metrics.json`` (``verify`` recomputes with the recorded values)."""

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
    alpha: float = Field(default=0.05, gt=0.0, lt=1.0, description="Family-wise level of the Holm-adjusted tests.")
    power_datasets: int = Field(
        default=2_000, ge=100, description="Simulated datasets per evaluated difference in the power figures."
    )

    @property
    def percentiles(self) -> tuple[float, float]:
        """The lower and upper percentiles (0-100) of the bootstrap distribution that bound the interval."""
        tail = (1.0 - self.confidence) / 2.0
        return 100.0 * tail, 100.0 * (1.0 - tail)


DEFAULT_PARAMS = AnalysisParams()
