"""The provider interface the agent loop calls: one chat-completions request in, one response out."""

from __future__ import annotations

from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

from pydantic import BaseModel, Field

ENDPOINT_CHECK_TOOL = "contextdelta_endpoint_check"
SUMMARY_MODEL_CHECK = "ContextDelta is checking that this endpoint serves the summary model. Reply OK."
"""The only message of the check of a summary model apart from the agent's (a chat completion without tools)."""
"""The one tool of the endpoint check's request (``run-benchmark`` sends it once before a run starts)."""


def endpoint_check_request() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(messages, tools) of the endpoint check: a minimal chat completion carrying ``tools``, so an endpoint that
    rejects tool definitions is refused before a run records hundreds of failed trials."""
    messages = [
        {
            "role": "user",
            "content": f"ContextDelta is checking that this endpoint accepts tools. Call {ENDPOINT_CHECK_TOOL}.",
        }
    ]
    tools = [
        {
            "type": "function",
            "function": {
                "name": ENDPOINT_CHECK_TOOL,
                "description": "Confirms that tool calls work. Takes no arguments.",
                "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
            },
        }
    ]
    return messages, tools


class PromptSplit(NamedTuple):
    """A usage's prompt tokens by how the provider's prompt cache billed them (they add up to prompt_tokens)."""

    uncached: int
    cached: int
    cache_write: int


class Usage(BaseModel):
    """Token usage as the provider reported it; adds up across calls.

    ``prompt_tokens`` counts every prompt token, those served from or written to the cache included (OpenAI's
    convention, which OpenAI-compatible gateways follow); ``cached_tokens`` and ``cache_write_tokens`` are parts
    of it, None when the provider did not report them.
    """

    prompt_tokens: int = Field(default=0, description="Prompt tokens, cached and cache-write ones included.")
    completion_tokens: int = Field(default=0, description="Completion tokens.")
    cached_tokens: int | None = Field(default=None, description="Prompt tokens served from cache, when reported.")
    cache_write_tokens: int | None = Field(
        default=None, description="Prompt tokens written to the cache, when the provider reports them apart."
    )

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=_add_reported(self.cached_tokens, other.cached_tokens),
            cache_write_tokens=_add_reported(self.cache_write_tokens, other.cache_write_tokens),
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def prompt_split(self) -> PromptSplit:
        """The prompt tokens as uncached, cached and cache-write parts (unreported parts count as uncached; a
        report that claims more than the prompt is capped at it, cache reads first)."""
        cached = min(self.cached_tokens or 0, self.prompt_tokens)
        write = min(self.cache_write_tokens or 0, self.prompt_tokens - cached)
        return PromptSplit(uncached=self.prompt_tokens - cached - write, cached=cached, cache_write=write)


def _add_reported(a: int | None, b: int | None) -> int | None:
    """The sum of two optional counts: None only when neither was reported."""
    if a is None and b is None:
        return None
    return (a or 0) + (b or 0)


class ToolCallRequest(BaseModel):
    """A tool call as the model wrote it; ``arguments`` is the raw text (it may not be valid JSON)."""

    id: str = Field(description="The call id the model wrote.")
    name: str = Field(description="The tool name the model wrote.")
    arguments: str = Field(description="The raw argument text (it may not be valid JSON).")


class ProviderResponse(BaseModel):
    """One completed chat-completions call."""

    content: str | None
    refusal: str | None = Field(
        default=None, description="The model's refusal (message.refusal, or refusal parts of the content), if any."
    )
    tool_calls: list[ToolCallRequest] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = Field(default=None, description="None when the provider reported no usage.")
    latency_s: float = Field(
        description="Time on the wire of the successful attempt, in seconds: from its request starting out to its "
        "response read, measured where the HTTP I/O runs (never the time the caller's event loop took to resume)."
    )
    queue_s: float = Field(
        default=0.0,
        description="Seconds the successful attempt waited before its request started (a free slot on the "
        "provider's I/O loop and connection pool); recorded apart from latency_s.",
    )
    retries: int = Field(default=0, description="Attempts that failed before this one succeeded.")
    elapsed_s: float | None = Field(
        default=None, description="Wall time of the whole call: every attempt plus the backoff waits between them."
    )
    model: str | None = Field(default=None, description="Model name the endpoint reported.")
    raw: dict[str, Any] | None = Field(default=None, description="The raw response body.")


class FailedAttempt(BaseModel):
    """One HTTP attempt of a call that failed: what came back and how long it took."""

    status_code: int | None = Field(
        description="The HTTP status the endpoint answered; null when no answer came (a timeout, a refused or "
        "dropped connection). 200 for an answer that was not a usable chat completion."
    )
    error: str = Field(
        description="How the attempt failed, named as the openai library names it (AuthenticationError, "
        "RateLimitError, InternalServerError, APITimeoutError, APIConnectionError, ...; InvalidResponseError for an "
        "HTTP 200 that was no usable completion)."
    )
    code: str | None = Field(default=None, description="The error code the endpoint's error body gave, if any.")
    elapsed_s: float = Field(description="Seconds from the attempt's request going out to its failure.")


class ProviderFailure(Exception):
    """A call that did not produce a response; ``reason`` is the episode's termination reason."""

    def __init__(
        self,
        reason: Literal["provider_error", "context_window_exceeded"],
        message: str,
        retries: int = 0,
        *,
        status_code: int | None = None,
        elapsed_s: float | None = None,
        usage: Usage | None = None,
        attempts: list[FailedAttempt] | None = None,
        refusal: str | None = None,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.retries = retries
        self.status_code = status_code
        """HTTP status of the last failed attempt, when there was a response."""
        self.elapsed_s = elapsed_s
        """Wall time spent on the call, every attempt and backoff wait included, when known."""
        self.usage = usage
        """Usage the endpoint reported for a reply it sent but that could not be used (a completion of the wrong
        shape, a summary without text): the call was made, and billed, all the same."""
        self.attempts: list[FailedAttempt] = list(attempts or [])
        """Each failed HTTP attempt in order (empty when the provider does not say, e.g. a test double)."""
        self.refusal = refusal
        """The access refusal (``AccessRefusal``: key, permission, model, quota) the last attempt's answer says, when
        it says one: no retry, nor any further call with this key and model, gets another answer."""

    def __repr__(self) -> str:
        return f"ProviderFailure(reason={self.reason!r}, message={self.message!r}, retries={self.retries})"


@runtime_checkable
class ChatProvider(Protocol):
    """What the agent loop needs from a model endpoint."""

    name: str
    """Provider kind, e.g. 'openai' or 'mock'."""
    model: str
    is_mock: bool
    """True for in-process test doubles, which benchmark runs refuse."""

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        *,
        seed: int | None = None,
        model: str | None = None,
    ) -> ProviderResponse:
        """One chat-completions call. Raises ProviderFailure when no usable response could be had."""
        ...
