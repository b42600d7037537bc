"""OpenAI chat completions answered by a local text generator: prompt from the chat template, calls from the text.

:class:`LocalChatEngine` holds no HTTP code (see :mod:`contextdelta.local_model.server`) and no llama.cpp code
(see :mod:`contextdelta.local_model.llama`): it validates a request body, renders the prompt, checks it fits the
context window, generates under a lock (one generation at a time; concurrent requests queue, which also keeps
the key-value cache of the previous prompt for the next one to reuse), parses the tool calls out of the text and
builds the response body with token usage. It never re-generates and never filters what the model wrote.

Request fields: ``messages``, ``tools``, ``tool_choice``, ``temperature`` (default 1, as OpenAI's), ``top_p``,
``seed``, ``max_tokens``/``max_completion_tokens`` (default :data:`DEFAULT_MAX_TOKENS`, and never more than the
room left in the window), ``stop``; other fields are ignored. ``tool_choice="none"`` renders no tools and parses no
calls; ``auto``, ``required`` and a named function are all answered like ``auto``, since nothing constrains what
the model writes. ``stream``, ``n > 1`` and a ``model`` other than the served one are refused.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from contextdelta.local_model.prompt import ChatTemplate, PromptError
from contextdelta.local_model.toolcalls import ParsedCompletion, parse_completion

log = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 1024
"""Completion tokens allowed when a request sets no limit (a small model can otherwise ramble to the window)."""


@dataclass(frozen=True)
class Generation:
    """What one generation produced, with its token counts and timings."""

    text: str
    prompt_tokens: int
    cached_tokens: int
    """Prompt tokens whose key-value cache was reused from the previous generation."""
    completion_tokens: int
    finish_reason: Literal["stop", "length"]
    prompt_seconds: float
    """Time to process the uncached prompt tokens (until the first generated token)."""
    generation_seconds: float


class GenerationCancelled(Exception):
    """The request was abandoned (its client went away) before or while it was generated."""


def _never() -> bool:
    return False


class TextGenerator(Protocol):
    """A tokenizer and sampler over one loaded model (not thread-safe; the engine serialises calls)."""

    n_ctx: int
    """Context window in tokens: prompt and completion together."""

    def tokenize(self, text: str) -> list[int]:
        """Token ids of a rendered prompt (special tokens in the text are parsed as such)."""
        ...

    def generate(
        self,
        tokens: list[int],
        *,
        max_tokens: int,
        temperature: float,
        top_p: float,
        seed: int | None,
        stop: Sequence[str],
        cancelled: Callable[[], bool] = _never,
    ) -> Generation:
        """Generate after ``tokens`` until an end-of-generation token, a ``stop`` string or ``max_tokens``.

        Raises GenerationCancelled when ``cancelled()`` turns true (checked between prompt batches and tokens).
        """
        ...


class EndpointError(Exception):
    """A request the endpoint answers with an OpenAI-style error body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type_: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.code = code
        self.param = param

    def body(self) -> dict[str, Any]:
        """The JSON error body: ``{"error": {"message", "type", "param", "code"}}``."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class ChatCompletionRequest(BaseModel):
    """The parts of an OpenAI chat-completions request the local endpoint uses (other fields are ignored)."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    stream: bool = False
    n: int = 1


class LocalChatEngine:
    """Chat completions for one served model name over a :class:`TextGenerator`."""

    def __init__(
        self,
        generator: TextGenerator,
        template: ChatTemplate,
        served_name: str,
        *,
        default_max_tokens: int = DEFAULT_MAX_TOKENS,
        fingerprint: str = "",
        record_path: Path | None = None,
    ) -> None:
        """``fingerprint`` identifies the exact model file (e.g. its SHA-256) in ``system_fingerprint``;
        ``record_path``, when given, gets one JSON line per generation with the raw text the model wrote."""
        self.generator = generator
        self.template = template
        self.served_name = served_name
        self.default_max_tokens = default_max_tokens
        self.system_fingerprint = f"contextdelta-local-{fingerprint[:16]}" if fingerprint else "contextdelta-local"
        self.record_path = record_path
        self._lock = threading.Lock()
        self._record_lock = threading.Lock()
        self.requests_served = 0

    def models(self) -> dict[str, Any]:
        """The ``GET /v1/models`` body."""
        return {"object": "list", "data": [self.model_card()]}

    def model_card(self) -> dict[str, Any]:
        """The served model as an OpenAI model object."""
        return {"id": self.served_name, "object": "model", "created": 0, "owned_by": "contextdelta-local"}

    def chat_completion(self, body: Any, cancelled: Callable[[], bool] = _never) -> dict[str, Any]:
        """Answer one chat-completions request body; raises EndpointError for anything it cannot answer.

        ``cancelled`` says whether the client has gone away: a request waiting for the model, or being generated,
        then stops with GenerationCancelled instead of holding the model for a reply nobody reads.
        """
        request = self._validated(body)
        tools = request.tools or None
        use_tools = tools is not None and request.tool_choice != "none"
        try:
            prompt = self.template.render(request.messages, tools if use_tools else None)
        except PromptError as exc:
            raise EndpointError(400, str(exc), param="messages") from None
        stop = [request.stop] if isinstance(request.stop, str) else list(request.stop or [])
        requested = request.max_completion_tokens or request.max_tokens or self.default_max_tokens
        started = time.perf_counter()
        while not self._lock.acquire(timeout=0.25):
            if cancelled():
                raise GenerationCancelled("the client went away while the request was queued")
        try:
            waited = time.perf_counter() - started
            tokens = self.generator.tokenize(prompt)
            room = self.generator.n_ctx - len(tokens)
            if room < 1:
                raise EndpointError(
                    400,
                    f"This model's maximum context length is {self.generator.n_ctx} tokens. However, your messages "
                    f"resulted in {len(tokens)} tokens. Please reduce the length of the messages.",
                    code="context_length_exceeded",
                    param="messages",
                )
            generation = self.generator.generate(
                tokens,
                max_tokens=min(requested, room),
                temperature=request.temperature,
                top_p=request.top_p,
                seed=request.seed,
                stop=stop,
                cancelled=cancelled,
            )
            self.requests_served += 1
        finally:
            self._lock.release()
        tool_names = [name for name in (_tool_name(tool) for tool in tools or []) if name]
        parsed = parse_completion(generation.text, tool_names) if use_tools else None
        if self.record_path is not None:
            self._record(self.record_path, generation, parsed)
        log.info(
            "chat: %d prompt tokens (%d cached) in %.1fs, %d completion tokens in %.1fs, %d tool calls, %.1fs queued",
            generation.prompt_tokens,
            generation.cached_tokens,
            generation.prompt_seconds,
            generation.completion_tokens,
            generation.generation_seconds,
            len(parsed.tool_calls) if parsed else 0,
            waited,
        )
        return self._response(generation, parsed)

    # ---- internals -------------------------------------------------------------------------------------------

    def _validated(self, body: Any) -> ChatCompletionRequest:
        if not isinstance(body, dict):
            raise EndpointError(400, "the request body must be a JSON object")
        try:
            request = ChatCompletionRequest.model_validate(body)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise EndpointError(400, f"invalid request: {where}: {first['msg']}", param=where or None) from None
        if request.stream:
            raise EndpointError(400, "stream=true is not supported by the local endpoint", param="stream")
        if request.n != 1:
            raise EndpointError(400, "only n=1 is supported", param="n")
        if request.model is not None and request.model != self.served_name:
            raise EndpointError(
                404,
                f"The model {request.model!r} does not exist here; this endpoint serves {self.served_name!r}.",
                code="model_not_found",
                param="model",
            )
        return request

    def _record(self, path: Path, generation: Generation, parsed: ParsedCompletion | None) -> None:
        line = {
            "model": self.served_name,
            "prompt_tokens": generation.prompt_tokens,
            "cached_tokens": generation.cached_tokens,
            "completion_tokens": generation.completion_tokens,
            "finish_reason": generation.finish_reason,
            "prompt_seconds": round(generation.prompt_seconds, 3),
            "generation_seconds": round(generation.generation_seconds, 3),
            "text": generation.text,
            "tool_calls": [[c.name, c.arguments, c.form] for c in parsed.tool_calls] if parsed else None,
        }
        with self._record_lock, path.open("a", encoding="utf-8") as sink:
            sink.write(json.dumps(line, ensure_ascii=False) + "\n")

    def _response(self, generation: Generation, parsed: ParsedCompletion | None) -> dict[str, Any]:
        digest = hashlib.sha256(f"{time.time_ns()}:{generation.text}".encode()).hexdigest()
        message: dict[str, Any] = {"role": "assistant", "content": generation.text}
        finish_reason: str = generation.finish_reason
        if parsed is not None:
            message["content"] = parsed.content
            if parsed.tool_calls:
                message["tool_calls"] = [
                    {
                        "id": f"call_{hashlib.sha256(f'{digest}:{index}'.encode()).hexdigest()[:24]}",
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                    for index, call in enumerate(parsed.tool_calls)
                ]
                if finish_reason == "stop":
                    finish_reason = "tool_calls"
        return {
            "id": f"chatcmpl-{digest[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.served_name,
            "system_fingerprint": self.system_fingerprint,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
            "usage": {
                "prompt_tokens": generation.prompt_tokens,
                "completion_tokens": generation.completion_tokens,
                "total_tokens": generation.prompt_tokens + generation.completion_tokens,
                "prompt_tokens_details": {"cached_tokens": generation.cached_tokens},
            },
        }


def _tool_name(tool: Any) -> str | None:
    if isinstance(tool, dict):
        function = tool.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            return str(function["name"])
    return None
