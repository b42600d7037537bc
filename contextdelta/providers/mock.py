"""An in-process test double for unit tests: scripted responses, recorded requests. Benchmark runs refuse it."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from contextdelta.canonical import canonical_json
from contextdelta.providers.base import ProviderFailure, ProviderResponse, ToolCallRequest, Usage


class MockRequest(BaseModel):
    """One call the mock received, deep-copied at call time."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    seed: int | None = None
    model: str = Field(description="The model the call asked for (the override, or the provider's model).")


MockReply = ProviderResponse | ProviderFailure | str
"""A scripted reply: a full response, a failure to raise, or plain assistant text."""
MockScript = Sequence[MockReply] | Callable[[MockRequest], MockReply | Awaitable[MockReply]]


def mock_response(
    content: str | None = None,
    tool_calls: Sequence[ToolCallRequest | tuple[str, dict[str, Any] | str]] = (),
    *,
    usage: Usage | None = None,
    finish_reason: str | None = None,
    latency_s: float = 0.0,
) -> ProviderResponse:
    """A ProviderResponse for scripts; tool calls may be given as ``(name, arguments)`` pairs.

    Pair arguments given as a dict are serialised as canonical JSON; a string is passed through raw (so a
    script can send malformed JSON). Pair calls get ids ``call_mock_<i>``.
    """
    calls: list[ToolCallRequest] = []
    for index, call in enumerate(tool_calls):
        if isinstance(call, ToolCallRequest):
            calls.append(call)
            continue
        name, arguments = call
        text = arguments if isinstance(arguments, str) else canonical_json(arguments)
        calls.append(ToolCallRequest(id=f"call_mock_{index}", name=name, arguments=text))
    return ProviderResponse(
        content=content,
        tool_calls=calls,
        finish_reason=finish_reason or ("tool_calls" if calls else "stop"),
        usage=usage,
        latency_s=latency_s,
        elapsed_s=latency_s,
        model="mock",
    )


class MockProvider:
    """A ChatProvider that answers from a script; ``is_mock`` is True so benchmark runs can refuse it.

    ``script`` is either a sequence of replies used in order (running past its end raises ProviderFailure
    ``provider_error`` naming the exhaustion) or a function of the request returning a reply (it may be async).
    Every request is recorded in :attr:`requests`.
    """

    name = "mock"
    is_mock = True

    def __init__(self, script: MockScript, *, model: str = "mock") -> None:
        self.model = model
        self.requests: list[MockRequest] = []
        self._script = script
        self._next = 0

    def __repr__(self) -> str:
        return f"MockProvider(model={self.model!r}, requests={len(self.requests)})"

    @property
    def remaining(self) -> int | None:
        """Scripted replies not yet used; None for a function script."""
        if callable(self._script):
            return None
        return len(self._script) - self._next

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        *,
        seed: int | None = None,
        model: str | None = None,
    ) -> ProviderResponse:
        """Record the request and return (or raise) the next scripted reply."""
        request = MockRequest(
            messages=copy.deepcopy(messages),
            tools=copy.deepcopy(tools),
            seed=seed,
            model=model or self.model,
        )
        self.requests.append(request)
        reply = await self._reply(request)
        if isinstance(reply, ProviderFailure):
            raise reply
        if isinstance(reply, str):
            return mock_response(reply).model_copy(update={"model": request.model})
        return reply.model_copy(deep=True)

    async def _reply(self, request: MockRequest) -> MockReply:
        if callable(self._script):
            produced = self._script(request)
            return await produced if inspect.isawaitable(produced) else produced
        if self._next >= len(self._script):
            raise ProviderFailure("provider_error", f"MockProvider script exhausted after {len(self._script)} replies")
        reply = self._script[self._next]
        self._next += 1
        return reply
