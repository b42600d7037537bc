"""The reply shapes and request quirks of the OpenAI-compatible endpoints users run, over real HTTP: OpenAI, vLLM,
Ollama, llama.cpp, LM Studio, Gemini, Mistral, DeepSeek, Anthropic's OpenAI SDK compatibility, Groq and OpenRouter.

What must hold for each: no crash; a failure is a failed trial with a one-line reason; a well-formed tool call runs
exactly once; the record keeps what the model sent; the request history sends back only what the chat completions
API takes (never a reasoning field); nothing the model says is a success unless the world's end state is right.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextdelta.agent import EpisodeTrace, TerminationReason, invented_call_id
from contextdelta.grading import grade
from contextdelta.providers import ProviderFailure
from contextdelta.rundir import FAILED_TERMINATIONS
from tests.agent.helpers import make_task, make_world
from tests.providers.conftest import RawEndpoint, RecordingSleep, complete, completion, episode

GET = {"order_id": "A-1001"}
REFUND = {"order_id": "A-1001", "amount_cents": 12900, "reason": "Arrived damaged"}
DONE = completion({"content": "Order A-1001 is refunded in full."})


def call(call_id: Any, arguments: Any, name: str = "get_order", **fields: Any) -> dict[str, Any]:
    """One tool call; ``call_id`` ``...`` leaves the id out, ``arguments`` a dict is sent as its JSON text."""
    text = json.dumps(arguments) if isinstance(arguments, dict) else arguments
    shaped = {"type": "function", "function": {"name": name, "arguments": text}, **fields}
    return shaped if call_id is ... else {"id": call_id, **shaped}


def calls(*tool_calls: dict[str, Any], finish_reason: Any = "tool_calls", content: Any = None, **fields: Any) -> bytes:
    return completion({"content": content, "tool_calls": list(tool_calls)}, finish_reason, **fields)


def verdict_success(trace: EpisodeTrace) -> bool:
    """Whether the episode succeeded as the run grades it: never for a failed trial, else on the world's state."""
    if trace.termination in FAILED_TERMINATIONS:
        return False
    task = make_task()
    verdict = grade(
        task,
        trace.tool_events(),
        trace.mutation_events(),
        make_world(task).state(),
        trace.evaluator.final_state,
        trace.final_answer,
    )
    return verdict.success


def sent_assistant_messages(endpoint: RawEndpoint) -> list[dict[str, Any]]:
    """The assistant messages of the last request the endpoint received: what the model is shown of its own turns."""
    return [m for m in endpoint.received[-1]["messages"] if m["role"] == "assistant"]


# ---- well-formed replies of each endpoint: one call, run once, then the answer -------------------------------------

OPENAI = calls(
    call("call_Qx3bW2", GET),
    choice={"logprobs": None},
    service_tier="default",
    system_fingerprint="fp_07871e2ad8",
    usage={
        "prompt_tokens": 1117,
        "completion_tokens": 46,
        "total_tokens": 1163,
        "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    },
)
OPENAI_MESSAGE = json.loads(OPENAI)
OPENAI_MESSAGE["choices"][0]["message"].update({"refusal": None, "annotations": [], "audio": None})
VLLM = calls(
    call("chatcmpl-tool-6f1e0d2c8a9b4f70b8a1", GET),
    choice={"stop_reason": None, "logprobs": None},
    prompt_logprobs=None,
    kv_transfer_params=None,
)
OLLAMA = calls(call("call_k2tr4wzm", GET, index=0), finish_reason="stop", content="", system_fingerprint="fp_ollama")
LLAMA_CPP = calls(
    call("V0Wk2QzDz7cYaUfLjmqBzC3z1lGb0Q7H", GET),
    system_fingerprint="b5890-9ff0e8c8",
    timings={"prompt_n": 350, "predicted_n": 25},
)
LM_STUDIO = calls(call("365174485", GET), content="", stats={}, system_fingerprint="qwen3-8b")
GEMINI = calls(call("", GET), usage={"prompt_tokens": 300, "completion_tokens": 12, "total_tokens": 312})
MISTRAL_CALL = call("D681PevKs", GET, index=0)
del MISTRAL_CALL["type"]  # Mistral's tool calls carry no type
MISTRAL = completion(
    {"content": "", "prefix": False, "tool_calls": [MISTRAL_CALL]}, "tool_calls", model="mistral-large-latest"
)
ANTHROPIC = calls(
    call("toolu_01A09q90qw90lq917835lq9", GET), content="I'll look the order up.", id="msg_01XFDUDYJgAACzvnptvVoYEL"
)
GROQ = calls(
    call("call_d5wg", GET),
    usage={"queue_time": 0.03, "prompt_tokens": 224, "prompt_time": 0.01, "completion_tokens": 22, "total_tokens": 246},
    x_groq={"id": "req_01jbd6g2qdfw2adyrt2az8hz4w"},
)
OPENROUTER = calls(
    call("toolu_vrtx_01", GET),
    choice={"native_finish_reason": "tool_use", "logprobs": None},
    provider="Anthropic",
    id="gen-1733-abc",
)


@pytest.mark.parametrize(
    ("reply", "call_id"),
    [
        (json.dumps(OPENAI_MESSAGE).encode(), "call_Qx3bW2"),
        (VLLM, "chatcmpl-tool-6f1e0d2c8a9b4f70b8a1"),
        (OLLAMA, "call_k2tr4wzm"),
        (LLAMA_CPP, "V0Wk2QzDz7cYaUfLjmqBzC3z1lGb0Q7H"),
        (LM_STUDIO, "365174485"),
        (GEMINI, invented_call_id(1, 1, 0)),  # Gemini's empty id, replaced in the history
        (MISTRAL, "D681PevKs"),
        (ANTHROPIC, "toolu_01A09q90qw90lq917835lq9"),
        (GROQ, "call_d5wg"),
        (OPENROUTER, "toolu_vrtx_01"),
    ],
    ids=["openai", "vllm", "ollama", "llama.cpp", "lm-studio", "gemini", "mistral", "anthropic", "groq", "openrouter"],
)
def test_each_endpoints_tool_call_runs_once_and_its_id_answers_it(reply: bytes, call_id: str) -> None:
    with RawEndpoint([reply, DONE]) as endpoint:
        trace = episode(endpoint)
        assert endpoint.requests == 2
    assert trace.termination is TerminationReason.FINAL_ANSWER, trace.error
    [event] = trace.tool_events()
    assert (event.tool, event.outcome.value) == ("get_order", "executed")
    [record] = trace.steps[0].tool_calls
    assert record.call_id == call_id
    assert trace.steps[0].note is None
    # the second request shows the model its call and the result under one id
    [assistant] = sent_assistant_messages(endpoint)
    tool_messages = [m for m in endpoint.received[-1]["messages"] if m["role"] == "tool"]
    assert [c["id"] for c in assistant["tool_calls"]] == [m["tool_call_id"] for m in tool_messages] == [call_id]


def test_openai_usage_details_are_read_and_the_null_refusal_is_no_refusal(sleep: RecordingSleep) -> None:
    with RawEndpoint([json.dumps(OPENAI_MESSAGE).encode()]) as endpoint:
        response = complete(endpoint, sleep)
    assert response.refusal is None
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (1117, 46)
    assert response.usage.cached_tokens == 1024


# ---- tool-call ids: missing, empty, the same twice ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second", "ids"),
    [
        (..., ..., [invented_call_id(1, 1, 0), invented_call_id(1, 1, 1)]),  # missing (Gemini)
        ("", "", [invented_call_id(1, 1, 0), invented_call_id(1, 1, 1)]),  # empty (Gemini)
        (
            "function-call-1",
            "function-call-1",
            ["function-call-1", invented_call_id(1, 1, 1)],
        ),  # one id twice in one reply
    ],
    ids=["missing", "empty", "duplicate"],
)
def test_tool_calls_without_distinct_ids_pair_with_their_results_deterministically(
    first: Any, second: Any, ids: list[str]
) -> None:
    other = {"order_id": "A-1002"}
    reply = calls(call(first, GET), call(second, other))
    traces = []
    for _ in range(2):
        with RawEndpoint([reply, DONE]) as endpoint:
            traces.append(episode(endpoint))
            messages = endpoint.received[-1]["messages"]
    trace = traces[0]
    assert [(c.call_id, c.original_id) for c in trace.steps[0].tool_calls] == list(
        zip(ids, ["" if first is ... else first, "" if second is ... else second], strict=True)
    )
    # each result answers its own call: A-1001's order under the first id, A-1002's under the second
    [assistant] = [m for m in messages if m["role"] == "assistant"]
    assert [c["id"] for c in assistant["tool_calls"]] == ids
    results = {
        m["tool_call_id"]: json.loads(m["content"])["order"]["resource"] for m in messages if m["role"] == "tool"
    }
    assert results == {ids[0]: "order/order/A-1001", ids[1]: "order/order/A-1002"}
    assert [e.outcome.value for e in trace.tool_events()] == ["executed", "executed"]
    # the record is the same in two runs (what was sent, the calls as recorded, what was appended)
    first_run, second_run = ([(s.messages_sha256, s.tool_calls, s.appended) for s in t.steps] for t in traces)
    assert first_run == second_run


def test_an_id_reused_from_an_earlier_reply_is_replaced_so_no_two_results_share_one() -> None:
    """Gemini-style replies that use the same id in every turn."""
    with RawEndpoint([calls(call("function-call", GET)), calls(call("function-call", GET)), DONE]) as endpoint:
        trace = episode(endpoint)
        messages = endpoint.received[-1]["messages"]
    assert [c.call_id for s in trace.steps for c in s.tool_calls] == ["function-call", invented_call_id(1, 2, 0)]
    assert [m["tool_call_id"] for m in messages if m["role"] == "tool"] == ["function-call", invented_call_id(1, 2, 0)]


# ---- arguments ------------------------------------------------------------------------------------------------


def test_arguments_sent_as_a_json_object_run_the_call_once() -> None:
    """Ollama's native form: ``arguments`` an object, not a JSON string."""
    reply = calls(
        {"id": "call_1", "type": "function", "index": 0, "function": {"name": "issue_refund", "arguments": REFUND}}
    )
    with RawEndpoint([reply, DONE]) as endpoint:
        trace = episode(endpoint)
    [event] = trace.tool_events()
    assert (event.tool, event.outcome.value) == ("issue_refund", "executed")
    assert json.loads(trace.steps[0].tool_calls[0].arguments) == REFUND
    assert verdict_success(trace)


@pytest.mark.parametrize(
    "arguments",
    [
        json.dumps(REFUND) + "<|call|>",  # trailing garbage (a chat template's end token)
        json.dumps(REFUND) + '{"order_id": "A-1001"}',  # two objects back to back
        "```json\n" + json.dumps(REFUND) + "\n```",  # wrapped in a markdown fence
    ],
    ids=["trailing-token", "two-objects", "fenced"],
)
def test_arguments_that_are_not_one_json_object_are_recorded_as_sent_and_change_nothing(arguments: str) -> None:
    """Not repaired: the world answers malformed_arguments, the model may try again, and no write happens."""
    with RawEndpoint([calls(call("call_1", arguments, name="issue_refund")), DONE]) as endpoint:
        trace = episode(endpoint)
    [event] = trace.tool_events()
    assert (event.outcome.value, event.error_code) == ("invalid", "malformed_arguments")
    assert trace.steps[0].tool_calls[0].arguments == arguments
    assert trace.evaluator.final_state == make_world(make_task()).state()
    assert trace.termination is TerminationReason.FINAL_ANSWER
    assert not verdict_success(trace)  # "Order A-1001 is refunded in full." is not what the world says


@pytest.mark.parametrize(("arguments", "code"), [("", "invalid_arguments"), (None, "malformed_arguments")])
def test_empty_or_null_arguments_are_answered_by_the_world_without_a_write(arguments: Any, code: str) -> None:
    with RawEndpoint([calls(call("call_1", arguments, name="issue_refund")), DONE]) as endpoint:
        trace = episode(endpoint)
    [event] = trace.tool_events()
    assert (event.outcome.value, event.error_code) == ("invalid", code)
    assert not verdict_success(trace)


# ---- finish_reason -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("finish", ["stop", None, "eos", "tool_use", "function_call"])
def test_tool_calls_run_once_whatever_the_finish_reason_says(finish: Any) -> None:
    """Ollama and Gemini say "stop" with tool calls; llama.cpp builds have said "eos"; some none at all."""
    with RawEndpoint([calls(call("call_1", REFUND, name="issue_refund"), finish_reason=finish), DONE]) as endpoint:
        trace = episode(endpoint)
    assert [(e.tool, e.outcome.value) for e in trace.tool_events()] == [("issue_refund", "executed")]
    response = trace.steps[0].response
    assert response is not None and response.finish_reason == finish
    assert trace.steps[0].note is None
    assert verdict_success(trace)


def test_a_final_answer_cut_at_the_token_limit_is_named_and_graded_on_the_state() -> None:
    cut = completion({"content": "Order A-1001 is refunded. I also"}, "length")
    with RawEndpoint([calls(call("call_1", REFUND, name="issue_refund")), cut]) as endpoint:
        trace = episode(endpoint)
    assert trace.termination is TerminationReason.FINAL_ANSWER
    assert trace.final_answer == "Order A-1001 is refunded. I also"
    assert trace.steps[-1].note == "final answer cut at the completion token limit (finish_reason 'length')"
    assert verdict_success(trace)  # the refund happened: the state is right


def test_a_final_answer_cut_at_the_token_limit_claiming_success_is_no_success() -> None:
    with RawEndpoint([completion({"content": "Order A-1001 is refunded in full and"}, "length")]) as endpoint:
        trace = episode(endpoint)
    assert trace.steps[-1].note == "final answer cut at the completion token limit (finish_reason 'length')"
    assert not verdict_success(trace)


def test_a_final_answer_cut_by_the_content_filter_is_named() -> None:
    with RawEndpoint([completion({"content": "I refunded the"}, "content_filter")]) as endpoint:
        trace = episode(endpoint)
    assert trace.termination is TerminationReason.FINAL_ANSWER
    assert trace.steps[-1].note == "final answer cut by the endpoint's content filter (finish_reason 'content_filter')"
    assert not verdict_success(trace)


def test_a_tool_call_cut_at_the_token_limit_writes_nothing_and_is_named() -> None:
    partial = calls(
        call("call_1", '{"order_id": "A-1001", "amount_cents": 129', name="issue_refund"), finish_reason="length"
    )
    with RawEndpoint([partial, DONE]) as endpoint:
        trace = episode(endpoint)
    [event] = trace.tool_events()
    assert (event.outcome.value, event.error_code) == ("invalid", "malformed_arguments")
    assert trace.steps[0].note == (
        "cut at the completion token limit (finish_reason 'length'): its tool calls may be incomplete"
    )
    assert trace.steps[0].tool_calls[0].arguments == '{"order_id": "A-1001", "amount_cents": 129'
    assert not verdict_success(trace)


# ---- reasoning fields: recorded nowhere the endpoint sees them again -------------------------------------------------


@pytest.mark.parametrize(
    "reasoning",
    [
        {"reasoning_content": "The user wants a refund; look the order up first."},  # DeepSeek, vLLM, llama.cpp
        {"reasoning": "Look the order up first.", "reasoning_content": "Look the order up first."},  # vLLM >= 0.10
        {"reasoning": "Look it up.", "reasoning_details": [{"type": "reasoning.text", "text": "Look it up."}]},
    ],
    ids=["reasoning_content", "reasoning", "openrouter"],
)
def test_reasoning_is_never_sent_back_to_the_endpoint(reasoning: dict[str, Any]) -> None:
    """DeepSeek answers 400 to a request whose assistant message carries ``reasoning_content``."""
    first = completion({"content": None, **reasoning, "tool_calls": [call("call_1", GET)]}, "tool_calls")
    second = completion({"content": None, **reasoning, "tool_calls": [call("call_2", REFUND, name="issue_refund")]})
    with RawEndpoint([first, second, completion({"content": "Refunded.", **reasoning})]) as endpoint:
        trace = episode(endpoint)
        requests = endpoint.received
    assert trace.termination is TerminationReason.FINAL_ANSWER and verdict_success(trace)
    assert len(requests) == 3
    for request in requests:
        for message in request["messages"]:
            assert set(message) <= {"role", "content", "tool_calls", "tool_call_id"}, message


# ---- refusals --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        {"content": None, "refusal": "I'm sorry, I can't help with refunds."},  # OpenAI
        {"content": [{"type": "refusal", "refusal": "I'm sorry, I can't help with refunds."}]},  # as content parts
    ],
    ids=["message.refusal", "refusal-part"],
)
def test_a_refusal_ends_the_episode_at_once_as_its_final_answer_graded_on_the_world(message: dict[str, Any]) -> None:
    with RawEndpoint([completion(message)]) as endpoint:
        trace = episode(endpoint)
        assert endpoint.requests == 1  # no nudge: a refusal is not an empty reply
    assert trace.termination is TerminationReason.FINAL_ANSWER and trace.error is None  # not an endpoint failure
    assert trace.final_answer == "I'm sorry, I can't help with refunds."
    assert trace.steps[0].note == "refusal: I'm sorry, I can't help with refunds."
    assert not verdict_success(trace)  # the task was not done


def test_a_refusal_on_several_lines_is_one_line_in_the_note() -> None:
    refusal = "I can't.\n\x1b[31mReally\x1b[0m."
    with RawEndpoint([completion({"content": None, "refusal": refusal})]) as endpoint:
        trace = episode(endpoint)
    assert trace.steps[0].note == "refusal: I can't. \\x1b[31mReally\\x1b[0m."
    assert trace.final_answer == refusal  # the record keeps what the model said


def test_a_refusal_that_is_not_text_is_a_provider_error_naming_it(sleep: RecordingSleep) -> None:
    with RawEndpoint([completion({"content": None, "refusal": {"reason": "policy"}})]) as endpoint:
        failure = complete(endpoint, sleep)
    assert isinstance(failure, ProviderFailure)
    assert failure.message == "the endpoint returned message.refusal that is an object, not a string"


# ---- errors inside a 200, numbers too long to read ---------------------------------------------------------------


def test_an_openrouter_error_inside_the_choice_is_a_failed_trial_and_no_call_runs() -> None:
    """OpenRouter: a provider failing mid-generation is a 200 with the error in the choice, finish_reason "error"."""
    error = {"code": 502, "message": "Upstream provider returned an invalid response"}
    reply = calls(
        call("call_1", '{"order_id": "A-1001", "amount', name="issue_refund"),
        finish_reason="error",
        choice={"native_finish_reason": "error", "error": error},
        provider="DeepInfra",
    )
    with RawEndpoint([reply]) as endpoint:
        trace = episode(endpoint)
    assert trace.termination is TerminationReason.PROVIDER_ERROR
    assert trace.error == (
        "the endpoint returned an error in place of the model's reply (with HTTP 200): "
        "Upstream provider returned an invalid response"
    )
    assert trace.tool_events() == []


@pytest.mark.parametrize(
    "fields",
    [
        {"choice": {"finish_reason": "error"}},  # no error object, only the finish reason
        {"error": {"message": "Upstream provider returned an invalid response", "code": 502}},  # beside the choices
    ],
    ids=["finish-reason", "top-level"],
)
def test_an_error_beside_a_reply_is_never_an_answer(fields: dict[str, Any]) -> None:
    with RawEndpoint([completion({"content": "Order A-1001 is refunded."}, **fields)]) as endpoint:
        trace = episode(endpoint)
    assert trace.termination is TerminationReason.PROVIDER_ERROR
    assert trace.error is not None
    assert trace.error.startswith("the endpoint returned an error in place of the model's reply (with HTTP 200)")
    assert trace.final_answer is None


@pytest.mark.parametrize("empty", [None, "", {}], ids=["null", "empty-text", "empty-object"])
def test_an_error_field_that_is_null_or_empty_is_no_error(sleep: RecordingSleep, empty: Any) -> None:
    with RawEndpoint([completion({"content": "Done."}, choice={"error": empty}, error=empty)]) as endpoint:
        response = complete(endpoint, sleep)
    assert response.content == "Done."


def test_an_integer_too_long_to_read_is_named(sleep: RecordingSleep) -> None:
    body = completion({"content": "Done."}).replace(b'"prompt_tokens": 10', b'"prompt_tokens": ' + b"9" * 5000)
    with RawEndpoint([body]) as endpoint:
        failure = complete(endpoint, sleep)
        assert endpoint.requests == 1  # the endpoint's answer, not retried
    assert isinstance(failure, ProviderFailure) and failure.reason == "provider_error"
    assert failure.message == (
        "the endpoint returned a JSON body with a number too long to read (an integer of more than 4,300 digits)"
    )


# ---- usage ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "usage",
    [..., None, {}, {"prompt_tokens": 10}, {"completion_tokens": 2, "total_tokens": 12}],
    ids=["missing", "null", "empty", "prompt-only", "completion-only"],
)
def test_usage_missing_or_partial_is_unknown_and_the_episode_goes_on(usage: Any) -> None:
    with RawEndpoint([calls(call("call_1", REFUND, name="issue_refund"), usage=usage), DONE]) as endpoint:
        trace = episode(endpoint)
    response = trace.steps[0].response
    assert response is not None and response.usage is None
    assert trace.totals.usage_complete is False
    assert verdict_success(trace)


def test_deepseek_usage_with_cache_fields_and_details_is_read(sleep: RecordingSleep) -> None:
    usage = {
        "prompt_tokens": 120,
        "completion_tokens": 30,
        "total_tokens": 150,
        "prompt_tokens_details": {"cached_tokens": 64},
        "completion_tokens_details": {"reasoning_tokens": 21},
        "prompt_cache_hit_tokens": 64,
        "prompt_cache_miss_tokens": 56,
    }
    with RawEndpoint([completion({"content": "ok", "reasoning_content": "..."}, usage=usage)]) as endpoint:
        response = complete(endpoint, sleep)
    assert (response.usage.prompt_tokens, response.usage.completion_tokens, response.usage.cached_tokens) == (
        120,
        30,
        64,
    )


@pytest.mark.parametrize(("sent", "kept"), [({"x": 1}, ""), (["a"], ""), (True, ""), (1.5, ""), (7, "7")])
def test_a_tool_call_id_that_is_not_text_is_never_sent_back_as_a_python_rendering(sent: Any, kept: str) -> None:
    """An object id was sent back to the model as "{'x': 1}" (Python's repr); now an integer keeps its digits and
    any other non-text id reads as none, so the call gets an id of the agent's own."""
    with RawEndpoint([calls(call(sent, GET)), DONE]) as endpoint:
        trace = episode(endpoint)
        messages = endpoint.received[-1]["messages"]
    [record] = trace.steps[0].tool_calls
    expected = kept or invented_call_id(1, 1, 0)
    assert (record.call_id, record.original_id) == (expected, kept)
    [assistant] = [m for m in messages if m["role"] == "assistant"]
    assert [c["id"] for c in assistant["tool_calls"]] == [expected]
    assert [m["tool_call_id"] for m in messages if m["role"] == "tool"] == [expected]
