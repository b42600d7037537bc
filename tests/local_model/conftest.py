"""A scripted text generator (a test double for llama.cpp) and an engine over the real Qwen chat template."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from contextdelta.local_model.engine import Generation, GenerationCancelled, LocalChatEngine
from contextdelta.local_model.prompt import ChatTemplate

FIXTURES = Path(__file__).parent / "fixtures"
SERVED = "qwen2.5-coder-0.5b-instruct-q4_k_m"


class ScriptedGenerator:
    """Answers with scripted texts in order; tokens are characters (so lengths are easy to reason about).

    Records every call and the most generations that ever ran at once; reuses the common prefix with the
    previous prompt like llama.cpp does.
    """

    def __init__(self, replies: Sequence[str], *, n_ctx: int = 100_000, delay_s: float = 0.0) -> None:
        self.replies = list(replies)
        self.n_ctx = n_ctx
        self.delay_s = delay_s
        self.calls: list[dict[str, object]] = []
        self.prompts: list[str] = []
        self.running = 0
        self.most_at_once = 0
        self._previous: list[int] = []
        self._guard = threading.Lock()

    def tokenize(self, text: str) -> list[int]:
        self.prompts.append(text)
        return [ord(c) for c in text]

    def generate(
        self,
        tokens: list[int],
        *,
        max_tokens: int,
        temperature: float,
        top_p: float,
        seed: int | None,
        stop: Sequence[str],
        cancelled: Callable[[], bool] = lambda: False,
    ) -> Generation:
        with self._guard:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        try:
            deadline = time.monotonic() + self.delay_s
            while time.monotonic() < deadline:
                if cancelled():
                    raise GenerationCancelled("cancelled")
                time.sleep(0.01)
            self.calls.append({"max_tokens": max_tokens, "temperature": temperature, "seed": seed, "stop": list(stop)})
            cached = 0
            for a, b in zip(self._previous, tokens, strict=False):
                if a != b:
                    break
                cached += 1
            self._previous = list(tokens)
            text = self.replies.pop(0)
            finish = "stop"
            if len(text) > max_tokens:
                text, finish = text[:max_tokens], "length"
            return Generation(
                text=text,
                prompt_tokens=len(tokens),
                cached_tokens=min(cached, len(tokens) - 1),
                completion_tokens=len(text),
                finish_reason=finish,  # type: ignore[arg-type]
                prompt_seconds=0.0,
                generation_seconds=0.0,
            )
        finally:
            with self._guard:
                self.running -= 1


@pytest.fixture
def qwen_template() -> ChatTemplate:
    return ChatTemplate((FIXTURES / "qwen2.5-coder-0.5b.chat_template.jinja").read_text(encoding="utf-8"))


@pytest.fixture
def make_engine(qwen_template: ChatTemplate) -> Callable[..., tuple[LocalChatEngine, ScriptedGenerator]]:
    def make(replies: Sequence[str], **options: object) -> tuple[LocalChatEngine, ScriptedGenerator]:
        engine_options = {k: options.pop(k) for k in ("default_max_tokens",) if k in options}
        generator = ScriptedGenerator(replies, **options)  # type: ignore[arg-type]
        engine = LocalChatEngine(generator, qwen_template, SERVED, fingerprint="ab" * 32, **engine_options)  # type: ignore[arg-type]
        return engine, generator

    return make
