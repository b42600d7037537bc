"""The scripted server's simulated prompt cache (``--prompt-cache``): a request's cached tokens are those of the
longest prefix an earlier request sent; off by default; writes reported in OpenRouter's shape."""

from __future__ import annotations

import http.client
import json
from typing import Any

from contextdelta.canonical import canonical_json
from contextdelta.providers import usage_of
from contextdelta.testing import PromptCacheMode, ScriptedServer, approx_tokens
from contextdelta.worlds import ProtectionMode, get_world
from tests.testing.episode_loop import FIXTURES, first_messages, fixture_tasks

MUG = fixture_tasks()["fixture-mug-refund"]
TOOLS = get_world("order").tool_schemas(ProtectionMode.UNPROTECTED)


def chat(server: ScriptedServer, messages: list[dict[str, Any]]) -> dict[str, Any]:
    connection = http.client.HTTPConnection(server.host, server.port, timeout=10)
    body = {"model": server.model_name, "messages": messages, "tools": TOOLS}
    connection.request(
        "POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"}
    )
    payload: dict[str, Any] = json.loads(connection.getresponse().read())
    connection.close()
    return payload


def conversation(server: ScriptedServer) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Two requests of one conversation: the first, then the first plus its reply and the tool result."""
    first = first_messages(MUG)
    reply = chat(server, first)
    message = reply["choices"][0]["message"]
    call = message["tool_calls"][0]
    second = [*first, message, {"role": "tool", "tool_call_id": call["id"], "content": '{"ok": true}'}]
    return first, second


def test_off_reports_no_cached_token() -> None:
    with ScriptedServer("oracle", FIXTURES) as server:
        _, second = conversation(server)
        details = chat(server, second)["usage"]["prompt_tokens_details"]
    assert details == {"cached_tokens": 0}


def test_a_request_extending_an_earlier_one_reads_its_prefix_from_the_cache() -> None:
    with ScriptedServer("oracle", FIXTURES, prompt_cache=PromptCacheMode.READS) as server:
        first, second = conversation(server)
        usage = chat(server, second)["usage"]
        again = chat(server, second)["usage"]
        digest = {"role": "user", "content": "Digest of earlier work: nothing yet."}
        rewritten = chat(server, [*first, digest, *second[len(first) :]])["usage"]
    prefix = approx_tokens(canonical_json(TOOLS)) + sum(approx_tokens(canonical_json(m)) for m in first)
    assert usage["prompt_tokens_details"] == {"cached_tokens": prefix}
    assert 0 < prefix < usage["prompt_tokens"]
    assert again["prompt_tokens_details"]["cached_tokens"] >= prefix  # the whole request is cached now
    # a history rewritten after the pinned messages (a digest inserted) keeps only the prefix it shares
    assert rewritten["prompt_tokens_details"]["cached_tokens"] == prefix


def test_reads_and_writes_reports_the_rest_as_written_and_the_client_reads_both() -> None:
    with ScriptedServer("oracle", FIXTURES, prompt_cache="reads_and_writes") as server:
        cold = chat(server, first_messages(MUG))
        _, second = conversation(server)
        warm = chat(server, second)
    details = cold["usage"]["prompt_tokens_details"]
    assert details == {"cached_tokens": 0, "cache_write_tokens": cold["usage"]["prompt_tokens"]}
    usage = usage_of(warm)
    assert usage is not None and usage.cached_tokens is not None and usage.cache_write_tokens is not None
    assert usage.cached_tokens > 0 and usage.cached_tokens + usage.cache_write_tokens == usage.prompt_tokens
