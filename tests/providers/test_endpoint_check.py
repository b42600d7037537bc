"""The endpoint check (``OpenAIProvider.preflight``) against real loopback servers that misbehave: the scripted
server with its whole-server faults (a missing /v1, a rejected key, a silent socket, a hang after /models, tools
refused, an outage), each refused with a message that names the problem, within the given timeout."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from contextdelta.providers import NO_RETRY, OpenAIProvider, ProviderFailure
from contextdelta.testing import fetch_stats
from tests.providers.conftest import RawEndpoint, ScriptedFactory, completion
from tests.testing.episode_loop import first_messages, fixture_tasks

KEY = "sk-test-SECRET-0123456789abcdef"


async def _no_wait(seconds: float) -> None:
    """Retries of the check are counted, never waited for."""


def check(base_url: str, *, timeout_s: float = 5.0, **options: Any) -> str | None:
    options.setdefault("api_key", KEY)
    options.setdefault("sleep", _no_wait)
    provider = OpenAIProvider(base_url=base_url, model="scripted-oracle", timeout_s=timeout_s, **options)

    async def go() -> str | None:
        async with provider:
            return await provider.preflight()

    return asyncio.run(go())


def test_a_working_endpoint_passes_and_the_check_is_not_numbered(scripted: ScriptedFactory) -> None:
    with scripted(fail_500="first:1") as url:  # request 1 is the run's first, not the check's
        assert check(url) is None
        stats = fetch_stats(url)
    assert (stats["requests"], stats["endpoint_checks"], stats["faults"]) == (0, 1, {})


def test_a_base_url_without_v1_is_refused_with_the_fix(scripted: ScriptedFactory) -> None:
    with scripted() as url:
        root = url.removesuffix("/v1")
        problem = check(root)
    assert problem is not None
    assert f"{root}/models answered HTTP 404 while {root}/v1/models answers: did you mean --base-url {root}/v1" in (
        problem
    )


def test_a_server_that_lists_no_models_goes_on_to_the_tool_check(scripted: ScriptedFactory) -> None:
    with scripted(no_models=True) as url:
        assert check(url) is None


def test_a_rejected_key_is_refused_and_never_echoed(scripted: ScriptedFactory) -> None:
    with scripted(require_api_key="the-right-key") as url:
        problem = check(url)
        assert check(url, api_key="the-right-key") is None
    assert problem is not None and "refused the API key (HTTP 401)" in problem and KEY not in problem


@pytest.mark.parametrize("status", [401, 403])
def test_a_key_kept_to_chat_completions_passes_though_models_refuses_it(status: int) -> None:
    # a gateway whose key may call chat completions but not list models: the chat check is the word on the key
    with RawEndpoint([completion({"content": "ok"})]) as endpoint:
        endpoint.server.RequestHandlerClass.do_GET = lambda handler: handler.send_error(status)  # type: ignore[attr-defined]
        assert check(endpoint.base_url) is None


def test_an_endpoint_that_rejects_tools_is_refused_naming_them(scripted: ScriptedFactory) -> None:
    with scripted(reject_tools=True) as url:
        problem = check(url)
    assert problem is not None
    assert "rejected a minimal chat completion that carries `tools` (HTTP 400" in problem
    assert "--enable-auto-tool-choice" in problem  # the endpoint's own reason is passed on


@pytest.mark.slow
def test_a_silent_socket_is_refused_within_the_timeout(scripted: ScriptedFactory) -> None:
    with scripted(silent=True) as url:
        problem = check(url, timeout_s=0.5)
    assert problem is not None and "GET /models did not answer within 0.5 s (--timeout-s)" in problem


@pytest.mark.slow
def test_a_hang_after_models_is_refused_within_the_timeout(scripted: ScriptedFactory) -> None:
    with scripted(hang="all") as url:
        problem = check(url, timeout_s=0.5)
    assert problem is not None
    assert "answered GET /models but not a chat completion within 0.5 s (--timeout-s)" in problem


def test_an_outage_is_refused_and_its_end_lets_the_check_pass(scripted: ScriptedFactory) -> None:
    with scripted(outage_after=1, outage_s=3600) as url:
        assert check(url) is None  # the outage starts with the first numbered request
        provider = OpenAIProvider(base_url=url, model="scripted-oracle", timeout_s=5, retry=NO_RETRY)

        async def one() -> str:
            async with provider:
                try:
                    await provider.complete([{"role": "user", "content": "hi"}], None)
                except ProviderFailure as exc:
                    return exc.message
            return "answered"

        assert "HTTP 503" in asyncio.run(one())
        problem = check(url)
    assert problem is not None and "failed a minimal chat completion with tools (HTTP 503" in problem


def test_an_unreachable_endpoint_is_refused() -> None:
    problem = check("http://127.0.0.1:9/v1")
    assert problem is not None and problem.startswith("cannot reach http://127.0.0.1:9/v1")


def test_latency_is_the_attempt_on_the_wire_and_the_wait_is_apart(scripted: ScriptedFactory) -> None:
    with scripted(latency_ms=50) as url:
        provider = OpenAIProvider(base_url=url, model="scripted-oracle", timeout_s=5)

        async def one() -> tuple[float, float, float]:
            async with provider:
                response = await provider.complete(first_messages(fixture_tasks()["fixture-mug-refund"]), None)
            assert response.elapsed_s is not None
            return response.latency_s, response.queue_s, response.elapsed_s

        latency, queued, elapsed = asyncio.run(one())
    assert latency >= 0.05 and queued >= 0.0 and elapsed >= latency + queued


REASONING_400 = {
    "temperature": {
        "message": "Unsupported value: 'temperature' does not support 0.0 with this model. Only the default (1) value "
        "is supported.",
        "type": "invalid_request_error",
        "param": "temperature",
        "code": "unsupported_value",
    },
    "max_tokens": {  # no `param`: the message alone names it
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
        "'max_completion_tokens' instead.",
        "type": "invalid_request_error",
        "code": "unsupported_parameter",
    },
}


@pytest.mark.parametrize(("refused", "fix"), [("temperature", "--temperature"), ("max_tokens", "--max-tokens")])
def test_a_refused_request_setting_is_named_with_its_flag_not_blamed_on_tools(refused: str, fix: str) -> None:
    """A reasoning model answers 400 to ``temperature: 0`` or ``max_tokens``: the check names that setting and the
    flag that changes it, instead of telling the user to enable tool calling."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Reasoning(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _reply(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._reply(200, {"object": "list", "data": [{"id": "scripted-oracle", "object": "model"}]})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._reply(400, {"error": REASONING_400[refused]})

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Reasoning)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        problem = check(f"http://127.0.0.1:{server.server_address[1]}/v1", temperature=0.0, max_tokens=64)
    finally:
        server.shutdown()
        server.server_close()
    assert problem is not None
    assert f"rejected the request's `{refused}` (HTTP 400" in problem and fix in problem, problem
    assert "tool calling" not in problem


@pytest.mark.parametrize(
    ("fault", "advice"),
    [
        ({"fail_429": "all", "retry_after": 30}, "the endpoint is rate-limiting this key; wait and run again"),
        ({"fail_500": "all"}, "the endpoint is failing; wait for it to recover and run again"),
    ],
)
def test_a_rate_limited_or_failing_endpoint_is_refused_with_what_to_do(
    scripted: ScriptedFactory, fault: dict[str, Any], advice: str
) -> None:
    """Not left at the bare status (the run-benchmark line after it would only say to check the base URL)."""
    with scripted(**fault) as url:
        problem = check(url)
    assert problem is not None and advice in problem


class _Flaky:
    """A loopback endpoint whose first ``failures`` chat completions answer ``status`` (with ``headers``), then
    a tool-less chat completion; GET /models answers a list."""

    def __init__(self, failures: int, status: int, headers: dict[str, str] | None = None) -> None:
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.posts = 0
        flaky = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _reply(self, code: int, payload: dict[str, Any], extra: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                for name, value in (extra or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._reply(200, {"object": "list", "data": [{"id": "scripted-oracle", "object": "model"}]})

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                flaky.posts += 1
                if flaky.posts <= failures:
                    self._reply(status, {"error": {"message": "try later", "type": "server_error"}}, headers)
                    return
                message = {"role": "assistant", "content": "ok"}
                choice = {"index": 0, "message": message, "finish_reason": "stop"}
                self._reply(
                    200, {"id": "c", "object": "chat.completion", "model": "scripted-oracle", "choices": [choice]}
                )

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize(
    ("status", "headers"), [(429, {"Retry-After": "2"}), (502, None), (503, {"Retry-After": "1"}), (408, None)]
)
def test_a_transient_refusal_of_the_check_is_retried_as_a_call_is(
    status: int, headers: dict[str, str] | None, sleep: Any
) -> None:
    """One 429/502/503 at start must not refuse a whole run: the check retries like a run's calls, honouring
    Retry-After."""
    flaky = _Flaky(2, status, headers)
    try:
        problem = check(flaky.url, sleep=sleep)
    finally:
        flaky.close()
    assert problem is None
    assert flaky.posts == 3
    if headers:
        assert sleep.waits == [float(headers["Retry-After"])] * 2


def test_a_persistent_refusal_is_refused_after_the_retries_without_blaming_the_url(sleep: Any) -> None:
    from contextdelta.providers import EndpointBusy, RetryPolicy

    flaky = _Flaky(1000, 503)
    try:
        problem = check(flaky.url, sleep=sleep, retry=RetryPolicy(max_attempts=3))
    finally:
        flaky.close()
    assert isinstance(problem, EndpointBusy)
    assert "HTTP 503" in problem and "gave up after 3 attempts" in problem and "wait for it to recover" in problem
    assert flaky.posts == 3


def test_a_retry_after_past_the_bound_is_refused_at_once(sleep: Any) -> None:
    flaky = _Flaky(1000, 429, {"Retry-After": "3600"})
    try:
        problem = check(flaky.url, sleep=sleep)
    finally:
        flaky.close()
    assert problem is not None and "asked to wait 3600 s (Retry-After)" in problem and "rate-limiting" in problem
    assert flaky.posts == 1 and sleep.waits == []


def test_a_client_error_is_not_retried(sleep: Any) -> None:
    flaky = _Flaky(1000, 404)
    try:
        problem = check(flaky.url, sleep=sleep)
    finally:
        flaky.close()
    assert problem is not None and "check --base-url" in problem and flaky.posts == 1


def test_the_summary_model_check_retries_a_transient_refusal_too(sleep: Any) -> None:
    flaky = _Flaky(1, 503, {"Retry-After": "1"})
    provider = OpenAIProvider(base_url=flaky.url, model="scripted-oracle", api_key=KEY, timeout_s=5, sleep=sleep)

    async def go() -> str | None:
        async with provider:
            return await provider.check_summary_model("summary-model")

    try:
        problem = asyncio.run(go())
    finally:
        flaky.close()
    assert problem is None and flaky.posts == 2 and sleep.waits == [1.0]
