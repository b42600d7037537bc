"""Model providers: the OpenAI-compatible client and an in-process mock for unit tests.

The HTTP client (aiohttp) is imported on first use of :class:`OpenAIProvider` (or the other names from
``openai_compat``), so commands that never call a model do not pay for it.
"""

import typing

from contextdelta.providers.base import (
    ENDPOINT_CHECK_TOOL,
    SUMMARY_MODEL_CHECK,
    ChatProvider,
    FailedAttempt,
    PromptSplit,
    ProviderFailure,
    ProviderResponse,
    ToolCallRequest,
    Usage,
    endpoint_check_request,
)
from contextdelta.providers.bodies import (
    MAX_RESPONSE_BYTES,
    READ_CHUNK_BYTES,
    CappedBody,
    NestedTooDeeply,
    NumberTooLong,
    load_json_body,
)
from contextdelta.providers.errors import (
    AccessRefusal,
    EndpointBusy,
    EndpointConnectionError,
    EndpointError,
    EndpointResponseTooLarge,
    EndpointStatusError,
    EndpointTimeout,
    KeyRefused,
    access_refusal,
    one_line,
    refusal_fix,
    refusal_what,
    shorten,
)
from contextdelta.providers.limits import CallGate, EndpointLimiter, EndpointLimits, LimiterStats, estimate_tokens
from contextdelta.providers.mock import MockProvider, MockReply, MockRequest, MockScript, mock_response
from contextdelta.providers.pricing import (
    DEFAULT_PRICES,
    PRICE_TABLE_FORMAT,
    Price,
    PriceTable,
    PriceTableError,
)
from contextdelta.providers.registry import (
    ProviderConfigError,
    ProviderFactory,
    create_provider,
    provider_kinds,
    register_provider,
)
from contextdelta.providers.retry import NO_RETRY, RetryPolicy, is_retryable, retry_after_seconds

if typing.TYPE_CHECKING:
    from contextdelta.providers.openai_compat import OpenAIProvider, is_context_length_error, usage_of

_LAZY = frozenset({"OpenAIProvider", "is_context_length_error", "usage_of"})


def __getattr__(name: str) -> typing.Any:
    if name in _LAZY:
        from contextdelta.providers import openai_compat

        return getattr(openai_compat, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_PRICES",
    "ENDPOINT_CHECK_TOOL",
    "MAX_RESPONSE_BYTES",
    "NO_RETRY",
    "PRICE_TABLE_FORMAT",
    "READ_CHUNK_BYTES",
    "SUMMARY_MODEL_CHECK",
    "AccessRefusal",
    "CallGate",
    "CappedBody",
    "ChatProvider",
    "EndpointBusy",
    "EndpointConnectionError",
    "EndpointError",
    "EndpointLimiter",
    "EndpointLimits",
    "EndpointResponseTooLarge",
    "EndpointStatusError",
    "EndpointTimeout",
    "FailedAttempt",
    "KeyRefused",
    "LimiterStats",
    "MockProvider",
    "MockReply",
    "MockRequest",
    "MockScript",
    "NestedTooDeeply",
    "NumberTooLong",
    "OpenAIProvider",
    "Price",
    "PriceTable",
    "PriceTableError",
    "PromptSplit",
    "ProviderConfigError",
    "ProviderFactory",
    "ProviderFailure",
    "ProviderResponse",
    "RetryPolicy",
    "ToolCallRequest",
    "Usage",
    "access_refusal",
    "create_provider",
    "endpoint_check_request",
    "estimate_tokens",
    "is_context_length_error",
    "is_retryable",
    "load_json_body",
    "mock_response",
    "one_line",
    "provider_kinds",
    "refusal_fix",
    "refusal_what",
    "register_provider",
    "retry_after_seconds",
    "shorten",
    "usage_of",
]
