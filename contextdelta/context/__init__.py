"""Context strategies: how the canonical history is reduced before each model call (SPEC section 7)."""

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
    parse_history,
)
from contextdelta.context.factory import STRATEGY_NAMES, create_strategy
from contextdelta.context.full_history import FullHistory
from contextdelta.context.last_n import LastN
from contextdelta.context.semantic_summary import (
    SUMMARY_MARKER,
    SUMMARY_PROMPT_VERSION,
    SUMMARY_SYSTEM_PROMPT,
    SemanticSummary,
    summary_request,
)
from contextdelta.context.tokens import ENCODING_NAME, count_message_tokens, count_text_tokens, count_tool_tokens
from contextdelta.context.typed_state_digest import DIGEST_VERSION, TypedStateDigest, build_state_digest, render_digest
from contextdelta.context.validation import message_sequence_problems

__all__ = [
    "DIGEST_VERSION",
    "ENCODING_NAME",
    "PINNED",
    "STRATEGY_NAMES",
    "SUMMARY_MARKER",
    "SUMMARY_PROMPT_VERSION",
    "SUMMARY_SYSTEM_PROMPT",
    "ContextStrategy",
    "EpisodeContext",
    "FullHistory",
    "HistoryError",
    "LastN",
    "Message",
    "Segment",
    "SemanticSummary",
    "StrategyBase",
    "SummaryCall",
    "TransformResult",
    "TypedStateDigest",
    "build_state_digest",
    "count_message_tokens",
    "count_text_tokens",
    "count_tool_tokens",
    "create_strategy",
    "message_sequence_problems",
    "parse_history",
    "render_digest",
    "summary_request",
]
