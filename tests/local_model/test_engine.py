"""The local chat engine: prompt, context window, tool calls, usage and queueing, over a scripted generator."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

from contextdelta.local_model.engine import EndpointError, GenerationCancelled
from contextdelta.worlds import ProtectionMode, get_world

SERVED = "qwen2.5-coder-0.5b-instruct-q4_k_m"
TOOLS = get_world("order").tool_schemas(ProtectionMode.UNPROTECTED)
MESSAGES = [
    {"role": "system", "content": "You are an operations agent."},
    {"role": "user", "content": "Cancel order B-2210."},
]
CALL = '<tool_call>\n{"name": "get_order", "arguments": {"order_id": "B-2210"}}\n</tool_call>'


def _body(**extra: Any) -> dict[str, Any]:
    return {"model": SERVED, "messages": MESSAGES, "tools": TOOLS, "temperature": 0, "seed": 7, **extra}


MakeEngine = Callable[..., Any]


def test_tool_calls_are_returned_in_openai_form_with_usage(make_engine: MakeEngine) -> None:
    engine, generator = make_engine([f"{CALL}\n{CALL}"])

    response = engine.chat_completion(_body())

    choice = response["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    calls = choice["message"]["tool_calls"]
    assert [(c["type"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("function", "get_order", {"order_id": "B-2210"})
    ] * 2  # a repeated call is returned as the model wrote it, not filtered
    assert len({c["id"] for c in calls}) == 2 and all(c["id"].startswith("call_") for c in calls)
    assert choice["message"]["content"] is None
    usage = response["usage"]
    assert usage["prompt_tokens"] == len(generator.prompts[0])
    assert usage["completion_tokens"] == len(f"{CALL}\n{CALL}")
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["prompt_tokens_details"] == {"cached_tokens": 0}
    assert response["model"] == SERVED and response["object"] == "chat.completion"
    assert generator.calls[0]["temperature"] == 0 and generator.calls[0]["seed"] == 7


def test_the_prompt_is_the_model_template_with_the_tools(make_engine: MakeEngine) -> None:
    engine, generator = make_engine(["Done."])
    engine.chat_completion(_body())
    prompt = generator.prompts[0]
    assert prompt.startswith("<|im_start|>system\nYou are an operations agent.\n\n# Tools")
    assert '"name": "cancel_order"' in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_a_final_answer_is_content_with_stop(make_engine: MakeEngine) -> None:
    engine, _ = make_engine(["I cancelled B-2210."])
    choice = engine.chat_completion(_body())["choices"][0]
    assert choice == {
        "index": 0,
        "message": {"role": "assistant", "content": "I cancelled B-2210."},
        "logprobs": None,
        "finish_reason": "stop",
    }


def test_the_cached_prefix_of_the_previous_prompt_is_reported(make_engine: MakeEngine) -> None:
    engine, generator = make_engine([CALL, "Done."])
    engine.chat_completion(_body())
    follow_up = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_order", "arguments": '{"order_id": "B-2210"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"status": "paid", "version": 1}'},
    ]
    usage = engine.chat_completion(_body(messages=follow_up))["usage"]
    shared = len(generator.prompts[0]) - len("<|im_start|>assistant\n")
    assert usage["prompt_tokens_details"]["cached_tokens"] >= shared


def test_a_prompt_longer_than_the_window_is_context_length_exceeded(make_engine: MakeEngine) -> None:
    engine, generator = make_engine(["never"], n_ctx=100)

    with pytest.raises(EndpointError) as raised:
        engine.chat_completion(_body())

    error = raised.value
    assert (error.status, error.code, error.type) == (400, "context_length_exceeded", "invalid_request_error")
    assert "maximum context length is 100 tokens" in error.message
    assert generator.calls == []


def test_max_tokens_defaults_and_is_clamped_to_the_room_left(make_engine: MakeEngine) -> None:
    engine, generator = make_engine(["a", "b", "c"], default_max_tokens=333)
    engine.chat_completion(_body())
    engine.chat_completion(_body(max_tokens=50))
    prompt_length = len(generator.prompts[0])
    generator.n_ctx = prompt_length + 10
    engine.chat_completion(_body(max_tokens=50))
    assert [c["max_tokens"] for c in generator.calls] == [333, 50, 10]


def test_a_completion_cut_by_max_tokens_reports_length(make_engine: MakeEngine) -> None:
    engine, _ = make_engine([CALL])
    choice = engine.chat_completion(_body(max_tokens=40))["choices"][0]
    # the open tag is still parsed: what the model wrote so far is passed on, cut arguments and all
    assert choice["finish_reason"] == "length"
    assert choice["message"]["tool_calls"][0]["function"]["name"] == "get_order"


def test_tool_choice_none_sends_no_tools_and_parses_no_calls(make_engine: MakeEngine) -> None:
    engine, generator = make_engine([CALL])
    message = engine.chat_completion(_body(tool_choice="none"))["choices"][0]["message"]
    assert "# Tools" not in generator.prompts[0]
    assert message == {"role": "assistant", "content": CALL}


def test_without_tools_text_is_not_parsed(make_engine: MakeEngine) -> None:
    engine, _ = make_engine([CALL])
    body = _body()
    del body["tools"]
    assert "tool_calls" not in engine.chat_completion(body)["choices"][0]["message"]


def test_stop_strings_are_passed_to_the_generator(make_engine: MakeEngine) -> None:
    engine, generator = make_engine(["x", "y"])
    engine.chat_completion(_body(stop="END"))
    engine.chat_completion(_body(stop=["A", "B"]))
    assert [c["stop"] for c in generator.calls] == [["END"], ["A", "B"]]


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ([1, 2], 400, "JSON object"),
        ({"model": SERVED, "messages": []}, 400, "messages"),
        ({"model": SERVED, "messages": MESSAGES, "stream": True}, 400, "stream"),
        ({"model": SERVED, "messages": MESSAGES, "n": 2}, 400, "n=1"),
        ({"model": SERVED, "messages": MESSAGES, "temperature": 5}, 400, "temperature"),
        ({"model": "gpt-4o", "messages": MESSAGES}, 404, "serves 'qwen2.5-coder-0.5b-instruct-q4_k_m'"),
        ({"model": SERVED, "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "text"),
    ],
)
def test_requests_it_cannot_answer_get_openai_errors(
    make_engine: MakeEngine, body: Any, status: int, fragment: str
) -> None:
    engine, generator = make_engine(["never"])
    with pytest.raises(EndpointError) as raised:
        engine.chat_completion(body)
    assert raised.value.status == status
    assert fragment in raised.value.message
    assert set(raised.value.body()["error"]) == {"message", "type", "param", "code"}
    assert generator.calls == []


def test_concurrent_requests_are_served_one_at_a_time(make_engine: MakeEngine) -> None:
    engine, generator = make_engine(["one", "two", "three", "four"], delay_s=0.05)
    answers: list[str] = []

    def ask() -> None:
        answers.append(engine.chat_completion(_body())["choices"][0]["message"]["content"])

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(answers) == ["four", "one", "three", "two"]
    assert generator.most_at_once == 1
    assert engine.requests_served == 4


@pytest.mark.slow
def test_a_request_whose_client_left_while_queued_is_dropped(make_engine: MakeEngine) -> None:
    engine, generator = make_engine(["first", "never"], delay_s=0.5)
    first = threading.Thread(target=engine.chat_completion, args=(_body(),))
    first.start()
    while generator.running == 0:
        pass

    with pytest.raises(GenerationCancelled):
        engine.chat_completion(_body(), lambda: True)

    first.join()
    assert len(generator.calls) == 1 and generator.replies == ["never"]


def test_the_model_list_names_the_served_model(make_engine: MakeEngine) -> None:
    engine, _ = make_engine([])
    assert engine.models()["data"] == [
        {"id": SERVED, "object": "model", "created": 0, "owned_by": "contextdelta-local"}
    ]
