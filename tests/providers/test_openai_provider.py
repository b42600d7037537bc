"""OpenAIProvider over real HTTP on loopback: the scripted server with injected faults, and a recording server."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import traceback
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai
import pytest

from contextdelta.providers import OpenAIProvider, ProviderFailure, ProviderResponse, RetryPolicy, usage_of
from contextdelta.testing import CallId, Phase, fetch_stats
from contextdelta.worlds import ProtectionMode, get_world
from tests.providers.conftest import RawEndpoint, RecordingSleep, ScriptedFactory, completion
from tests.testing.episode_loop import first_messages, fixture_tasks

KEY = "sk-test-SECRET-0123456789abcdef"
FAST = RetryPolicy(max_attempts=4, max_total_s=60.0, initial_backoff_s=0.5, max_backoff_s=4.0, jitter_s=0.25)
TASK = fixture_tasks()["fixture-mug-refund"]
TOOLS = get_world("order").tool_schemas(ProtectionMode.UNPROTECTED)


def provider(base_url: str, sleep: RecordingSleep, **options: Any) -> OpenAIProvider:
    options.setdefault("retry", FAST)
    options.setdefault("timeout_s", 10.0)
    return OpenAIProvider(base_url=base_url, model="scripted-oracle", api_key=KEY, sleep=sleep, **options)


async def complete_once(p: OpenAIProvider, **kwargs: Any) -> ProviderResponse:
    async with p:
        return await p.complete(first_messages(TASK), TOOLS, **kwargs)


def fail(p: OpenAIProvider) -> ProviderFailure:
    with pytest.raises(ProviderFailure) as caught:
        asyncio.run(complete_once(p))
    return caught.value


# ---- the scripted server --------------------------------------------------------------------------------


def test_complete_records_tool_call_usage_latency_and_raw(scripted: ScriptedFactory, sleep: RecordingSleep) -> None:
    with scripted() as base_url:
        response = asyncio.run(complete_once(provider(base_url, sleep)))
    assert response.content is None
    assert [(c.name, json.loads(c.arguments)) for c in response.tool_calls] == [("get_order", {"order_id": "A-1001"})]
    assert response.finish_reason == "tool_calls"
    assert response.model == "scripted-oracle"
    assert response.retries == 0 and sleep.waits == []
    assert response.usage is not None and response.usage.prompt_tokens > 0 and response.usage.completion_tokens > 0
    assert response.usage.cached_tokens == 0
    assert 0 < response.latency_s <= (response.elapsed_s or 0) < 5
    assert response.raw is not None and response.raw["choices"][0]["message"]["tool_calls"][0]["id"] == (
        response.tool_calls[0].id
    )


def test_429_then_success_waits_the_retry_after_seconds(scripted: ScriptedFactory, sleep: RecordingSleep) -> None:
    with scripted(fail_429=1, retry_after=7) as base_url:
        response = asyncio.run(complete_once(provider(base_url, sleep)))
        stats = fetch_stats(base_url)
    assert response.retries == 1
    assert sleep.waits == [7.0]
    assert stats["requests"] == 2 and stats["faults"] == {"fail_429": 1}


def test_retry_after_as_http_date_is_honoured(scripted: ScriptedFactory, sleep: RecordingSleep) -> None:
    with scripted(fail_429=2, retry_after=30, retry_after_http_date=True) as base_url:
        response = asyncio.run(complete_once(provider(base_url, sleep)))
    assert response.retries == 2
    assert len(sleep.waits) == 2
    assert all(28.0 <= w <= 30.5 for w in sleep.waits), sleep.waits  # an HTTP date has 1-second resolution


def test_429_without_retry_after_backs_off_exponentially(scripted: ScriptedFactory, sleep: RecordingSleep) -> None:
    with scripted(fail_429=3, retry_after=None) as base_url:
        response = asyncio.run(complete_once(provider(base_url, sleep)))
    assert response.retries == 3
    assert [round(w - j, 6) for w, j in zip(sleep.waits, _jitter(sleep.waits), strict=True)] == [0.5, 1.0, 2.0]


def test_500_then_success_is_retried_with_jittered_backoff(scripted: ScriptedFactory, sleep: RecordingSleep) -> None:
    with scripted(fail_500=2) as base_url:
        response = asyncio.run(complete_once(provider(base_url, sleep)))
        stats = fetch_stats(base_url)
    assert response.retries == 2
    assert stats["requests"] == 3 and stats["faults"] == {"fail_500": 2}
    assert 0.5 <= sleep.waits[0] <= 0.75 and 1.0 <= sleep.waits[1] <= 1.25


def test_exhausted_retries_raise_provider_error_with_retries_counted(
    scripted: ScriptedFactory, sleep: RecordingSleep
) -> None:
    with scripted(fail_500="all") as base_url:
        failure = fail(provider(base_url, sleep))
        stats = fetch_stats(base_url)
    assert failure.reason == "provider_error"
    assert failure.retries == 3 and stats["requests"] == 4  # max_attempts=4
    assert failure.status_code == 500
    assert "gave up after 4 attempts" in failure.message
    assert failure.elapsed_s is not None and failure.elapsed_s > 0


def test_dropped_connection_is_retried(scripted: ScriptedFactory, sleep: RecordingSleep) -> None:
    with scripted(drop_connection=1) as base_url:
        response = asyncio.run(complete_once(provider(base_url, sleep)))
        stats = fetch_stats(base_url)
    assert response.retries == 1 and len(sleep.waits) == 1
    assert stats["faults"] == {"drop_connection": 1}


def test_dropped_connections_every_time_end_as_provider_error(scripted: ScriptedFactory, sleep: RecordingSleep) -> None:
    with scripted(drop_connection="all") as base_url:
        failure = fail(provider(base_url, sleep, retry=RetryPolicy(max_attempts=2, initial_backoff_s=0)))
    assert failure.reason == "provider_error" and failure.retries == 1
    assert failure.message.startswith("APIConnectionError") and failure.status_code is None


@pytest.mark.slow
def test_slow_response_beyond_the_timeout_is_retried(scripted: ScriptedFactory, sleep: RecordingSleep) -> None:
    with scripted(slow=1, slow_ms=1500) as base_url:
        started = time.perf_counter()
        response = asyncio.run(complete_once(provider(base_url, sleep, timeout_s=0.3)))
        took = time.perf_counter() - started
    assert response.retries == 1
    assert took < 1.4  # it did not wait for the slow answer
    assert response.latency_s < 0.3 <= (response.elapsed_s or 0)


@pytest.mark.slow
def test_timeouts_every_time_end_as_provider_error(scripted: ScriptedFactory, sleep: RecordingSleep) -> None:
    with scripted(slow="all", slow_ms=1000) as base_url:
        failure = fail(provider(base_url, sleep, timeout_s=0.2, retry=RetryPolicy(max_attempts=2)))
    assert failure.reason == "provider_error" and failure.retries == 1
    assert "timed out" in failure.message


def test_malformed_tool_arguments_are_passed_through_raw(scripted: ScriptedFactory, sleep: RecordingSleep) -> None:
    with scripted(malformed_args=1) as base_url:
        response = asyncio.run(complete_once(provider(base_url, sleep)))
    (call,) = response.tool_calls
    assert response.retries == 0
    assert call.name == "get_order" and call.arguments == '{"order_id":"A-1001"'
    with pytest.raises(json.JSONDecodeError):
        json.loads(call.arguments)
    parsed = CallId.parse(call.id)
    assert parsed is not None and parsed.phase is Phase.FAULT


def test_unknown_tool_name_is_passed_through(scripted: ScriptedFactory, sleep: RecordingSleep) -> None:
    with scripted(unknown_tool=1) as base_url:
        response = asyncio.run(complete_once(provider(base_url, sleep)))
    (call,) = response.tool_calls
    assert call.name == "nonexistent_get_order"
    assert get_world("order").tool(call.name) is None
    assert json.loads(call.arguments) == {"order_id": "A-1001"}


def test_context_length_error_maps_to_context_window_exceeded(scripted: ScriptedFactory, sleep: RecordingSleep) -> None:
    with scripted(fail_context_length=1) as base_url:
        failure = fail(provider(base_url, sleep))
        stats = fetch_stats(base_url)
    assert failure.reason == "context_window_exceeded"
    assert failure.retries == 0 and stats["requests"] == 1 and sleep.waits == []
    assert failure.status_code == 400 and "maximum context length" in failure.message


def test_response_without_choices_is_provider_error(scripted: ScriptedFactory, sleep: RecordingSleep) -> None:
    with scripted(no_choices=1) as base_url:
        failure = fail(provider(base_url, sleep))
    assert failure.reason == "provider_error" and "no choices" in failure.message and failure.retries == 0


def test_bad_request_is_not_retried(scripted: ScriptedFactory, sleep: RecordingSleep) -> None:
    async def go(base_url: str) -> None:
        async with provider(base_url, sleep) as p:
            await p.complete([{"content": "no role"}], None)

    with scripted() as base_url, pytest.raises(ProviderFailure) as caught:
        asyncio.run(go(base_url))
    assert caught.value.reason == "provider_error" and caught.value.retries == 0
    assert caught.value.status_code == 400 and "role" in caught.value.message


def test_unrecognised_task_is_a_provider_error(scripted: ScriptedFactory, sleep: RecordingSleep) -> None:
    async def go(base_url: str) -> None:
        async with provider(base_url, sleep) as p:
            await p.complete([{"role": "user", "content": "something else"}], TOOLS)

    with scripted() as base_url, pytest.raises(ProviderFailure) as caught:
        asyncio.run(go(base_url))
    assert "no loaded task" in caught.value.message and caught.value.retries == 0


def test_retry_after_longer_than_allowed_gives_up_without_waiting(
    scripted: ScriptedFactory, sleep: RecordingSleep
) -> None:
    with scripted(fail_429="all", retry_after=500) as base_url:
        failure = fail(provider(base_url, sleep))
    assert failure.reason == "provider_error" and failure.retries == 0 and sleep.waits == []
    assert failure.status_code == 429


def test_retry_after_beyond_the_total_budget_gives_up(scripted: ScriptedFactory, sleep: RecordingSleep) -> None:
    policy = RetryPolicy(max_attempts=5, max_total_s=5.0)
    with scripted(fail_429="all", retry_after=10) as base_url:
        failure = fail(provider(base_url, sleep, retry=policy))
    assert failure.retries == 0 and sleep.waits == []


def test_the_total_budget_counts_the_first_attempt_too(scripted: ScriptedFactory, sleep: RecordingSleep) -> None:
    # the first attempt takes 1.2 s and fails with a 500; the backoff (1 s) would end past the 2 s budget counted
    # from that attempt's start (not from the retry machinery's, which begins only after it failed)
    policy = RetryPolicy(max_attempts=5, max_total_s=2.0, initial_backoff_s=1.0, jitter_s=0.0)
    with scripted(fail_500="1", slow="1", slow_ms=1200) as base_url:
        failure = fail(provider(base_url, sleep, retry=policy))
    assert failure.status_code == 500 and failure.retries == 0 and sleep.waits == []
    with scripted(fail_500="1") as base_url:  # the same failure, fast: retried after the backoff
        response = asyncio.run(complete_once(provider(base_url, sleep, retry=policy)))
    assert response.retries == 1 and sleep.waits == [1.0]


def test_many_concurrent_calls_on_one_provider(scripted: ScriptedFactory, sleep: RecordingSleep) -> None:
    async def go(base_url: str) -> list[ProviderResponse]:
        async with provider(base_url, sleep) as p:
            return await asyncio.gather(*(p.complete(first_messages(TASK), TOOLS) for _ in range(32)))

    with scripted(latency_ms=20) as base_url:
        responses = asyncio.run(go(base_url))
        stats = fetch_stats(base_url)
    assert len(responses) == 32 and all(r.tool_calls and r.retries == 0 for r in responses)
    assert stats["requests"] == 32
    assert stats["max_in_flight"] > 1  # served concurrently, not one after another


def test_models_endpoint_lists_the_policy(scripted: ScriptedFactory) -> None:
    async def go(base_url: str) -> list[str]:
        async with openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0) as client:
            page = await client.models.list()
            return [m.id for m in page.data]

    with scripted(policy="context_trusting") as base_url:
        assert asyncio.run(go(base_url)) == ["scripted-context_trusting"]


def test_provider_settings_need_a_model() -> None:
    with pytest.raises(ValueError, match="model"):
        OpenAIProvider(model="")
    with pytest.raises(ValueError, match="timeout"):
        OpenAIProvider(model="m", timeout_s=0)


# ---- a recording server: what is sent, and what comes back verbatim -------------------------------------


class _Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    bodies: list[dict[str, Any]]
    headers_seen: list[dict[str, str]]
    targets: list[str]
    reply: tuple[int, dict[str, Any]]

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        type(self).bodies.append(json.loads(self.rfile.read(length)))
        type(self).headers_seen.append({k.lower(): v for k, v in self.headers.items()})
        type(self).targets.append(self.path)
        status, payload = type(self).reply
        payload = json.loads(json.dumps(payload).replace("$AUTH", self.headers.get("Authorization") or ""))
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "echo-model",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
    "usage": {
        "prompt_tokens": 100,
        "completion_tokens": 7,
        "total_tokens": 107,
        "prompt_tokens_details": {"cached_tokens": 64},
    },
}


@pytest.fixture
def recorder() -> Iterator[tuple[str, type[_Recorder]]]:
    handler = type(
        "Recorder", (_Recorder,), {"bodies": [], "headers_seen": [], "targets": [], "reply": (200, COMPLETION)}
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", handler
    server.shutdown()
    server.server_close()


def test_request_carries_settings_and_cached_tokens_are_read(
    recorder: tuple[str, type[_Recorder]], sleep: RecordingSleep
) -> None:
    base_url, handler = recorder
    p = OpenAIProvider(
        base_url=base_url, model="agent-model", api_key=KEY, temperature=0.0, seed=11, max_tokens=256, sleep=sleep
    )
    response = asyncio.run(complete_once(p, seed=5, model="summary-model"))
    (body,) = handler.bodies
    assert body["model"] == "summary-model" and body["seed"] == 5  # per-call overrides win
    assert body["temperature"] == 0.0 and body["max_tokens"] == 256
    assert body["tools"] == TOOLS and body["messages"] == first_messages(TASK)
    assert "stream" not in body or body["stream"] is False
    assert handler.headers_seen[0]["authorization"] == f"Bearer {KEY}"
    assert response.content == "hello" and response.tool_calls == [] and response.finish_reason == "stop"
    assert response.usage is not None
    assert (response.usage.prompt_tokens, response.usage.completion_tokens, response.usage.cached_tokens) == (
        100,
        7,
        64,
    )
    assert response.model == "echo-model"


def test_requests_go_through_the_proxy_the_environment_names_unless_no_proxy_exempts_the_host(
    recorder: tuple[str, type[_Recorder]], sleep: RecordingSleep, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy_url, handler = recorder  # the recording server stands in for the proxy: it gets the absolute URL
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy_url.removesuffix("/v1"))
    p = OpenAIProvider(base_url="http://api.endpoint.test/v1", model="m", api_key=KEY, sleep=sleep)
    response = asyncio.run(complete_once(p))
    assert response.content == "hello"
    assert handler.targets == ["http://api.endpoint.test/v1/chat/completions"]
    monkeypatch.setenv("NO_PROXY", "api.endpoint.test")
    direct = OpenAIProvider(base_url="http://api.endpoint.test/v1", model="m", api_key=KEY, sleep=sleep)
    assert direct._proxy_for("http://api.endpoint.test/v1/chat/completions") == (None, None)


def test_defaults_omit_unset_options_and_tools(recorder: tuple[str, type[_Recorder]], sleep: RecordingSleep) -> None:
    base_url, handler = recorder
    p = OpenAIProvider(base_url=base_url, model="m", temperature=None, sleep=sleep)

    async def go() -> None:
        async with p:
            await p.complete([{"role": "user", "content": "hi"}], None)

    asyncio.run(go())
    (body,) = handler.bodies
    assert set(body) == {"model", "messages"}
    assert handler.headers_seen[0]["authorization"] == "Bearer not-needed"  # placeholder for local endpoints


def test_context_error_phrased_by_message_only_is_recognised(
    recorder: tuple[str, type[_Recorder]], sleep: RecordingSleep
) -> None:
    base_url, handler = recorder
    handler.reply = (400, {"error": {"message": "This model's maximum context length is 4096 tokens.", "code": None}})
    failure = fail(provider(base_url, sleep))
    assert failure.reason == "context_window_exceeded" and failure.retries == 0


def test_llama_cpp_style_context_error_is_recognised(
    recorder: tuple[str, type[_Recorder]], sleep: RecordingSleep
) -> None:
    base_url, handler = recorder
    handler.reply = (
        400,
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size",
                "type": "exceed_context_size_error",
            }
        },
    )
    assert fail(provider(base_url, sleep)).reason == "context_window_exceeded"


def test_api_key_never_appears_in_reprs_logs_or_exceptions(
    recorder: tuple[str, type[_Recorder]], sleep: RecordingSleep, caplog: pytest.LogCaptureFixture
) -> None:
    base_url, handler = recorder
    caplog.set_level(logging.DEBUG)
    p = provider(base_url, sleep)
    assert KEY not in repr(p) and KEY not in str(p) and "***" in repr(p)

    # an endpoint that echoes the key back in its error message (some do)
    handler.reply = (401, {"error": {"message": "Incorrect API key provided: $AUTH", "code": "invalid_api_key"}})
    failures = [fail(p)]
    handler.reply = (503, {"error": {"message": "overloaded, key $AUTH", "code": None}})
    failures.append(fail(provider(base_url, sleep)))
    # nothing listening: a connection error
    failures.append(
        fail(provider("http://127.0.0.1:9/v1", sleep, retry=RetryPolicy(max_attempts=2, initial_backoff_s=0)))
    )

    assert failures[0].status_code == 401 and "[REDACTED]" in failures[0].message
    assert failures[1].retries == 3
    for failure in failures:
        rendered = "".join(traceback.format_exception(failure))
        for text in (str(failure), repr(failure), failure.message, rendered):
            assert KEY not in text
    assert caplog.records, "retries should have been logged"
    for record in caplog.records:
        assert KEY not in record.getMessage()


def _jitter(waits: list[float]) -> list[float]:
    """The random part of each backoff wait (tenacity adds up to jitter_s=0.25 seconds)."""
    bases = [0.5 * 2**i for i in range(len(waits))]
    jitter = [w - b for w, b in zip(waits, bases, strict=True)]
    assert all(0 <= j <= 0.25 for j in jitter), waits
    return jitter


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"<html>502 Bad Gateway</html>", "a body that is not JSON"),
        (b"[1, 2]", "a JSON body that is not an object"),
        (b'{"choices": [{"index": 0, "message": null}]}', "a choice without a message"),
        (b'{"choices": [{"message": {"tool_calls": ["x"]}}]}', "tool_calls[0] that is not an object"),
    ],
)
def test_a_malformed_200_body_is_a_provider_error(sleep: RecordingSleep, body: bytes, why: str) -> None:
    with RawEndpoint([body]) as endpoint:
        failure = fail(provider(endpoint.base_url, sleep))
    assert failure.reason == "provider_error"
    assert why in failure.message


@pytest.mark.parametrize(
    "usage",
    [
        {},
        {"prompt_tokens": -100, "completion_tokens": -5},
        {"prompt_tokens": "12", "completion_tokens": 3},
        {"prompt_tokens": 10**30, "completion_tokens": 1},
        {"prompt_tokens": 1.5, "completion_tokens": 1},
        {"prompt_tokens": True, "completion_tokens": 1},
        {"prompt_tokens": 5},
    ],
)
def test_usage_that_is_not_a_count_is_unknown_never_zero(usage: dict[str, Any]) -> None:
    """Unknown usage leaves the episode's totals incomplete (an unknown cost); 0 would understate them silently."""
    assert usage_of({"usage": usage}) is None


def test_a_whole_number_written_as_a_float_is_a_count() -> None:
    usage = usage_of({"usage": {"prompt_tokens": 1158.0, "completion_tokens": 7}})
    assert usage is not None and usage.prompt_tokens == 1158 and type(usage.prompt_tokens) is int


def test_a_key_with_a_line_break_is_refused_when_the_provider_is_built() -> None:
    with pytest.raises(ValueError, match="line break") as caught:
        OpenAIProvider(model="m", base_url="http://127.0.0.1:9/v1", api_key="sk-abc\r\n")
    assert "sk-abc" not in str(caught.value)


_GOOD = completion({"content": "A long enough reply that the body's start looks like any good completion. " * 4})


@pytest.mark.parametrize(
    ("body", "why"),
    [
        # a whole completion, then more: its start is a good completion, so the start alone says nothing
        (_GOOD + b"\n{}", f"Extra data at character {len(_GOOD) + 2} of {len(_GOOD) + 3}; there it reads "),
        # cut short (a gzip body that ended early decodes to this)
        (_GOOD[:-30], f"where the body ends, after {len(_GOOD) - 30} characters: it is cut short; it ends "),
        # Latin-1, not UTF-8
        (
            b'{"choices": [{"message": {"role": "assistant", "content": "caf\xe9"}}]}',
            "byte 63 of 68, 0xe9, is not UTF-8",
        ),
        (b"<html>502 Bad Gateway</html>", "(Expecting value at character 1 of 28)"),
    ],
)
def test_a_body_that_is_not_json_says_where_and_why(sleep: RecordingSleep, body: bytes, why: str) -> None:
    with RawEndpoint([body]) as endpoint:
        failure = fail(provider(endpoint.base_url, sleep))
    assert failure.reason == "provider_error" and "a body that is not JSON (" in failure.message
    assert why in failure.message, failure.message
