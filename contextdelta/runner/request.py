"""What a user asks ``run-benchmark`` for, and the error it raises when it refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from contextdelta.rundir import ExternalAgentInfo
from contextdelta.settings import SEED_MAX, SEED_MIN, Temperature
from contextdelta.tasks import MAX_STEPS

DEFAULT_REPEATS = 3
DEFAULT_CONCURRENCY = 4
DEFAULT_TIMEOUT_S = 120.0
MAX_TIMEOUT_S = 3600.0
"""The longest per-call timeout (an hour): a larger one lets a stalled endpoint block a run without end."""
DEFAULT_MAX_CONSECUTIVE_FAILURES = 10
"""The circuit breaker trips after this many failed trials in a row (an endpoint that went down)."""
DEFAULT_MAX_FAILED_SHARE = 0.5
"""... or when failed trials pass this share of the session's finished episodes (a flaky endpoint)."""
EXIT_INCOMPLETE = 3
"""Exit status of a run that stopped before every planned episode finished (circuit breaker, budget, a write
error); its last lines say how to resume it. 2 is a refusal, 130 an interruption."""
EXIT_ALL_FAILED = 4
"""Exit status of a run that finished every planned episode, each of them a failed trial: a run directory with no
verdict is no result (an endpoint that failed every call, below the circuit breaker's thresholds); its last lines
name the failures and how to re-run them."""


class BenchmarkError(Exception):
    """A run that cannot start or continue; ``exit_code`` 2 for refusals and bad configuration."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class UnknownTaskIdsError(BenchmarkError):
    """Task ids the suite does not hold; ``flag`` names the option that gave them (``--task-ids``; serve-world's
    ``--task``), so that a command can name its own."""

    def __init__(self, unknown: list[str], known: list[str], flag: str = "--task-ids") -> None:
        super().__init__(f"{flag}: unknown task ids {unknown}; known: {', '.join(known)}")
        self.unknown = unknown
        self.known = known

    def for_flag(self, flag: str) -> UnknownTaskIdsError:
        """The same refusal, naming ``flag``."""
        return UnknownTaskIdsError(self.unknown, self.known, flag)


class SeveralProblems(BenchmarkError):
    """Several refusals of the checks that need no network, named together (exit 2)."""

    def __init__(self, refusals: list[BenchmarkError]) -> None:
        listing = "\n".join(f"- {refusal.message}" for refusal in refusals)
        super().__init__(f"{len(refusals)} problems; nothing was run:\n{listing}")
        self.refusals = refusals

    def for_flag(self, flag: str) -> SeveralProblems:
        """The same refusal, an unknown task id among them named by ``flag`` (serve-world's ``--task``)."""
        return SeveralProblems([r.for_flag(flag) if isinstance(r, UnknownTaskIdsError) else r for r in self.refusals])


class BenchmarkRequest(BaseModel):
    """What the user asked for. ``None`` means "not given": defaults apply, or the manifest's on resume.

    The numeric bounds below are the one definition of each flag's allowed range: the command line refuses an
    out-of-range value from them (naming the range) before anything runs. Zero, where allowed, is a value.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, allow_inf_nan=False)

    tasks_dir: Path | None = None
    """The folder of task files. None: on ``--resume`` the suite the manifest records, otherwise the default
    (``./tasks`` when it is a folder, else the packaged ``core`` suite: ``contextdelta.tasks.resolve_suite``)."""
    suite_source: str | None = None
    """How ``--tasks`` named ``tasks_dir`` (``package:NAME``, or the folder as given), recorded in the manifest;
    None: the folder relative to the working directory."""
    task_ids: list[str] | None = None
    strategies: list[str] | None = None
    protection_modes: list[str] | None = None
    repeats: int | None = Field(default=None, ge=1)
    limit: int | None = Field(default=None, ge=1)
    max_steps: int | None = Field(default=None, ge=1, le=MAX_STEPS)
    concurrency: int = Field(default=DEFAULT_CONCURRENCY, ge=1)
    seed: int | None = Field(default=None, ge=SEED_MIN, le=SEED_MAX)
    """A signed 64-bit integer, as ``--seed`` and ``CONTEXTDELTA_SEED`` (the trace store keeps it in a BIGINT)."""
    provider: str = "openai"
    model: str | None = None
    base_url: str | None = None
    api_key: SecretStr | None = None
    summary_model: str | None = None
    temperature: Temperature | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0, le=MAX_TIMEOUT_S)
    max_consecutive_failures: int = Field(
        default=DEFAULT_MAX_CONSECUTIVE_FAILURES,
        ge=1,
        description="Circuit breaker: stop starting episodes after this many failed trials in a row.",
    )
    max_failed_share: float = Field(
        default=DEFAULT_MAX_FAILED_SHARE,
        gt=0,
        le=1,
        description="Circuit breaker: stop once failed trials pass this share of the session's finished episodes "
        "(1 turns this rule off).",
    )
    max_retries: int | None = Field(
        default=None, ge=0, le=20, description="Retries of a failed model call (None: the provider's default policy)."
    )
    results_dir: Path | None = None
    max_cost_usd: float | None = Field(default=None, gt=0)
    """A budget must be > 0 (None: no budget); 0 would fail every episode before its first call."""
    max_episode_cost_usd: float | None = Field(default=None, gt=0)
    price_table: Path | None = None
    # strategy parameters: their ranges and defaults are StrategyParams' (contextdelta.rundir)
    last_n: int | None = None
    summary_trigger: int | None = None
    summary_keep: int | None = None
    token_budget: int | None = None
    strategy_params: dict[str, dict[str, Any]] | None = None
    """``--strategy-param NAME.KEY=VALUE`` as ``{name: {key: value}}`` (see contextdelta.context.registry)."""
    external_agent: ExternalAgentInfo | None = None
    """Set by ``run-external`` / ``serve-world``: the run's one strategy is ``external:<agent>``, there is no
    provider (the agent brings its own model), and episodes run on the external agent's executor."""
    resume: str | None = None
    retry_failed: bool = False
    """``--retry-failed`` (with ``--resume``): also re-run the run's failed trials, each as a new attempt of its
    episode (``contextdelta.rundir.attempts``); without it a resume runs only the missing episodes."""
    executor: str = "local"
    """``local`` (this machine: in-process, or ``workers`` processes) or ``ray`` (a Ray cluster)."""
    workers: int | None = Field(default=None, ge=1)
    """Worker processes (local) or actors (ray); None: ``CONTEXTDELTA_WORKERS``, else the number of cores (local)
    or the cluster's CPUs (ray). Never more than ``concurrency``; 1 runs episodes in this process."""
    ray_address: str | None = None
    """``--ray-address``: an existing Ray cluster; None starts a local one for the run."""
    # endpoint rate limits: their ranges are EndpointLimits' (contextdelta.providers)
    max_concurrent_requests: int | None = None
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    adaptive_concurrency: bool = False
    shard: str | None = None
    """``--shard I/N``: run only the I-th of N parts of the plan (``contextdelta merge`` joins the parts)."""
    controls: list[str] | None = None
    """``--controls``: control conditions to run beside the main matrix (``no_mutation``)."""
    allow_unlocked: bool = False
    """``--allow-unlocked``: run a suite whose ``SUITE.lock`` is missing or stale (a task author's run; every other
    ``validate-tasks`` check still applies). Recorded in the manifest (``unlocked``) and at the top of the report;
    a resume keeps what the run recorded."""
