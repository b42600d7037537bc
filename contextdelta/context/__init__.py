"""Context strategies: how the canonical history is reduced before each model call (SPEC section 7).

The public interface of a strategy is :class:`ContextStrategy`; built-ins and plug-ins are found and built
through one registry (:func:`create_strategy`, :func:`resolve_strategy`, entry-point group
``contextdelta.strategies``)."""

from contextdelta.context.base import (
    PINNED,
    ContextStrategy,
    EpisodeContext,
    HistoryError,
    Message,
    Segment,
    StrategyBase,
    SummaryCall,
    TransformResult,
    check_window,
    parse_history,
)
from contextdelta.context.full_history import FullHistory
from contextdelta.context.last_n import LastN
from contextdelta.context.registry import (
    BUILTIN_STRATEGIES,
    ENTRY_POINT_GROUP,
    WINDOWED_STRATEGIES,
    RegisteredStrategy,
    StrategyDescription,
    StrategyError,
    StrategyFactory,
    StrategyServices,
    StrategySource,
    build_strategy,
    builtin_params,
    configure_strategies,
    create_strategy,
    describe_strategy,
    installed_plugins,
    parse_strategy_params,
    probe_strategy,
    rebuild_strategy,
    resolve_strategy,
    source_changes,
)
from contextdelta.context.semantic_summary import (
    SUMMARY_MARKER,
    SUMMARY_PROMPT_VERSION,
    SUMMARY_SYSTEM_PROMPT,
    SemanticSummary,
    summary_request,
)
from contextdelta.context.token_budget_trim import DEFAULT_TOKEN_BUDGET, TokenBudgetTrim, trim_to_budget
from contextdelta.context.tokens import ENCODING_NAME, count_message_tokens, count_text_tokens, count_tool_tokens
from contextdelta.context.tool_result_clearing import CLEARED_PLACEHOLDER, ToolResultClearing, clear_tool_results
from contextdelta.context.typed_state_digest import DIGEST_VERSION, TypedStateDigest, build_state_digest, render_digest
from contextdelta.context.validation import (
    MAX_CONTEXT_CHARS,
    MESSAGE_KEYS,
    bounded_transform,
    describe_problems,
    detached,
    is_builtin,
    message_sequence_problems,
    summary_call_problems,
    transform_problems,
)

STRATEGY_NAMES = BUILTIN_STRATEGIES
"""The built-in strategy names (plug-ins come from the registry)."""

__all__ = [
    "BUILTIN_STRATEGIES",
    "CLEARED_PLACEHOLDER",
    "DEFAULT_TOKEN_BUDGET",
    "DIGEST_VERSION",
    "ENCODING_NAME",
    "ENTRY_POINT_GROUP",
    "MAX_CONTEXT_CHARS",
    "MESSAGE_KEYS",
    "PINNED",
    "STRATEGY_NAMES",
    "SUMMARY_MARKER",
    "SUMMARY_PROMPT_VERSION",
    "SUMMARY_SYSTEM_PROMPT",
    "WINDOWED_STRATEGIES",
    "ContextStrategy",
    "EpisodeContext",
    "FullHistory",
    "HistoryError",
    "LastN",
    "Message",
    "RegisteredStrategy",
    "Segment",
    "SemanticSummary",
    "StrategyBase",
    "StrategyDescription",
    "StrategyError",
    "StrategyFactory",
    "StrategyServices",
    "StrategySource",
    "SummaryCall",
    "TokenBudgetTrim",
    "ToolResultClearing",
    "TransformResult",
    "TypedStateDigest",
    "bounded_transform",
    "build_state_digest",
    "build_strategy",
    "builtin_params",
    "check_window",
    "clear_tool_results",
    "configure_strategies",
    "count_message_tokens",
    "count_text_tokens",
    "count_tool_tokens",
    "create_strategy",
    "describe_problems",
    "describe_strategy",
    "detached",
    "installed_plugins",
    "is_builtin",
    "message_sequence_problems",
    "parse_history",
    "parse_strategy_params",
    "probe_strategy",
    "rebuild_strategy",
    "render_digest",
    "resolve_strategy",
    "source_changes",
    "summary_call_problems",
    "summary_request",
    "transform_problems",
    "trim_to_budget",
]
