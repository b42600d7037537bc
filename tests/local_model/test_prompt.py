"""Rendering the models' own chat templates (as shipped in their GGUF files) with OpenAI messages and tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextdelta.local_model.prompt import ChatTemplate, PromptError, template_message
from contextdelta.worlds import ProtectionMode, get_world

FIXTURES = Path(__file__).parent / "fixtures"
TEMPLATES = sorted(FIXTURES.glob("*.chat_template.jinja"))


def _template(path: Path) -> ChatTemplate:
    return ChatTemplate(path.read_text(encoding="utf-8"), eos_token="<|im_end|>")


HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "You are an operations agent."},
    {"role": "user", "content": "Refund the express fee on B-2198 (€14.90)."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_order", "arguments": '{"order_id": "B-2198"}'},
            },
            {"id": "call_2", "type": "function", "function": {"name": "get_order", "arguments": "{order: B-2198"}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"key": "order/order/B-2198", "version": 1}'},
    {"role": "tool", "tool_call_id": "call_2", "content": '{"error": "invalid_arguments"}'},
]


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.name)
def test_tools_history_and_generation_prompt_are_rendered_in_the_model_format(path: Path) -> None:
    tools = get_world("order").tool_schemas(ProtectionMode.FRESHNESS_CONTRACT)

    prompt = _template(path).render(HISTORY, tools)

    assert prompt.startswith("<|im_start|>system\nYou are an operations agent.\n\n# Tools\n")
    for tool in tools:  # every schema, serialised like transformers' tojson (non-ASCII kept)
        assert json.dumps(tool, ensure_ascii=False) in prompt
    assert "<|im_start|>user\nRefund the express fee on B-2198 (€14.90).<|im_end|>" in prompt
    # arguments sent as a JSON string become the object; ones that are not JSON stay the string the model wrote
    assert '<tool_call>\n{"name": "get_order", "arguments": {"order_id": "B-2198"}}\n</tool_call>' in prompt
    assert '{"name": "get_order", "arguments": "{order: B-2198"}' in prompt
    # consecutive tool results share one user turn
    assert prompt.count("<tool_response>") == 2
    assert "</tool_response>\n<tool_response>" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_without_tools_no_tool_section_is_rendered() -> None:
    prompt = _template(TEMPLATES[0]).render([{"role": "user", "content": "hello"}], None)
    assert "# Tools" not in prompt
    assert prompt.endswith("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n")


def test_text_parts_and_null_content_become_text() -> None:
    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    message = template_message({"role": "user", "content": parts})
    assert message["content"] == "ab"
    assert template_message({"role": "assistant", "content": None})["content"] == ""
    with pytest.raises(PromptError):
        template_message({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]})
    with pytest.raises(PromptError):
        template_message({"content": "no role"})


def test_the_template_is_sandboxed() -> None:
    """The template comes from an untrusted file: it cannot reach Python internals or change its inputs."""
    escape = ChatTemplate("{{ ''.__class__.__mro__[1].__subclasses__() }}")
    with pytest.raises(PromptError):
        escape.render([{"role": "user", "content": "x"}])
    mutate = ChatTemplate("{{ messages.append({'role': 'user'}) }}")
    with pytest.raises(PromptError):
        mutate.render([{"role": "user", "content": "x"}])


def test_raise_exception_in_a_template_is_a_prompt_error() -> None:
    strict = ChatTemplate("{% if messages[0].role != 'system' %}{{ raise_exception('system first') }}{% endif %}")
    with pytest.raises(PromptError, match="system first"):
        strict.render([{"role": "user", "content": "x"}])


def test_a_template_that_does_not_compile_is_refused() -> None:
    with pytest.raises(PromptError, match="does not compile"):
        ChatTemplate("{% for %}")
