"""Endpoints that misbehave in ways a conforming server never does, over real HTTP: each ends as a recorded failed
trial (``provider_error``) or as an invalid tool call the world answers, never as a crash, a success or a hang."""

from __future__ import annotations

import json
import re
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextdelta.agent import TerminationReason
from contextdelta.canonical import MAX_JSON_DEPTH, content_hash
from contextdelta.providers import MAX_RESPONSE_BYTES, ProviderFailure
from contextdelta.providers.errors import MAX_ERROR_MESSAGE_CHARS
from tests.providers.conftest import (
    RawEndpoint,
    RecordingSleep,
    complete,
    completion,
    episode,
    tool_call,
)


def encodable(value: Any) -> None:
    """What the run directory and the trace store do with a record: hash it and write it as UTF-8."""
    content_hash(value)
    json.dumps(value, ensure_ascii=False).encode("utf-8")


# ---- lone surrogates --------------------------------------------------------------------------------------

ESCAPED = completion({"content": "done \ud800 and \udfff", "tool_calls": None})
"""``json.dumps`` writes a lone surrogate as its escape, ``\\ud800``, as a misbehaving server would."""
RAW_BYTES = ESCAPED.replace(b"\\ud800", b"\xed\xa0\x80").replace(b"\\udfff", b"\xed\xbf\xbf")
"""The same surrogates written as raw (CESU-8) bytes, which Python's JSON decoder also lets through."""


@pytest.mark.parametrize("body", [ESCAPED, RAW_BYTES], ids=["escaped", "raw-bytes"])
def test_lone_surrogates_in_content_become_replacement_characters(sleep: RecordingSleep, body: bytes) -> None:
    with RawEndpoint([body]) as endpoint:
        response = complete(endpoint, sleep)
    assert response.content == "done \ufffd and \ufffd"
    assert response.raw["choices"][0]["message"]["content"] == "done \ufffd and \ufffd"
    encodable(response.model_dump(mode="json"))


def test_a_surrogate_pair_written_as_raw_bytes_is_kept_as_its_character(sleep: RecordingSleep) -> None:
    body = completion({"content": "ok \U0001f600"}).replace(b"\\ud83d\\ude00", b"\xed\xa0\xbd\xed\xb8\x80")
    with RawEndpoint([body]) as endpoint:
        response = complete(endpoint, sleep)
    assert response.content == "ok \U0001f600"


def test_lone_surrogates_in_tool_call_arguments_and_names_become_replacement_characters(
    sleep: RecordingSleep,
) -> None:
    with RawEndpoint([tool_call('{"order_id": "A-1001\ud800"}', name="get_order\udc00")]) as endpoint:
        response = complete(endpoint, sleep)
    [call] = response.tool_calls
    assert call.name == "get_order\ufffd"
    assert json.loads(call.arguments) == {"order_id": "A-1001\ufffd"}
    encodable(response.model_dump(mode="json"))


def test_an_episode_whose_final_answer_has_a_lone_surrogate_is_recorded() -> None:
    with RawEndpoint([completion({"content": "Refunded \ud800."})]) as endpoint:
        trace = episode(endpoint)
    assert trace.termination is TerminationReason.FINAL_ANSWER, trace.error
    assert trace.final_answer == "Refunded \ufffd."
    encodable(trace.model_dump(mode="json"))


# ---- tool calls of the wrong shape ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sent", "recorded"),
    [
        ("0", "0"),
        ("[]", "[]"),
        ("false", "false"),
        ('""', '""'),
        ("null", "null"),
        (0, "0"),
        ([], "[]"),
        (False, "false"),
        (None, "null"),
        ({"order_id": "A-1001"}, '{"order_id": "A-1001"}'),
    ],
)
def test_arguments_that_are_not_an_object_are_kept_as_sent(sleep: RecordingSleep, sent: Any, recorded: str) -> None:
    """Never coerced to {}: a no-argument call would then run as if the model had sent a valid one."""
    with RawEndpoint([tool_call(sent)]) as endpoint:
        response = complete(endpoint, sleep)
    assert [call.arguments for call in response.tool_calls] == [recorded]


@pytest.mark.parametrize("sent", ["0", "[]", "false", '""', "null", 0, [], False, None])
def test_the_world_answers_arguments_that_are_not_an_object_as_malformed(sent: Any) -> None:
    with RawEndpoint([tool_call(sent), completion({"content": "I could not look it up."})]) as endpoint:
        trace = episode(endpoint)
    assert trace.termination is TerminationReason.FINAL_ANSWER, trace.error
    [event] = trace.tool_events()
    assert (event.outcome.value, event.error_code) == ("invalid", "malformed_arguments")
    assert event.arguments == (sent if isinstance(sent, str) else json.dumps(sent))
    [call] = trace.steps[0].tool_calls
    assert "The arguments must be a JSON object" in json.loads(call.result)["error"]["message"]


@pytest.mark.parametrize(
    ("function", "what"),
    [
        ("get_order", "tool_calls[0].function that is a string, not an object"),
        (["get_order", "{}"], "tool_calls[0].function that is an array, not an object"),
        (None, "tool_calls[0].function that is null, not an object"),
    ],
)
def test_a_tool_call_whose_function_is_not_an_object_is_a_provider_error(function: Any, what: str) -> None:
    body = completion({"content": None, "tool_calls": [{"id": "c", "type": "function", "function": function}]})
    with RawEndpoint([body]) as endpoint:
        trace = episode(endpoint)
        assert endpoint.requests == 1  # the endpoint's own answer: not retried
    assert trace.termination is TerminationReason.PROVIDER_ERROR
    assert trace.error == f"the endpoint returned {what}"


def test_tool_calls_that_are_not_a_list_are_a_provider_error(sleep: RecordingSleep) -> None:
    with RawEndpoint([completion({"content": None, "tool_calls": {"function": {"name": "get_order"}}})]) as e:
        failure = complete(e, sleep)
    assert isinstance(failure, ProviderFailure) and failure.reason == "provider_error"
    assert failure.message == "the endpoint returned tool_calls that is an object, not a list"


# ---- bodies too deep or too large ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("depth", "why"),
    [
        (100_000, "a JSON body nested too deeply to decode"),
        (MAX_JSON_DEPTH + 50, f"a JSON body nested more than {MAX_JSON_DEPTH} levels deep"),
    ],
)
def test_a_body_nested_too_deeply_is_a_provider_error(depth: int, why: str) -> None:
    body = b'{"choices": [{"message": {"content": "x", "extra": ' + b"[" * depth + b"]" * depth + b"}}]}"
    with RawEndpoint([body]) as endpoint:
        trace = episode(endpoint)
        assert endpoint.requests == 1
    assert trace.termination is TerminationReason.PROVIDER_ERROR
    assert trace.error is not None and trace.error.startswith(f"the endpoint returned {why}")
    encodable(trace.model_dump(mode="json"))


def _endless() -> Iterator[bytes]:
    chunk = b" " * (1024 * 1024)  # whitespace: JSON that would parse, were it not too long
    for _ in range(MAX_RESPONSE_BYTES // len(chunk) * 2):
        yield chunk


def test_a_body_declared_larger_than_the_cap_is_not_read_nor_retried(sleep: RecordingSleep) -> None:
    with RawEndpoint([b" " * (MAX_RESPONSE_BYTES + 1)]) as endpoint:
        failure = complete(endpoint, sleep)
        assert endpoint.requests == 1
    assert isinstance(failure, ProviderFailure) and failure.reason == "provider_error"
    assert failure.retries == 0 and sleep.waits == []
    assert "ResponseTooLargeError" in failure.message and "64 MiB" in failure.message
    assert "MAX_RESPONSE_BYTES" in failure.message and "Content-Length" in failure.message


def test_a_streamed_body_past_the_cap_stops_being_read_and_is_not_retried(sleep: RecordingSleep) -> None:
    with RawEndpoint([_endless]) as endpoint:
        failure = complete(endpoint, sleep)
        assert endpoint.requests == 1
    assert isinstance(failure, ProviderFailure) and failure.reason == "provider_error"
    assert failure.retries == 0 and sleep.waits == []
    assert "passed the 64 MiB a response may have (MAX_RESPONSE_BYTES)" in failure.message


# ---- content as a list of parts -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parts", "text"),
    [
        ([{"type": "text", "text": "Refunded "}, {"type": "text", "text": "in full."}], "Refunded in full."),
        ([{"type": "output_text", "text": "Refunded."}, {"type": "image_url", "image_url": {"url": "x"}}], "Refunded."),
        ([{"text": "Refunded \ud800."}], "Refunded \ufffd."),
        ([{"type": "refusal", "refusal": "I cannot."}], None),
        ([], None),
    ],
)
def test_content_sent_as_parts_is_read_as_their_joined_text(sleep: RecordingSleep, parts: Any, text: Any) -> None:
    with RawEndpoint([completion({"content": parts})]) as endpoint:
        response = complete(endpoint, sleep)
    assert response.content == text


def test_an_episode_whose_final_answer_comes_as_parts_ends_with_that_answer() -> None:
    parts = [{"type": "text", "text": "Order A-1001 "}, {"type": "text", "text": "is refunded."}]
    with RawEndpoint([completion({"content": parts})]) as endpoint:
        trace = episode(endpoint)
    assert trace.termination is TerminationReason.FINAL_ANSWER, trace.error
    assert trace.final_answer == "Order A-1001 is refunded."


# ---- error answers: bounded, and saying why --------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 500])
def test_a_huge_error_body_is_cut_in_the_failure_message(sleep: RecordingSleep, status: int) -> None:
    """A server that answers an error with megabytes (an HTML page, a dump) must not put them in every failed
    trial's record, the failure atlas and the terminal's last lines."""
    with RawEndpoint([b"<html>" + b"E" * 1_000_000 + b"</html>"], status=status) as endpoint:
        failure = complete(endpoint, sleep)
    assert isinstance(failure, ProviderFailure) and failure.reason == "provider_error"
    assert failure.message.startswith(f"HTTP {status} ")
    assert len(failure.message) < MAX_ERROR_MESSAGE_CHARS + 200
    assert re.search(r"\.\.\. \[cut: 10000\d\d characters in all\]", failure.message)


def test_an_error_sent_with_http_200_is_named_in_the_failure(sleep: RecordingSleep) -> None:
    body = json.dumps({"error": {"message": "model overloaded, try again later", "code": 503}}).encode()
    with RawEndpoint([body]) as endpoint:
        failure = complete(endpoint, sleep)
    assert isinstance(failure, ProviderFailure) and failure.reason == "provider_error"
    assert failure.message == (
        "the endpoint returned an error instead of a completion (with HTTP 200): model overloaded, try again later"
    )


@pytest.mark.parametrize(("content", "what"), [(42, "a number"), ({"text": "hi"}, "an object"), (True, "a boolean")])
def test_content_that_is_not_text_is_a_provider_error_naming_its_type(content: Any, what: str) -> None:
    """Not read as an empty reply (which ends as a vague "empty response" after a nudge)."""
    with RawEndpoint([completion({"content": content})]) as endpoint:
        trace = episode(endpoint)
        assert endpoint.requests == 1
    assert trace.termination is TerminationReason.PROVIDER_ERROR
    assert trace.error == f"the endpoint returned message.content that is {what}, not a string"


@pytest.mark.parametrize("finish", ["content_filter", "length"])
def test_an_empty_reply_names_its_finish_reason(finish: str) -> None:
    body = json.loads(completion({"content": ""}))
    body["choices"][0]["finish_reason"] = finish
    with RawEndpoint([json.dumps(body).encode()]) as endpoint:
        trace = episode(endpoint)
    assert trace.termination is TerminationReason.PROVIDER_ERROR
    assert trace.error == f"empty response (finish_reason {finish!r})"


def test_a_retry_after_too_long_to_wait_is_named_in_the_failure(sleep: RecordingSleep) -> None:
    with RawEndpoint([b'{"error": {"message": "slow down"}}'], status=429, headers={"Retry-After": "99999"}) as e:
        failure = complete(e, sleep)
        assert e.requests == 1
    assert isinstance(failure, ProviderFailure) and sleep.waits == []
    assert "the endpoint asked to wait 99999 s (Retry-After), more than the 120 s a call waits" in failure.message


@pytest.mark.parametrize(("name", "what"), [(7, "a number"), (None, "null"), (["get_order"], "an array")])
def test_a_tool_call_whose_name_is_not_text_is_a_provider_error(name: Any, what: str) -> None:
    """A tool call of the wrong shape: not turned into a tool named "7" (or "") that the world then refuses."""
    call = {"id": "c", "type": "function", "function": {"name": name, "arguments": "{}"}}
    body = completion({"content": None, "tool_calls": [call]})
    with RawEndpoint([body]) as endpoint:
        trace = episode(endpoint)
        assert endpoint.requests == 1
    assert trace.termination is TerminationReason.PROVIDER_ERROR
    assert trace.error == f"the endpoint returned tool_calls[0].function.name that is {what}, not a string"


def test_a_streamed_reply_nobody_asked_for_is_named_as_a_stream(sleep: RecordingSleep) -> None:
    chunk = json.dumps({"choices": [{"delta": {"content": "done"}}]})
    with RawEndpoint([f"data: {chunk}\n\ndata: [DONE]\n\n".encode()]) as endpoint:
        failure = complete(endpoint, sleep)
    assert isinstance(failure, ProviderFailure) and failure.reason == "provider_error"
    assert failure.message.startswith(
        "the endpoint returned a server-sent event stream instead of one JSON completion: 'data: "
    )


AZURE_KEY = "azure0123456789abcdef0123456789ab"
"""A key that is not key-shaped (no ``sk-``): only its exact value lets the redactor find it."""


@pytest.mark.parametrize("status", [200, 400])
@pytest.mark.parametrize("offset", [190, 1990])
def test_a_key_echoed_where_a_reply_is_cut_leaks_none_of_it(sleep: RecordingSleep, status: int, offset: int) -> None:
    """The not-JSON body's first 200 characters and an error's first 2000: cut after the key is redacted, never
    before (a key cut in two is no longer recognised, and its first half would be recorded)."""
    body = ("x" * offset + AZURE_KEY + "y" * 3000).encode()
    with RawEndpoint([body], status=status) as endpoint:
        failure = complete(endpoint, sleep, api_key=AZURE_KEY)
    assert isinstance(failure, ProviderFailure)
    assert AZURE_KEY[:6] not in failure.message


def test_an_error_message_with_line_breaks_and_terminal_escapes_is_one_safe_line(sleep: RecordingSleep) -> None:
    """It is printed on the terminal (the run's last lines) and put in Markdown tables (report, atlas)."""
    body = b"bad | pipe\n# HEADING\r\n\x1b[31mRED\x07"
    with RawEndpoint([body], status=400) as endpoint:
        failure = complete(endpoint, sleep)
    assert isinstance(failure, ProviderFailure)
    assert failure.message == "HTTP 400 BadRequestError: bad | pipe # HEADING \\x1b[31mRED\\x07"


def test_a_reply_with_thousands_of_tool_calls_is_a_provider_error_before_any_runs() -> None:
    from contextdelta.providers.openai_compat import MAX_TOOL_CALLS_PER_REPLY

    call = {"id": "c", "type": "function", "function": {"name": "get_order", "arguments": '{"order_id": "A-1001"}'}}
    body = completion({"content": None, "tool_calls": [call] * (MAX_TOOL_CALLS_PER_REPLY + 1)})
    with RawEndpoint([body]) as endpoint:
        trace = episode(endpoint)
    assert trace.termination is TerminationReason.PROVIDER_ERROR
    assert trace.error == (
        f"the endpoint returned {MAX_TOOL_CALLS_PER_REPLY + 1} tool calls in one reply, more than the "
        f"{MAX_TOOL_CALLS_PER_REPLY} a step may make (MAX_TOOL_CALLS_PER_REPLY)"
    )
    assert trace.tool_events() == []


def test_a_legacy_function_call_is_a_provider_error_naming_it() -> None:
    """Not an "empty response" after a nudge: the reply has a call, in the form that came before tool_calls."""
    body = completion({"content": None, "function_call": {"name": "get_order", "arguments": "{}"}})
    with RawEndpoint([body]) as endpoint:
        trace = episode(endpoint)
        assert endpoint.requests == 1
    assert trace.termination is TerminationReason.PROVIDER_ERROR
    assert trace.error is not None and "a legacy `function_call` instead of `tool_calls`" in trace.error


@pytest.mark.parametrize(
    ("status", "why"),
    [
        (302, "HTTP 302 APIStatusError: Error code: 302"),  # a redirect without a Location to follow
        (204, "the endpoint returned an empty body where a chat completion belongs"),
    ],
)
def test_an_answer_without_a_completion_names_its_status_or_its_emptiness(
    sleep: RecordingSleep, status: int, why: str
) -> None:
    with RawEndpoint([b""], status=status) as endpoint:
        failure = complete(endpoint, sleep)
    assert isinstance(failure, ProviderFailure) and failure.reason == "provider_error"
    assert failure.message == why


def test_a_redirect_loop_is_named_and_not_retried(sleep: RecordingSleep) -> None:
    with RawEndpoint([b""], status=307, headers={"Location": "/v1/chat/completions"}) as endpoint:
        failure = complete(endpoint, sleep)
        assert endpoint.requests == 10  # the redirects a client follows, once: no retry
    assert isinstance(failure, ProviderFailure) and failure.reason == "provider_error"
    assert failure.retries == 0 and sleep.waits == []
    assert failure.message.startswith("TooManyRedirects: the endpoint redirected 10 times without an answer")


@pytest.mark.parametrize("status", [301, 302, 303])
def test_a_post_redirected_into_a_get_is_named_as_the_redirect_and_not_retried(
    sleep: RecordingSleep, status: int
) -> None:
    """An http:// base URL that answers with a redirect to https://, say: the client follows a 301-303 with a GET and
    no body, and what answers that GET (here a 501: the endpoint takes only POST) is no answer to the request."""
    with RawEndpoint([b""], status=status, headers={"Location": "/v1/chat/completions"}) as endpoint:
        failure = complete(endpoint, sleep)
        assert endpoint.requests == 1  # the one POST: no retry
    assert isinstance(failure, ProviderFailure) and failure.reason == "provider_error"
    assert failure.retries == 0 and sleep.waits == []
    assert failure.message.startswith(
        f"RedirectError: the endpoint answered the POST with HTTP {status}, a redirect to {endpoint.base_url}"
        "/chat/completions, which a client follows with a GET without the request (that answered HTTP 501)"
    ), failure.message


def test_a_response_the_client_cannot_read_is_not_named_as_an_http_400(sleep: RecordingSleep) -> None:
    """aiohttp reports a response it cannot parse (here a Content-Length that is no number) with its own status 400;
    the server sent no 400, so the failure must not say it did."""
    with RawEndpoint([completion({"content": "ok"})], headers={"Content-Length": "abc"}) as endpoint:
        failure = complete(endpoint, sleep)
    assert isinstance(failure, ProviderFailure) and failure.reason == "provider_error"
    assert failure.message.startswith("APIConnectionError: Connection error. (the response could not be read: ")
    assert "Content-Length" in failure.message and "400" not in failure.message, failure.message


CERTIFICATE = Path(__file__).parent / "fixtures" / "selfsigned-cert.pem"  # localhost and 127.0.0.1, test use only


def over_tls(endpoint: RawEndpoint) -> RawEndpoint:
    """The endpoint served over https:// with the self-signed certificate of ``fixtures/``."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(CERTIFICATE, CERTIFICATE.with_name("selfsigned-key.pem"))
    endpoint.server.socket = context.wrap_socket(endpoint.server.socket, server_side=True)
    endpoint.base_url = endpoint.base_url.replace("http://", "https://")
    return endpoint


def test_an_untrusted_certificate_is_not_retried_and_says_how_to_trust_it(sleep: RecordingSleep) -> None:
    with over_tls(RawEndpoint([completion({"content": "Done."})])) as endpoint:
        failure = complete(endpoint, sleep)
        assert isinstance(failure, ProviderFailure) and failure.reason == "provider_error"
        # the same certificate comes back on every attempt: no retry, no backoff
        assert failure.retries == 0 and sleep.waits == [] and endpoint.requests == 0
        assert "the TLS certificate of 127.0.0.1 is not trusted: self-signed certificate" in failure.message
    # (SSL_CERT_FILE is read once per process, when the first connection pool is made: a new run trusts it)
    assert "point SSL_CERT_FILE at that CA's certificate" in failure.message
