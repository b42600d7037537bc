"""The model's own chat template (from the GGUF metadata) rendered with the request's messages and tools.

The template is Jinja text shipped inside an untrusted file, so it is rendered in Jinja's immutable sandbox (no
attribute access to Python internals, no mutation of the values passed in). The environment mirrors the one
Hugging Face ``transformers`` renders chat templates with (``trim_blocks``, ``lstrip_blocks``, loop controls,
a ``tojson`` that keeps non-ASCII text, ``raise_exception``), because that is the format the model was trained on.

OpenAI messages are brought into the form such templates expect: assistant tool-call arguments, which OpenAI
sends as a JSON string, become the object they encode (the template serialises them itself); arguments that are
not a JSON object stay the string the model wrote. Content given as a list of parts becomes its text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

CHAT_TEMPLATE_KEY = "tokenizer.chat_template"
"""GGUF metadata key holding the chat template."""


class PromptError(ValueError):
    """The messages cannot be rendered into a prompt (the template rejected them, or they are malformed)."""


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


def _strftime_now(format_string: str) -> str:
    return datetime.now(UTC).strftime(format_string)


class ChatTemplate:
    """A compiled chat template; :meth:`render` gives the prompt text up to the assistant's turn."""

    def __init__(self, source: str, *, bos_token: str = "", eos_token: str = "") -> None:
        """Compile ``source``; PromptError if it is not valid Jinja."""
        environment = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
        )
        environment.filters["tojson"] = _tojson
        environment.globals["raise_exception"] = _raise_exception
        environment.globals["strftime_now"] = _strftime_now
        try:
            self._template = environment.from_string(source)
        except TemplateError as exc:
            raise PromptError(f"the model's chat template does not compile: {exc}") from None
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = True,
    ) -> str:
        """The prompt for ``messages`` (OpenAI chat format) and ``tools`` (OpenAI tool schemas, or None)."""
        try:
            return self._template.render(
                messages=[template_message(message) for message in messages],
                tools=list(tools) if tools else None,
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
            )
        except TemplateError as exc:
            raise PromptError(f"the chat template rejected the messages: {exc}") from None


def template_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """One OpenAI chat message in the shape chat templates expect (see the module notes)."""
    if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
        raise PromptError("every message must be an object with a string 'role'")
    converted = dict(message)
    converted["content"] = content_text(message.get("content"))
    calls = message.get("tool_calls")
    if calls:
        if not isinstance(calls, list):
            raise PromptError("'tool_calls' must be a list")
        converted["tool_calls"] = [_template_tool_call(call) for call in calls]
    return converted


def content_text(content: Any) -> str:
    """Message content as text: a string as is, a list of parts as their text joined, None as empty."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            else:
                raise PromptError("only text content parts are supported")
        return "".join(texts)
    raise PromptError("message content must be a string, a list of text parts, or null")


def _template_tool_call(call: Any) -> dict[str, Any]:
    if not isinstance(call, Mapping) or not isinstance(call.get("function"), Mapping):
        raise PromptError("every tool call must be an object with a 'function' object")
    function = dict(call["function"])
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            decoded = json.loads(arguments)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict):
            function["arguments"] = decoded
    converted = dict(call)
    converted["function"] = function
    return converted
