"""MockProvider: scripted replies in order or from a function, recorded requests, honest about being a mock."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from contextdelta.providers import (
    ChatProvider,
    MockProvider,
    MockReply,
    MockRequest,
    ProviderFailure,
    ToolCallRequest,
    Usage,
    mock_response,
)

MESSAGES: list[dict[str, Any]] = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
TOOLS = [{"type": "function", "function": {"name": "get_order", "parameters": {"type": "object"}}}]


def test_it_is_a_chat_provider_that_says_it_is_a_mock() -> None:
    mock = MockProvider(["hi"])
    assert isinstance(mock, ChatProvider)
    assert mock.is_mock is True and mock.name == "mock" and mock.model == "mock"


def test_scripted_replies_come_in_order_and_requests_are_recorded() -> None:
    script: list[MockReply] = [
        mock_response(
            tool_calls=[("get_order", {"order_id": "A-1"})], usage=Usage(prompt_tokens=3, completion_tokens=1)
        ),
        "done",
    ]
    mock = MockProvider(script, model="m")

    async def go() -> None:
        messages: list[dict[str, Any]] = list(MESSAGES)
        first = await mock.complete(messages, TOOLS, seed=4)
        messages.append({"role": "assistant", "content": None})  # the caller mutating its list later ...
        second = await mock.complete(messages, None, model="summary")
        assert first.tool_calls == [ToolCallRequest(id="call_mock_0", name="get_order", arguments='{"order_id":"A-1"}')]
        assert first.finish_reason == "tool_calls" and first.usage == Usage(prompt_tokens=3, completion_tokens=1)
        assert second.content == "done" and second.tool_calls == [] and second.model == "summary"

    asyncio.run(go())
    assert mock.requests[0] == MockRequest(messages=MESSAGES, tools=TOOLS, seed=4, model="m")  # ... is not seen here
    assert mock.requests[1].tools is None and mock.requests[1].model == "summary"
    assert mock.remaining == 0


def test_raw_string_arguments_pass_through_unchanged() -> None:
    response = mock_response(tool_calls=[("get_order", '{"order_id": ')])
    assert response.tool_calls[0].arguments == '{"order_id": '


def test_a_scripted_failure_is_raised() -> None:
    mock = MockProvider([ProviderFailure("context_window_exceeded", "too long")])
    with pytest.raises(ProviderFailure) as caught:
        asyncio.run(mock.complete(MESSAGES, None))
    assert caught.value.reason == "context_window_exceeded"


def test_running_past_the_script_is_a_provider_error() -> None:
    mock = MockProvider(["only one"])

    async def go() -> None:
        await mock.complete(MESSAGES, None)
        await mock.complete(MESSAGES, None)

    with pytest.raises(ProviderFailure, match="exhausted after 1"):
        asyncio.run(go())
    assert len(mock.requests) == 2


def test_a_function_script_sees_each_request_and_may_be_async() -> None:
    def sync_script(request: MockRequest) -> str:
        return f"{len(request.messages)} messages"

    async def async_script(request: MockRequest) -> str:
        await asyncio.sleep(0)
        return "async " + str(request.seed)

    assert asyncio.run(MockProvider(sync_script).complete(MESSAGES, None)).content == "2 messages"
    assert asyncio.run(MockProvider(async_script).complete(MESSAGES, None, seed=9)).content == "async 9"
    assert MockProvider(sync_script).remaining is None


def test_replies_are_copies() -> None:
    reply = mock_response("x")
    mock = MockProvider([reply])
    got = asyncio.run(mock.complete(MESSAGES, None))
    assert got == reply and got is not reply
