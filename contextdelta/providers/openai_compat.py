"""The provider for any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, llama.cpp, the scripted server).

The ``openai`` client's own retries are off (``max_retries=0``): retries happen here, with tenacity, so that
every attempt is counted and the policy is the same for every endpoint (see :mod:`contextdelta.providers.retry`).
The API key is held as a secret: it is never part of a repr, a log line or an exception message. A base URL
with credentials (``user:password@``, a query string) is refused. Whatever an endpoint echoes back (the key, an
``Authorization`` or ``api-key`` header, anything key-shaped) is redacted from every text of a response before
the response leaves this module, so no run file, report, log line or trace-store row can hold it.

HTTP goes out through aiohttp, which costs a fraction of the CPU per call of the ``openai`` client's HTTP stack
(benchmarks/harness_overhead.py); failures are named as the ``openai`` library names them
(:mod:`contextdelta.providers.errors`). HTTP runs on the provider's own I/O thread (an event loop that does nothing
else), and each attempt is timed there: ``latency_s`` is time on the wire, not the time the caller's event loop
took to come back to the episode (with many episodes on one loop, a reply can sit read for a while before its
episode runs again). The wait before a request starts on that loop is ``queue_s``, recorded apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.metadata
import json
import logging
import os
import re
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import aiohttp
import certifi
import yarl
from aiohttp.helpers import get_env_proxy_for_url
from pydantic import SecretStr
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception

from contextdelta.canonical import json_dumps_function, json_type
from contextdelta.providers.base import (
    SUMMARY_MODEL_CHECK,
    FailedAttempt,
    ProviderFailure,
    ProviderResponse,
    ToolCallRequest,
    Usage,
    endpoint_check_request,
)
from contextdelta.providers.bodies import CappedBody, NestedTooDeeply, NumberTooLong, load_json_body
from contextdelta.providers.errors import (
    AccessRefusal,
    EndpointBusy,
    EndpointCertificateError,
    EndpointConnectionError,
    EndpointError,
    EndpointRedirectedAsGet,
    EndpointRedirectLoop,
    EndpointResponseTooLarge,
    EndpointStatusError,
    EndpointTimeout,
    KeyRefused,
    one_line,
    refusal_fix,
    refusal_what,
    shorten,
    status_refusal,
)
from contextdelta.providers.limits import CallGate, estimate_tokens
from contextdelta.providers.retry import PERMANENT_5XX, RetryPolicy, is_retryable, retry_after_of
from contextdelta.redaction import Redactor
from contextdelta.settings import check_base_url, header_safe, redact_url

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""Where requests go without a base URL (nor ``OPENAI_BASE_URL``), as with the ``openai`` client."""

PLACEHOLDER_API_KEY = "not-needed"
"""Sent when no key is configured: local OpenAI-compatible servers accept any key, but the client needs one."""

_CONTEXT_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error", "context_window_exceeded"})
_CONTEXT_MESSAGE = re.compile(
    r"maximum context length|context[ _]length|context window|exceeds? the available context size"
    r"|prompt is too long|too many tokens",
    re.IGNORECASE,
)


INVALID_RESPONSE = "InvalidResponseError"
"""The error name of an attempt answered with HTTP 200 and no usable chat completion (no choices, not JSON, ...)."""

BODY_EXCERPT_CHARS = 200
"""How much of a body that is not a completion its failure quotes, from its start."""

MAX_TOOL_CALLS_PER_REPLY = 256
"""The most tool calls one reply may make (models make a handful in parallel): a broken server's reply of tens of
thousands would each run against the world and be recorded, for minutes and gigabytes, within one step."""

T = TypeVar("T")


class _IoLoop:
    """An event loop on a daemon thread of its own, started on first use: the provider's HTTP runs there."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="contextdelta-provider-io", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    @property
    def started(self) -> bool:
        return self._loop is not None

    async def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the I/O loop and wait for it here; cancelling the caller cancels it there too.

        One wake-up of each loop per call (``run_coroutine_threadsafe`` and ``wrap_future`` chain a
        ``concurrent.futures.Future`` in between, at about half again the CPU)."""
        io = self._running_loop()
        caller = asyncio.get_running_loop()
        done: asyncio.Future[T] = caller.create_future()
        running: list[asyncio.Task[T]] = []

        def settle(task: asyncio.Task[T]) -> None:  # on the caller's loop
            if done.cancelled():
                return
            if task.cancelled():
                done.cancel()
            elif (error := task.exception()) is not None:
                done.set_exception(error)
            else:
                done.set_result(task.result())

        def start() -> None:  # on the I/O loop
            if done.cancelled():  # the caller gave up before the request started
                coroutine.close()
                return
            task = io.create_task(coroutine)
            running.append(task)
            task.add_done_callback(report)

        def report(task: asyncio.Task[T]) -> None:  # on the I/O loop
            with contextlib.suppress(RuntimeError):  # the caller's loop closed meanwhile: nobody is waiting
                caller.call_soon_threadsafe(settle, task)

        io.call_soon_threadsafe(start)
        try:
            return await done
        except asyncio.CancelledError:
            io.call_soon_threadsafe(lambda: [task.cancel() for task in running])
            raise

    def stop(self) -> None:
        """Stop the loop and its thread (idempotent)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        if not thread.is_alive():
            loop.close()


class OpenAIProvider:
    """A ChatProvider for any OpenAI-compatible chat-completions endpoint, over aiohttp.

    Its HTTP connection pool lives on the provider's own I/O thread, so one instance serves any number of event
    loops in turn (the endpoint check and then the run). Close it with :meth:`aclose` or ``async with``.
    Concurrent ``complete`` calls on one instance are safe.
    """

    name = "openai"
    is_mock = False

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | SecretStr | None = None,
        temperature: float | None = 0.0,
        seed: int | None = None,
        max_tokens: int | None = None,
        timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        sleep: Sleep | None = None,
        gate: CallGate | None = None,
    ) -> None:
        """Configure the endpoint; no request is made until :meth:`complete`.

        ``timeout_s`` bounds each attempt; ``retry`` bounds the attempts; ``sleep`` waits between attempts
        (tests pass a recorder here instead of real sleeping); ``gate`` (the endpoint's shared rate limiter, see
        :mod:`contextdelta.providers.limits`) is passed by every attempt, retries included.
        """
        if not model:
            raise ValueError("a model name is required")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        check_base_url(base_url)
        self.model = model
        self.base_url = base_url
        self.temperature = temperature
        self.seed = seed
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy.for_timeout(timeout_s)
        self._sleep: Sleep = sleep or asyncio.sleep
        self.gate = gate
        secret = api_key if isinstance(api_key, SecretStr) else SecretStr(api_key or "")
        header_safe(secret)  # a key with a line break would fail every request at the HTTP client
        self._api_key = secret
        self._redactor = Redactor([secret.get_secret_value()])
        # as the openai client: no base URL means OPENAI_BASE_URL, else OpenAI's own endpoint
        self._base = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self._headers = {
            "Authorization": f"Bearer {secret.get_secret_value() or PLACEHOLDER_API_KEY}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"contextdelta/{_version()}",
        }
        self._session: aiohttp.ClientSession | None = None  # created on the I/O loop, where it is used
        self._proxies: dict[str, tuple[yarl.URL | None, aiohttp.BasicAuth | None]] = {}
        self._io = _IoLoop()

    def __repr__(self) -> str:
        return (
            f"OpenAIProvider(model={self.model!r}, base_url={redact_url(self.base_url)!r}, "
            f"temperature={self.temperature!r}, seed={self.seed!r}, api_key={'***' if self._has_key else None})"
        )

    @property
    def _has_key(self) -> bool:
        return bool(self._api_key.get_secret_value())

    async def __aenter__(self) -> OpenAIProvider:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP connection pool and stop the I/O thread."""
        if self._io.started:
            await self._io.run(self._close_clients())
        self._io.stop()

    async def _close_clients(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def preflight(self, timeout_s: float | None = None) -> str | None:
        """Why this endpoint cannot serve a benchmark, or None when it can. Each request is bounded by
        ``timeout_s`` (default: the provider's per-call timeout, ``--timeout-s``).

        1. ``GET /models``: unreachable (connection refused, DNS, timeout) is refused; a 404 while
           ``<base URL>/v1/models`` answers is refused with "did you mean <base URL>/v1". Any other answer goes on
           (not every OpenAI-compatible server lists models, and a gateway may answer 401/403 to a key it keeps to
           chat completions: the chat check says whether the key is refused).
        2. One minimal chat completion carrying ``tools`` (:func:`endpoint_check_request`), with the model,
           temperature, seed and token cap the run sends: refused when it does not answer in time, the key or the
           model is refused, the endpoint rejects the request (it says why, e.g. that it does not take ``tools``),
           or the reply is not a chat completion. A 408, 429 or 5xx is retried as a run's calls are (the retry
           policy, ``Retry-After`` honoured up to its bound) and refused (an :class:`EndpointBusy`) only when it
           persists.
        """
        wait = self.timeout_s if timeout_s is None else timeout_s
        where = redact_url(self.base_url) or "the default OpenAI endpoint"
        problem = await self._io.run(self._check_models(where, wait))
        if problem is None:
            problem = await self._io.run(self._check_tools(where, wait))
        return problem

    async def _check_models(self, where: str, wait: float) -> str | None:
        try:
            await self._send("GET", f"{self._base}/models", None, wait)
        except EndpointTimeout:
            return f"cannot reach {where}: GET /models did not answer within {wait:g} s (--timeout-s)"
        except EndpointConnectionError as exc:
            return f"cannot reach {where}: {self._scrub(describe_error(exc))}"
        except EndpointResponseTooLarge as exc:
            return f"{where} answered GET /models with {exc.message}"
        except EndpointStatusError as exc:
            # a 401/403 here is not the last word on the key: a gateway may keep a key to chat completions alone,
            # and the chat check that follows refuses a key that is wrong there too
            if exc.status_code == 404 and await self._answers_under_v1(wait):
                suggestion = f"{where.rstrip('/')}/v1"
                return (
                    f"{where}/models answered HTTP 404 while {suggestion}/models answers: did you mean "
                    f"--base-url {suggestion} ?"
                )
        return None

    def _key_refused(self, where: str, status: int) -> KeyRefused:
        """The endpoint check's refusal of the key: the variables a key is read from (``OPENAI_API_KEY`` is the
        fallback of ``CONTEXTDELTA_API_KEY``, so a wrong one there is as likely), never the base URL, which answered."""
        fix = "set the endpoint's key in CONTEXTDELTA_API_KEY (or OPENAI_API_KEY, read when it is unset)"
        if not self._has_key:
            return KeyRefused(f"{where} asks for an API key (HTTP {status}) and none is set; {fix}")
        return KeyRefused(f"{where} refused the API key (HTTP {status}); {fix}")

    async def _answers_under_v1(self, wait: float) -> bool:
        if self._base.endswith("/v1"):
            return False
        try:
            await self._send("GET", f"{self._base}/v1/models", None, wait)
        except EndpointError:
            return False
        return True

    async def _check_tools(self, where: str, wait: float) -> str | None:
        messages, tools = endpoint_check_request()
        request = self._body(messages, tools)
        tries: list[int] = []
        try:
            body = await self._send_retrying("POST", self._chat_url, _encode(request), wait, tries)
        except EndpointTimeout:
            return (
                f"{where} answered GET /models but not a chat completion within {wait:g} s (--timeout-s); "
                "the endpoint is stalled or the model is still loading"
            )
        except EndpointConnectionError as exc:
            return f"cannot reach {where} for a chat completion: {self._scrub(describe_error(exc))}"
        except EndpointResponseTooLarge as exc:
            return f"{where} answered the endpoint check's chat completion with {exc.message}"
        except EndpointStatusError as exc:
            detail = self._scrub(describe_error(exc))
            # an access refusal, classified as a run's stop rule classifies one met mid-run (status_refusal)
            refusal = status_refusal(exc)
            if refusal in (AccessRefusal.KEY, AccessRefusal.PERMISSION):
                return self._key_refused(where, exc.status_code)
            if refusal is AccessRefusal.MODEL:
                return f"{where}/chat/completions answered {detail}; check --base-url and --model {self.model!r}"
            if refusal is AccessRefusal.QUOTA:  # not retried: waiting does not bring credit back
                return KeyRefused(f"{where} {refusal_what(refusal)} ({detail}); {refusal_fix(refusal, self.model)}")
            if exc.status_code in PERMANENT_5XX:  # a static file server, say: it takes no POST, now or later
                return f"{where} serves no chat completions: POST /chat/completions answered {detail}"
            if exc.status_code in (400, 422):
                refused = _refused_parameter(exc, request)
                if refused is not None:
                    return f"{where} rejected the request's `{refused}` ({detail}); {_PARAMETER_FIX[refused]}"
                return (
                    f"{where} rejected a minimal chat completion that carries `tools` ({detail}); the benchmark "
                    f"sends tools on every call, so model {self.model!r} must be served with tool calling enabled"
                )
            gave_up = self._gave_up(exc, len(tries))
            if exc.status_code == 429:
                return EndpointBusy(
                    f"{where} failed a minimal chat completion with tools ({detail}{gave_up}): the "
                    "endpoint is rate-limiting this key; wait and run again (--requests-per-minute / "
                    "--tokens-per-minute keep a run under a limit)"
                )
            if is_retryable(exc):  # 408, 5xx: but a 501 says no chat completions are served there, not "later"
                return EndpointBusy(
                    f"{where} failed a minimal chat completion with tools ({detail}{gave_up}): the "
                    "endpoint is failing; wait for it to recover and run again"
                )
            return f"{where} failed a minimal chat completion with tools ({detail})"
        try:
            self._response(body, 0.0, 0, 0.0)
        except ProviderFailure as exc:
            what = exc.message.removeprefix("the endpoint returned ")
            return f"{where} answered the endpoint check's chat completion with {what}"
        return None

    async def _send_retrying(
        self, method: str, url: str, body: bytes | None, timeout: float, tries: list[int]
    ) -> bytes:
        """:meth:`_send` for the endpoint check, retried as a run's calls are (the same policy: attempts, total time,
        ``Retry-After`` up to ``max_retry_after_s``) but only on an HTTP status that says "later" (408, 429, 5xx):
        one transient refusal at start must not refuse the run, while a wrong URL (connection refused) or a stalled
        endpoint (a timeout, already waited for) is said at once. Raises the last attempt's error; ``tries`` gets
        the number of attempts made."""
        retrying = AsyncRetrying(
            stop=self.retry.stop(started=time.monotonic()),
            wait=self.retry.wait(),
            retry=retry_if_exception(lambda e: isinstance(e, EndpointStatusError) and is_retryable(e)),
            sleep=self._sleep,
            before_sleep=self._log_check_retry,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                tries.append(1)
                content, _, _ = await self._send(method, url, body, timeout)
        return content

    def _gave_up(self, exc: EndpointStatusError, attempts: int) -> str:
        """Why the endpoint check stopped retrying a 408/429/5xx, as a clause for its message."""
        wait, longest = retry_after_of(exc), self.retry.max_retry_after_s
        if wait is not None and wait > longest:
            return f"; it asked to wait {wait:g} s (Retry-After), more than the {longest:g} s the check waits"
        return f"; gave up after {attempts} attempt{'s' if attempts != 1 else ''}"

    async def check_summary_model(self, model: str, timeout_s: float | None = None) -> str | None:
        """Why this endpoint cannot serve ``model`` as the summary model (``--summary-model``), or None when it can:
        one minimal chat completion without tools (a 408/429/5xx retried as :meth:`preflight` does), bounded by
        ``timeout_s`` (default ``--timeout-s``). Run after :meth:`preflight`, so that a summary model the endpoint
        does not serve is refused before any episode (each ``semantic_summary`` episode would otherwise run up to
        its first summary and fail there)."""
        wait = self.timeout_s if timeout_s is None else timeout_s
        where = redact_url(self.base_url) or "the default OpenAI endpoint"
        return await self._io.run(self._check_summary_model(where, model, wait))

    async def _check_summary_model(self, where: str, model: str, wait: float) -> str | None:
        messages = [{"role": "user", "content": SUMMARY_MODEL_CHECK}]
        fix = "check --summary-model / CONTEXTDELTA_SUMMARY_MODEL (default: the agent model)"
        tries: list[int] = []
        try:
            body = await self._send_retrying(
                "POST", self._chat_url, _encode(self._body(messages, None, model=model)), wait, tries
            )
        except EndpointTimeout:
            return f"{where} did not answer a chat completion for summary model {model!r} within {wait:g} s; {fix}"
        except EndpointError as exc:
            detail = self._scrub(describe_error(exc))
            if isinstance(exc, EndpointStatusError) and is_retryable(exc):
                return EndpointBusy(
                    f"{where} failed a chat completion for summary model {model!r} ({detail}"
                    f"{self._gave_up(exc, len(tries))}): the endpoint is busy or failing; wait and run again"
                )
            refusal = status_refusal(exc)
            if refusal is not None and refusal is not AccessRefusal.MODEL:  # the key or the account, not the name
                return KeyRefused(
                    f"{where} {refusal_what(refusal)} for summary model {model!r} ({detail}); "
                    f"{refusal_fix(refusal, model)}"
                )
            return f"{where} refused a chat completion for summary model {model!r} ({detail}); {fix}"
        try:
            self._response(body, 0.0, 0, 0.0)
        except ProviderFailure as exc:
            what = exc.message.removeprefix("the endpoint returned ")
            return f"{where} answered a chat completion for summary model {model!r} with {what}; {fix}"
        return None

    def _body(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        seed: int | None = None,
        model: str | None = None,
    ) -> dict[str, Any]:
        """The chat-completions request body: the same settings on every call (and on the endpoint check)."""
        request: dict[str, Any] = {"model": model or self.model, "messages": messages}
        if tools:
            request["tools"] = tools
        if self.temperature is not None:
            request["temperature"] = self.temperature
        chosen_seed = seed if seed is not None else self.seed
        if chosen_seed is not None:
            request["seed"] = chosen_seed
        if self.max_tokens is not None:
            request["max_tokens"] = self.max_tokens
        return request

    def _http(self) -> aiohttp.ClientSession:
        """The I/O loop's connection pool (no cap on connections: ``--concurrency`` and the limiter bound them;
        proxies and CA certificates from the environment, as the ``openai`` client takes them)."""
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=0, ssl=_ssl_context())
            # trust_env off: with it on, aiohttp reads the proxy variables and ~/.netrc in a worker thread on
            # every request (a fifth of the harness's CPU per call); the proxy is looked up once per URL instead
            self._session = aiohttp.ClientSession(connector=connector, headers=self._headers, trust_env=False)
        return self._session

    def _proxy_for(self, url: str) -> tuple[yarl.URL | None, aiohttp.BasicAuth | None]:
        """The proxy the environment names for ``url`` (``HTTPS_PROXY``, ``NO_PROXY``, credentials from
        ``~/.netrc``), as aiohttp's ``trust_env`` finds it, looked up once per URL."""
        found = self._proxies.get(url)
        if found is None:
            try:
                found = get_env_proxy_for_url(yarl.URL(url))
            except LookupError:
                found = (None, None)
            self._proxies[url] = found
        return found

    @property
    def _chat_url(self) -> str:
        return f"{self._base}/chat/completions"

    async def _send(self, method: str, url: str, body: bytes | None, timeout: float) -> tuple[bytes, float, float]:
        """One request, on the I/O loop: (response body, when the request went out, when its response was read).

        Raises EndpointStatusError for a status other than 2xx, EndpointTimeout when no whole response came within
        ``timeout`` seconds, EndpointConnectionError when the connection failed or closed early,
        EndpointResponseTooLarge for a body past MAX_RESPONSE_BYTES (reading stops there)."""
        session = self._http()
        proxy, proxy_auth = self._proxy_for(url)
        sent = time.perf_counter()
        limit = aiohttp.ClientTimeout(total=timeout)
        try:
            async with session.request(
                method, url, data=body, timeout=limit, proxy=proxy, proxy_auth=proxy_auth
            ) as response:
                if response.history and response.method != method:  # a POST redirected (301-303) became a GET
                    first, *later = response.history
                    target = later[0].url if later else response.url
                    raise EndpointRedirectedAsGet(
                        f"the endpoint answered the {method} with HTTP {first.status}, a redirect to {target}, "
                        f"which a client follows with a "
                        f"{response.method} without the request (that answered HTTP {response.status}); give "
                        "--base-url as the URL that answers, e.g. https:// where http:// redirects"
                    )
                # in chunks, so that a body past MAX_RESPONSE_BYTES is given up without being held whole
                capped = CappedBody(response.headers.get("Content-Length"))
                async for chunk in response.content.iter_any():
                    capped.add(chunk)
                content = capped.value()
                read = time.perf_counter()
                if not 200 <= response.status < 300:  # 4xx/5xx, and a 1xx/3xx left unfollowed (no Location)
                    raise EndpointStatusError(response.status, response.headers, content.decode("utf-8", "replace"))
        except aiohttp.TooManyRedirects as exc:
            raise EndpointRedirectLoop(
                f"the endpoint redirected {len(exc.history)} times without an answer (a redirect loop?), last to "
                f"{exc.request_info.real_url}; give --base-url as the URL that answers"
            ) from None
        except TimeoutError:
            raise EndpointTimeout(f"the request timed out: no whole response within {timeout:g} s") from None
        except aiohttp.ClientConnectorCertificateError as exc:
            problem = exc.certificate_error
            said = one_line(getattr(problem, "verify_message", None) or str(problem))
            raise EndpointCertificateError(
                f"Connection error. (the TLS certificate of {exc.host} is not trusted: {said}; for a certificate of "
                "your own CA, point SSL_CERT_FILE at that CA's certificate, a PEM file)"
            ) from exc
        except aiohttp.ClientResponseError as exc:
            # aiohttp's own reading of the response failed (a bad status line or header, data past the body, a body
            # it cannot decode): its status, 400, is aiohttp's code for that, never one the server sent
            said = one_line(exc.message)
            raise EndpointConnectionError(f"Connection error. (the response could not be read: {said})") from exc
        except aiohttp.ClientError as exc:
            said = one_line(str(exc))  # one line: aiohttp's payload errors span several
            raise EndpointConnectionError(f"Connection error. ({type(exc).__name__}: {said})") from exc
        return content, sent, read

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        *,
        seed: int | None = None,
        model: str | None = None,
    ) -> ProviderResponse:
        """One chat-completions call, retried per the retry policy.

        Raises ProviderFailure: ``context_window_exceeded`` when the endpoint says the prompt is too long,
        ``provider_error`` for a non-retryable error, exhausted retries, or a response without choices.
        """
        request = _encode(self._body(messages, tools, seed, model))
        started, clock = time.perf_counter(), time.monotonic()
        gate = self.gate
        estimate = (
            estimate_tokens(len(json.dumps(messages)) + len(json.dumps(tools or [])))
            if gate and gate.needs_tokens
            else 0
        )
        attempts = 1
        first: EndpointError | None = None
        failed: list[FailedAttempt] = []  # each failed attempt, as the step record of a failed call keeps it
        try:
            try:  # the first attempt goes out without the retry machinery, which only a retryable failure needs
                body, submitted, sent, read, ticket = await self._attempt(request, started, estimate, failed)
            except EndpointError as exc:
                if not is_retryable(exc):
                    raise
                first = exc
            if first is not None:
                retrying = AsyncRetrying(
                    stop=self.retry.stop(started=clock),  # the time budget counts from the first attempt
                    wait=self.retry.wait(),
                    retry=retry_if_exception(is_retryable),
                    sleep=self._sleep,
                    before_sleep=self._log_retry,
                    reraise=True,
                )
                attempts = 0
                async for attempt in retrying:
                    with attempt:
                        attempts += 1
                        if first is not None:  # tenacity's first attempt is the one that just failed
                            again, first = first, None
                            raise again
                        body, submitted, sent, read, ticket = await self._attempt(request, started, estimate, failed)
        except EndpointError as exc:
            raise self._failure(exc, attempts, time.perf_counter() - started, failed) from None
        try:
            response = self._response(body, read - sent, attempts - 1, time.perf_counter() - started)
        except ProviderFailure as failure:
            failure.attempts = [*failed, FailedAttempt(status_code=200, error=INVALID_RESPONSE, elapsed_s=read - sent)]
            if gate is not None:
                gate.release(ticket, 200, failure.usage.total_tokens - estimate if failure.usage is not None else 0)
            raise
        response.queue_s = max(0.0, sent - submitted)
        if gate is not None:
            used = response.usage.total_tokens if response.usage is not None else estimate
            gate.release(ticket, 200, used - estimate)
        return response

    # ---- internals ---------------------------------------------------------------------------------------

    async def _attempt(
        self, request: bytes, started: float, estimate: int, failed: list[FailedAttempt]
    ) -> tuple[bytes, float, float, float, int]:
        """One HTTP attempt, through the rate gate when there is one: (body, submitted, sent, read, gate ticket);
        the ticket goes back at once when the attempt fails, and the failure is added to ``failed``."""
        gate = self.gate
        ticket = await gate.acquire(estimate) if gate is not None else 0
        # an attempt never outlives the total budget (but always gets a moment to answer)
        remaining = self.retry.max_total_s - (time.perf_counter() - started)
        submitted = time.perf_counter()
        try:
            body, sent, read = await self._io.run(
                self._send("POST", self._chat_url, request, min(self.timeout_s, max(remaining, 0.5)))
            )
        except EndpointError as exc:
            failed.append(
                FailedAttempt(
                    status_code=exc.status_code if isinstance(exc, EndpointStatusError) else None,
                    error=exc.name,
                    code=self._scrub(one_line(exc.code))[:100]
                    if isinstance(exc, EndpointStatusError) and exc.code
                    else None,
                    elapsed_s=time.perf_counter() - submitted,
                )
            )
            if gate is not None:
                gate.release(ticket, exc.status_code if isinstance(exc, EndpointStatusError) else None, 0)
            raise
        except BaseException:
            if gate is not None:
                gate.release(ticket, None, 0)
            raise
        return body, submitted, sent, read, ticket

    def _response(self, body: bytes, latency: float, retries: int, elapsed: float) -> ProviderResponse:
        usage: Usage | None = None  # what a reply of the wrong shape reported it cost: it is spent all the same

        def fail(why: str) -> ProviderFailure:
            return ProviderFailure(
                "provider_error", f"the endpoint returned {why}", retries, elapsed_s=elapsed, usage=usage
            )

        try:
            completion = load_json_body(body)  # lone surrogates are U+FFFD from here on
        except (NestedTooDeeply, NumberTooLong) as exc:
            raise fail(str(exc)) from None
        except ValueError as exc:
            if not body.strip():
                raise fail("an empty body where a chat completion belongs") from None
            # redacted whole, then cut: a key cut in two would no longer be recognised as the key
            start = self._scrub(body.decode("utf-8", "replace"))[:BODY_EXCERPT_CHARS]
            if body.lstrip().startswith((b"data:", b"event:", b":")):
                raise fail(
                    f"a server-sent event stream instead of one JSON completion: {start!r}; the benchmark does not "
                    "stream, so serve the model with streaming off by default"
                ) from None
            raise fail(f"a body that is not JSON ({self._why_not_json(exc)}): {start!r}") from None
        if not isinstance(completion, dict):
            raise fail("a JSON body that is not an object")
        usage = usage_of(completion)
        choices = completion.get("choices")
        if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
            error = completion.get("error")
            if error is not None and not choices:  # an error sent with HTTP 200 (some gateways and local servers)
                said = error.get("message", error) if isinstance(error, dict) else error
                raise fail(f"an error instead of a completion (with HTTP 200): {self._scrub(one_line(str(said)))}")
            raise fail("a response with no choices")
        choice = choices[0]
        # an error met while the model was answering, sent with HTTP 200 beside the choice (OpenRouter: the choice's
        # `error`, finish_reason "error"): whatever the choice holds is cut short, never a reply to act on
        error = choice.get("error") or completion.get("error")
        if error or choice.get("finish_reason") == "error":  # "error": null (or "", {}) is no error
            said = error.get("message", error) if isinstance(error, dict) else error
            why = f": {self._scrub(one_line(str(said)))}" if said else ""
            raise fail(f"an error in place of the model's reply (with HTTP 200){why}")
        message = choice.get("message")
        if not isinstance(message, dict):
            raise fail("a choice without a message")
        clean = self._redactor.text
        calls: list[ToolCallRequest] = []
        tool_calls = message.get("tool_calls") or []
        if not tool_calls and message.get("function_call"):  # the API before tool_calls: read as no reply at all
            raise fail(
                "a legacy `function_call` instead of `tool_calls`; the benchmark sends `tools`, so serve the model "
                "with tool calling (tool_calls) enabled"
            )
        if not isinstance(tool_calls, list):
            raise fail(f"tool_calls that is {json_type(tool_calls)}, not a list")
        if len(tool_calls) > MAX_TOOL_CALLS_PER_REPLY:
            raise fail(
                f"{len(tool_calls)} tool calls in one reply, more than the {MAX_TOOL_CALLS_PER_REPLY} a step may make "
                "(MAX_TOOL_CALLS_PER_REPLY)"
            )
        for index, call in enumerate(tool_calls):
            if not isinstance(call, dict):
                raise fail(f"tool_calls[{index}] that is not an object")
            # a free-form ("custom") tool call's input is the raw argument text
            field, text = ("custom", "input") if call.get("type") == "custom" else ("function", "arguments")
            spec = call.get(field)
            if not isinstance(spec, dict):
                raise fail(f"tool_calls[{index}].{field} that is {json_type(spec)}, not an object")
            name, arguments = spec.get("name"), spec.get(text)
            if not isinstance(name, str):  # a missing or non-text name is no tool the world could answer
                raise fail(f"tool_calls[{index}].{field}.name that is {json_type(name)}, not a string")
            if not isinstance(arguments, str):
                # a value sent as JSON rather than as text is kept as its JSON text: the world answers a value
                # that is not an object as malformed arguments; only no arguments at all reads as none, {}
                arguments = "{}" if text not in spec else json.dumps(arguments)
            calls.append(
                ToolCallRequest(id=clean(_call_id(call.get("id"))), name=clean(name), arguments=clean(arguments))
            )
        content = message.get("content")
        refusal = message.get("refusal")
        if isinstance(content, list):  # content parts, [{"type": "text", "text": ...}]: their text, joined
            refusal = refusal or _refusal_of_parts(content)
            content = _text_of_parts(content)
        elif content is not None and not isinstance(content, str):
            raise fail(f"message.content that is {json_type(content)}, not a string")
        if refusal is not None and not isinstance(refusal, str):
            raise fail(f"message.refusal that is {json_type(refusal)}, not a string")
        model = completion.get("model")
        finish = choice.get("finish_reason")
        return ProviderResponse(
            content=clean(content) if isinstance(content, str) else None,
            refusal=clean(refusal) if refusal else None,
            tool_calls=calls,
            finish_reason=clean(finish) if isinstance(finish, str) else None,
            usage=usage,
            latency_s=latency,
            retries=retries,
            elapsed_s=elapsed,
            model=clean(model) if isinstance(model, str) else None,
            raw=self._redactor.json(completion),
        )

    def _failure(
        self, exc: EndpointError, attempts: int, elapsed: float, failed: list[FailedAttempt]
    ) -> ProviderFailure:
        retries = max(0, attempts - 1)
        status = exc.status_code if isinstance(exc, EndpointStatusError) else None
        description = self._scrub(describe_error(exc))
        if is_context_length_error(exc):
            return ProviderFailure(
                "context_window_exceeded",
                description,
                retries,
                status_code=status,
                elapsed_s=elapsed,
                attempts=failed,
            )
        if is_retryable(exc):
            gave_up = f"gave up after {attempts} attempt{'s' if attempts != 1 else ''}"
            wait, longest = retry_after_of(exc), self.retry.max_retry_after_s
            if wait is not None and wait > longest:
                gave_up = (
                    f"the endpoint asked to wait {wait:g} s (Retry-After), more than the {longest:g} s a call waits; "
                    f"{gave_up}"
                )
            elif wait is not None and elapsed + wait >= self.retry.max_total_s:
                gave_up = (
                    f"the endpoint asked to wait {wait:g} s (Retry-After), past the {self.retry.max_total_s:g} s a "
                    f"call may take with its retries; {gave_up}"
                )
            description = f"{description} ({gave_up})"
        refusal = status_refusal(exc)
        return ProviderFailure(
            "provider_error",
            description,
            retries,
            status_code=status,
            elapsed_s=elapsed,
            attempts=failed,
            refusal=refusal.value if refusal is not None else None,
        )

    def _why_not_json(self, exc: ValueError) -> str:
        """Why a body is not JSON, for the failure: where the decoder stopped and what it said, and the text there
        when it lies past the excerpt the failure shows (a whole completion followed by more, a body cut short, a
        gzip body that ended early): the start of such a body looks like a good one."""
        if isinstance(exc, UnicodeDecodeError):
            return f"byte {exc.start + 1} of {len(exc.object)}, 0x{exc.object[exc.start]:02x}, is not UTF-8"
        if not isinstance(exc, json.JSONDecodeError):
            return self._scrub(one_line(str(exc)))
        if exc.pos >= len(exc.doc):
            where = f"{exc.msg} where the body ends, after {len(exc.doc)} characters: it is cut short"
        else:
            where = f"{exc.msg} at character {exc.pos + 1} of {len(exc.doc)}"
        # the text near the position only when redaction leaves the body as it is: a cut could halve a key
        if exc.pos >= BODY_EXCERPT_CHARS - 40 and self._redactor.text(exc.doc) == exc.doc:
            near = exc.doc[max(0, exc.pos - 40) : exc.pos + 40]
            where += f"; {'it ends' if exc.pos >= len(exc.doc) else 'there it reads'} {self._scrub(near)!r}"
        return where

    def _scrub(self, text: str) -> str:
        """Remove the API key, anything key-shaped and the base URL's extras from text that came from the endpoint
        or the client (error messages, log lines), then cut it to `MAX_ERROR_MESSAGE_CHARS`."""
        if self.base_url:
            text = text.replace(self.base_url, redact_url(self.base_url) or "")
        return shorten(self._redactor.text(text))

    def _log_retry(self, state: RetryCallState) -> None:
        self._log_attempt("chat completion", state)

    def _log_check_retry(self, state: RetryCallState) -> None:
        self._log_attempt("endpoint check", state)

    def _log_attempt(self, what: str, state: RetryCallState) -> None:
        """Log a failed attempt of ``what`` that tenacity is about to retry (the reason scrubbed of secrets)."""
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None else None
        reason = self._scrub(describe_error(exc)) if exc is not None else "unknown error"
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        log.warning(
            "%s attempt %d to %s failed (%s); retrying in %.2fs",
            what,
            state.attempt_number,
            redact_url(self.base_url) or "the default endpoint",
            reason,
            wait,
        )


CACHED_TOKEN_FIELDS: tuple[tuple[str, ...], ...] = (
    ("prompt_tokens_details", "cached_tokens"),
    ("prompt_cache_hit_tokens",),
    ("cache_read_input_tokens",),
)
"""Where OpenAI-compatible endpoints report prompt tokens served from their cache, first found wins: OpenAI, vLLM,
llama.cpp, xAI and OpenRouter (``prompt_tokens_details.cached_tokens``), DeepSeek (``prompt_cache_hit_tokens``),
LiteLLM in front of Anthropic (``cache_read_input_tokens``)."""
CACHE_WRITE_FIELDS: tuple[tuple[str, ...], ...] = (
    ("prompt_tokens_details", "cache_write_tokens"),
    ("cache_creation_input_tokens",),
)
"""Where they report prompt tokens written to the cache (billed apart by Anthropic): OpenRouter
(``prompt_tokens_details.cache_write_tokens``), LiteLLM (``cache_creation_input_tokens``)."""


MAX_TOKEN_COUNT = 2**53
"""A reported token count above this is not a count (the trace store's integers and JSON's exact ones end near it)."""


def _count(value: Any) -> int | None:
    """A reported token count: a whole number from 0 to `MAX_TOKEN_COUNT` (``1158.0`` is 1158), else None (not
    reported, or not a count)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKEN_COUNT else None


def _reported(usage: dict[str, Any], paths: tuple[tuple[str, ...], ...]) -> int | None:
    for path in paths:
        value: Any = usage
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        found = _count(value)
        if found is not None:
            return found
    return None


def usage_of(completion: dict[str, Any]) -> Usage | None:
    """Token usage of a raw completion body, with the prompt tokens read from and written to the provider's prompt
    cache where the endpoint reports them (`CACHED_TOKEN_FIELDS`, `CACHE_WRITE_FIELDS`)."""
    usage = completion.get("usage")
    if not isinstance(usage, dict):
        return None
    prompt, completion_tokens = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    if prompt is None or completion_tokens is None:  # missing or not a count (negative, a string): unknown, not 0
        return None
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion_tokens,
        cached_tokens=_reported(usage, CACHED_TOKEN_FIELDS),
        cache_write_tokens=_reported(usage, CACHE_WRITE_FIELDS),
    )


def is_context_length_error(exc: BaseException) -> bool:
    """Whether an error says the prompt does not fit the model's context window."""
    if not isinstance(exc, EndpointStatusError) or exc.status_code not in (400, 413, 422):
        return False
    body = exc.body if isinstance(exc.body, dict) else {}
    codes = {str(body.get("code") or ""), str(body.get("type") or ""), str(exc.code or "")}
    if codes & _CONTEXT_CODES:
        return True
    message = body.get("message")
    text = f"{exc.message} {message if isinstance(message, str) else ''}"
    return bool(_CONTEXT_MESSAGE.search(text))


_PARAMETER_FIX = {
    "temperature": "set --temperature (or CONTEXTDELTA_TEMPERATURE) to a value this model accepts: reasoning models "
    "(OpenAI's o-series and gpt-5) accept only 1",
    "max_tokens": "leave out --max-tokens: this model does not take a completion token cap under that name",
    "seed": "this endpoint does not take the run's `seed`; serve the model behind an endpoint that accepts it",
}
"""The settings a run sends on every call that a model may refuse, and what the user can do about each."""


def _refused_parameter(exc: EndpointStatusError, request: dict[str, Any]) -> str | None:
    """The request setting a 400/422 names as refused: the error's ``param`` field (OpenAI's form), else the first
    sent setting its message quotes (``'temperature'``, as OpenAI and vLLM word it). None when it names none."""
    sent = [name for name in _PARAMETER_FIX if name in request]
    body = exc.body if isinstance(exc.body, dict) else {}
    if body.get("param") in sent:
        return str(body["param"])
    text = str(body.get("message", "") if body else exc.body or "")
    return next((name for name in sent if f"'{name}'" in text or f'"{name}"' in text or f"`{name}`" in text), None)


TEXT_PART_TYPES = frozenset({"text", "output_text"})
"""The content-part types whose ``text`` is the reply's text (chat completions' ``text``; ``output_text`` as
gateways that speak the Responses API write it)."""


def _text_of_parts(parts: list[Any]) -> str | None:
    """The text of a content given as a list of parts, joined as the parts follow each other; None when no part
    is text (a refusal, an image)."""
    texts = [
        part["text"]
        for part in parts
        if isinstance(part, dict) and part.get("type", "text") in TEXT_PART_TYPES and isinstance(part.get("text"), str)
    ]
    return "".join(texts) if texts else None


def _call_id(value: object) -> str:
    """A tool call's id as the history sends it back: text as sent, an integer as its digits; anything else (an
    object, a list, true, a fraction; the raw reply keeps it) reads as no id, so the agent gives the call one of its
    own instead of sending the model a Python rendering of the value."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return ""


def _refusal_of_parts(parts: list[Any]) -> str | None:
    """The text of the refusal parts of a content given as parts (``{"type": "refusal", "refusal": ...}``), joined;
    None when there is none."""
    texts = [
        part["refusal"]
        for part in parts
        if isinstance(part, dict) and part.get("type") == "refusal" and isinstance(part.get("refusal"), str)
    ]
    return "".join(texts) or None


def describe_error(exc: BaseException) -> str:
    """A one-line description of a failed attempt (not yet scrubbed of secrets)."""
    if isinstance(exc, EndpointStatusError):
        return f"HTTP {exc.status_code} {exc.name}: {exc.message}"
    if isinstance(exc, EndpointError):
        return f"{exc.name}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"


_request_json = json_dumps_function(ensure_ascii=False)


def _encode(request: dict[str, Any]) -> bytes:
    """The request body: ``json.dumps(request, ensure_ascii=False)``, with its C encoder built once."""
    return _request_json(request).encode("utf-8")


@functools.cache
def _version() -> str:
    try:
        return importlib.metadata.version("contextdelta")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """Certificate verification against certifi's CA bundle (what httpx, and so the ``openai`` client, verifies
    against), plus the system's."""
    context = ssl.create_default_context()
    context.load_verify_locations(cafile=certifi.where())
    return context
