"""``run-benchmark`` (SPEC sections 3 and 9): plan, execute and finalise a matrix of episodes into a run directory.

    outcome = run_benchmark(BenchmarkRequest(...), recorders=[...])    # the three phases in one call

or phase by phase (what ``run-benchmark`` does inside)::

    plan = plan_run(request, settings)       # checks and decisions; nothing written (BenchmarkError: refusals)
    run = open_run(plan, recorders)          # the run directory, the running manifest, recorders started
    execute(run, executor)                   # episodes on an executor; each record to every recorder
    outcome = finalise(run)                  # recorders finish, then the final manifest is written
"""

from contextdelta.runner.benchmark import (
    ActiveRun,
    FinaliseInterrupted,
    OpenInterrupted,
    RunOutcome,
    default_executor,
    execute,
    finalise,
    open_run,
    run_benchmark,
    run_plan,
    run_state,
    stop_rules,
)
from contextdelta.runner.episode import Costing, EpisodeJob, build_world, episode_record, run_job, utc_now
from contextdelta.runner.execute import (
    AccessRefused,
    CircuitBreaker,
    CostBudget,
    Executor,
    InProcessExecutor,
    StopRule,
    WriteFailure,
    drive,
)
from contextdelta.runner.merge import MergeError, merge_shards
from contextdelta.runner.plan import (
    EpisodeSpec,
    Shard,
    episode_seed,
    manifest_episodes,
    order_seed,
    plan_episodes,
    plan_sha256,
)
from contextdelta.runner.prepare import (
    MOCK_REFUSAL,
    Matrix,
    RunPlan,
    pending_episodes,
    plan_run,
    resume_command,
    run_hashes,
)
from contextdelta.runner.progress import ProgressDisplay
from contextdelta.runner.provenance import HARNESS_MODULES, environment, git_info, source_hash
from contextdelta.runner.request import (
    DEFAULT_CONCURRENCY,
    DEFAULT_REPEATS,
    EXIT_ALL_FAILED,
    EXIT_INCOMPLETE,
    BenchmarkError,
    BenchmarkRequest,
    SeveralProblems,
    UnknownTaskIdsError,
)

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEFAULT_REPEATS",
    "EXIT_ALL_FAILED",
    "EXIT_INCOMPLETE",
    "HARNESS_MODULES",
    "MOCK_REFUSAL",
    "AccessRefused",
    "ActiveRun",
    "BenchmarkError",
    "BenchmarkRequest",
    "CircuitBreaker",
    "CostBudget",
    "Costing",
    "EpisodeJob",
    "EpisodeSpec",
    "Executor",
    "FinaliseInterrupted",
    "InProcessExecutor",
    "Matrix",
    "MergeError",
    "OpenInterrupted",
    "ProgressDisplay",
    "RunOutcome",
    "RunPlan",
    "SeveralProblems",
    "Shard",
    "StopRule",
    "UnknownTaskIdsError",
    "WriteFailure",
    "build_world",
    "default_executor",
    "drive",
    "environment",
    "episode_record",
    "episode_seed",
    "execute",
    "finalise",
    "git_info",
    "manifest_episodes",
    "merge_shards",
    "open_run",
    "order_seed",
    "pending_episodes",
    "plan_episodes",
    "plan_run",
    "plan_sha256",
    "resume_command",
    "run_benchmark",
    "run_hashes",
    "run_job",
    "run_plan",
    "run_state",
    "source_hash",
    "stop_rules",
    "utc_now",
]
