"""The agent loop (SPEC section 6): runs one episode and records every step."""

from contextdelta.agent.loop import BudgetCheck, HarnessError, StepCallback, episode_context, run_episode
from contextdelta.agent.prompt import (
    EMPTY_RESPONSE_NUDGE,
    SYSTEM_PROMPT,
    SYSTEM_PROMPT_VERSION,
    initial_messages,
    system_prompt_sha256,
    task_message_text,
)
from contextdelta.agent.records import (
    ContextRecord,
    EpisodeEvaluatorData,
    EpisodeTotals,
    EpisodeTrace,
    ResponseRecord,
    StepEvaluatorData,
    StepRecord,
    StrategyInfo,
    TerminationReason,
    ToolCallRecord,
)

__all__ = [
    "EMPTY_RESPONSE_NUDGE",
    "SYSTEM_PROMPT",
    "SYSTEM_PROMPT_VERSION",
    "BudgetCheck",
    "ContextRecord",
    "EpisodeEvaluatorData",
    "EpisodeTotals",
    "EpisodeTrace",
    "HarnessError",
    "ResponseRecord",
    "StepCallback",
    "StepEvaluatorData",
    "StepRecord",
    "StrategyInfo",
    "TerminationReason",
    "ToolCallRecord",
    "episode_context",
    "initial_messages",
    "run_episode",
    "system_prompt_sha256",
    "task_message_text",
]
