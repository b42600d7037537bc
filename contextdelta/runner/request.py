"""What a user asks ``run-benchmark`` for, and the error it raises when it refuses."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, SecretStr

DEFAULT_REPEATS = 3
DEFAULT_CONCURRENCY = 4


class BenchmarkError(Exception):
    """A run that cannot start or continue; ``exit_code`` 2 for refusals and bad configuration."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class BenchmarkRequest(BaseModel):
    """What the user asked for. ``None`` means "not given": defaults apply, or the manifest's on resume."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    tasks_dir: Path = Path("tasks")
    task_ids: list[str] | None = None
    strategies: list[str] | None = None
    protection_modes: list[str] | None = None
    repeats: int | None = None
    limit: int | None = None
    max_steps: int | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    seed: int | None = None
    provider: str = "openai"
    model: str | None = None
    base_url: str | None = None
    api_key: SecretStr | None = None
    summary_model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    timeout_s: float = 120.0
    results_dir: Path | None = None
    max_cost_usd: float | None = None
    max_episode_cost_usd: float | None = None
    price_table: Path | None = None
    last_n: int | None = None
    summary_trigger: int | None = None
    summary_keep: int | None = None
    token_budget: int | None = None
    resume: str | None = None
    shard: str | None = None
    """``--shard I/N``: run only the I-th of N parts of the plan (``contextdelta merge`` joins the parts)."""
