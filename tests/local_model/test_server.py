"""The HTTP endpoint through the benchmark's own OpenAI provider (uvicorn on a free loopback port)."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the local extra (fastapi, uvicorn) is not installed: make local")
pytest.importorskip("uvicorn", reason="the local extra (fastapi, uvicorn) is not installed: make local")

from contextdelta.local_model.server import EndpointServer
from contextdelta.providers.base import ProviderFailure
from contextdelta.providers.openai_compat import OpenAIProvider
from contextdelta.providers.retry import RetryPolicy
from contextdelta.worlds import ProtectionMode, get_world

SERVED = "qwen2.5-coder-0.5b-instruct-q4_k_m"
TOOLS = get_world("order").tool_schemas(ProtectionMode.FRESHNESS_CONTRACT)
MESSAGES = [{"role": "system", "content": "Operate."}, {"role": "user", "content": "Refund B-2198."}]

MakeEngine = Callable[..., Any]


async def _no_sleep(seconds: float) -> None:
    return None


def _complete(base_url: str, *, model: str = SERVED, timeout_s: float = 30.0) -> Any:
    async def call() -> Any:
        async with OpenAIProvider(
            model=model,
            base_url=base_url,
            seed=3,
            timeout_s=timeout_s,
            retry=RetryPolicy(max_attempts=1),
            sleep=_no_sleep,
        ) as provider:
            return await provider.complete(MESSAGES, TOOLS)

    return asyncio.run(call())


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


@pytest.mark.slow
def test_tool_calls_and_usage_reach_the_provider(make_engine: MakeEngine) -> None:
    text = (
        'Checking.\n<tool_call>\n{"name": "get_order", "arguments": {"order_id": "B-2198"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "refund_order", "arguments": {"order_id": "B-2198", amount: 1490}}\n</tool_call>'
    )
    engine, generator = make_engine([text])
    with EndpointServer(engine) as server:
        response = _complete(server.base_url)

    assert [(c.name, c.arguments) for c in response.tool_calls] == [
        ("get_order", '{"order_id": "B-2198"}'),
        ("refund_order", '{"order_id": "B-2198", amount: 1490}'),  # not JSON: passed on for the agent to record
    ]
    assert response.content == "Checking."
    assert response.finish_reason == "tool_calls"
    assert response.model == SERVED
    assert response.usage is not None
    assert response.usage.prompt_tokens == len(generator.prompts[0])
    assert response.usage.completion_tokens == len(text)
    assert response.usage.cached_tokens == 0
    assert generator.calls[0]["seed"] == 3 and generator.calls[0]["temperature"] == 0.0


def test_a_prompt_over_the_window_is_context_window_exceeded_for_the_provider(make_engine: MakeEngine) -> None:
    engine, _ = make_engine(["never"], n_ctx=64)
    with EndpointServer(engine) as server, pytest.raises(ProviderFailure) as raised:
        _complete(server.base_url)
    assert raised.value.reason == "context_window_exceeded"
    assert raised.value.status_code == 400


def test_another_model_name_is_a_provider_error(make_engine: MakeEngine) -> None:
    engine, _ = make_engine(["never"])
    with EndpointServer(engine) as server, pytest.raises(ProviderFailure) as raised:
        _complete(server.base_url, model="gpt-4o")
    assert raised.value.reason == "provider_error"
    assert raised.value.status_code == 404


def test_models_and_health(make_engine: MakeEngine) -> None:
    engine, _ = make_engine([])
    with EndpointServer(engine) as server:
        root = server.base_url.removesuffix("/v1")
        assert [m["id"] for m in _get(f"{server.base_url}/models")["data"]] == [SERVED]
        assert _get(f"{server.base_url}/models/{SERVED}")["id"] == SERVED
        assert _get(f"{root}/health") == {"status": "ok", "model": SERVED, "requests_served": 0}
        with pytest.raises(urllib.error.HTTPError) as missing:
            _get(f"{server.base_url}/models/gpt-4o")
        assert missing.value.code == 404
        assert json.loads(missing.value.read())["error"]["code"] == "model_not_found"


def test_a_body_that_is_not_json_is_a_400(make_engine: MakeEngine) -> None:
    engine, _ = make_engine([])
    with EndpointServer(engine) as server:
        request = urllib.request.Request(
            f"{server.base_url}/chat/completions", data=b"{not json", headers={"Content-Type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as raised:
            urllib.request.urlopen(request, timeout=10)
    assert raised.value.code == 400
    assert json.loads(raised.value.read())["error"]["type"] == "invalid_request_error"


@pytest.mark.slow
def test_a_client_that_times_out_frees_the_model(make_engine: MakeEngine) -> None:
    """The provider gives up after 0.5 s; the 3 s generation is cancelled instead of blocking the next request."""
    engine, generator = make_engine(["never seen", "second"], delay_s=3.0)
    with EndpointServer(engine) as server:
        with pytest.raises(ProviderFailure):
            _complete(server.base_url, timeout_s=0.5)
        generator.delay_s = 0.0
        response = _complete(server.base_url)
    assert response.content == "never seen"  # the cancelled generation consumed no scripted reply
    assert len(generator.calls) == 1
