"""The llama.cpp side of the local model (llama-cpp-python): load a GGUF file, tokenize, generate.

Prompt-prefix reuse: the key-value cache of the previous call is kept and only the tokens after the longest
prefix it shares with the new prompt are evaluated. An agent's consecutive requests share everything up to the
newest tool results, so most prompt tokens are not processed again; the reused count is reported as
``cached_tokens``. The prompt is evaluated here in batches (as ``Llama.generate`` would, through the same
``Llama.eval``) so that a request whose client has gone away stops between batches instead of holding the model
for minutes; ``Llama.generate`` then finds the whole prompt cached and only samples. This uses llama-cpp-python
internals (``n_tokens``, ``_input_ids``, the context handle), which is why its version is pinned.

Episodes run in a shuffled order across worlds and protection modes, so the previous prompt often differs from
the next one right inside the first message (the system prompt with the mode's tool schemas, ~1,000-1,400
tokens). The context state right after that first message is therefore snapshotted (llama.cpp state data, only
the used cache cells: ~17 MB for the 0.5B model, ~40 MB for the 1.5B) for up to ``SNAPSHOT_SLOTS`` distinct
first messages, and restored when a prompt starting with one of them shares less with the live cache.

Sampling follows the request: temperature 0 is greedy decoding; otherwise top-p and temperature with the
request's seed (no top-k or min-p, which OpenAI endpoints do not apply).
"""

from __future__ import annotations

import codecs
import ctypes
import random
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from contextdelta.local_model.engine import Generation, GenerationCancelled
from contextdelta.local_model.prompt import CHAT_TEMPLATE_KEY, ChatTemplate

SNAPSHOT_SLOTS = 8
"""First-message snapshots kept (least recently used dropped): one per world and protection mode, with room."""

_Snapshot = bytes
"""A saved llama.cpp context state, taken right after the first message was evaluated."""


def _never() -> bool:
    return False


class LlamaGenerator:
    """A :class:`~contextdelta.local_model.engine.TextGenerator` over one ``llama_cpp.Llama`` (not thread-safe)."""

    def __init__(self, llama: Any) -> None:
        self._llama = llama
        self.n_ctx: int = int(llama.n_ctx())
        self._end_of_message = int(llama.token_eos())
        self._snapshots: OrderedDict[tuple[int, ...], _Snapshot] = OrderedDict()

    @property
    def llama(self) -> Any:
        """The underlying ``llama_cpp.Llama``."""
        return self._llama

    def tokenize(self, text: str) -> list[int]:
        """Token ids of a rendered prompt; special tokens written in the text (``<|im_start|>``) are parsed."""
        return list(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

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
        """Sample up to ``max_tokens`` tokens after ``tokens`` (see the module notes).

        Raises GenerationCancelled as soon as ``cancelled()`` is true between prompt batches or tokens.
        """
        import llama_cpp

        if not tokens:
            raise ValueError("empty prompt")
        llama = self._llama
        started = time.perf_counter()
        cached = self._evaluate_prompt(tokens, cancelled)
        llama.set_seed(seed if seed is not None else random.randrange(2**31))
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        text = ""
        produced = 0
        finish: Literal["stop", "length"] = "length"
        first_token_at: float | None = None
        vocab = llama._model.vocab
        stream = llama.generate(
            tokens, temp=temperature, top_p=top_p, top_k=0, min_p=0.0, typical_p=1.0, repeat_penalty=1.0
        )
        try:
            for token in stream:
                if first_token_at is None:
                    first_token_at = time.perf_counter()
                if llama_cpp.llama_vocab_is_eog(vocab, token):
                    finish = "stop"
                    break
                produced += 1
                text += decoder.decode(llama.detokenize([token]))
                cut = _stop_position(text, stop)
                if cut is not None:
                    text = text[:cut]
                    finish = "stop"
                    break
                if produced >= max_tokens:
                    break
                if cancelled():
                    raise GenerationCancelled("the client went away")
        finally:
            stream.close()
        text += decoder.decode(b"", final=True)
        ended = time.perf_counter()
        first = first_token_at or ended
        return Generation(
            text=text,
            prompt_tokens=len(tokens),
            cached_tokens=cached,
            completion_tokens=produced,
            finish_reason=finish,
            prompt_seconds=first - started,
            generation_seconds=ended - first,
        )

    def _evaluate_prompt(self, tokens: list[int], cancelled: Callable[[], bool]) -> int:
        """Evaluate all but the last prompt token after the cached prefix; returns the reused prefix length."""
        llama = self._llama
        reused = _common_prefix(list(llama._input_ids), tokens)
        head = self._head_length(tokens)
        snapshot = self._snapshots.get(tuple(tokens[:head])) if head else None
        if snapshot is not None and head > reused:
            self._restore(tuple(tokens[:head]), snapshot)
            self._snapshots.move_to_end(tuple(tokens[:head]))
            reused = head
        reused = min(reused, len(tokens) - 1)
        llama.n_tokens = reused  # Llama.eval drops every cached position from n_tokens on
        # stop at the end of the first message once, to keep a snapshot of it
        stops = [head] if head and reused < head < len(tokens) - 1 and snapshot is None else []
        position = reused
        batch = max(1, int(llama.n_batch))
        for end in [*stops, len(tokens) - 1]:
            while position < end:
                if cancelled():
                    raise GenerationCancelled("the client went away")
                upto = min(position + batch, end)
                llama.eval(tokens[position:upto])
                position = upto
            if end in stops:
                self._remember(tuple(tokens[:head]))
        return reused

    # ---- first-message snapshots -----------------------------------------------------------------------------

    def _head_length(self, tokens: list[int]) -> int:
        """Length of the first chat message (system prompt and tool schemas), through its end token; 0 if none."""
        try:
            return tokens.index(self._end_of_message) + 1
        except ValueError:
            return 0

    def _remember(self, head: tuple[int, ...]) -> None:
        import llama_cpp

        ctx = self._llama._ctx.ctx
        size = int(llama_cpp.llama_state_get_size(ctx))
        buffer = (ctypes.c_uint8 * size)()
        written = int(llama_cpp.llama_state_get_data(ctx, buffer, size))
        self._snapshots[head] = bytes(buffer)[:written]
        while len(self._snapshots) > SNAPSHOT_SLOTS:
            self._snapshots.popitem(last=False)

    def _restore(self, head: tuple[int, ...], snapshot: _Snapshot) -> None:
        import llama_cpp

        data = (ctypes.c_uint8 * len(snapshot)).from_buffer_copy(snapshot)
        if int(llama_cpp.llama_state_set_data(self._llama._ctx.ctx, data, len(snapshot))) != len(snapshot):
            raise RuntimeError("could not restore a key-value cache snapshot")
        self._llama.input_ids[: len(head)] = head
        self._llama.n_tokens = len(head)


def load_llama(path: Path, *, n_ctx: int, n_threads: int) -> tuple[LlamaGenerator, ChatTemplate]:
    """Load the GGUF file at ``path`` and compile its embedded chat template."""
    from llama_cpp import Llama

    llama = Llama(
        model_path=str(path),
        n_ctx=n_ctx,
        n_threads=n_threads,
        n_threads_batch=n_threads,
        verbose=False,
    )
    source = llama.metadata.get(CHAT_TEMPLATE_KEY)
    if not source:
        raise ValueError(f"{path}: the model file has no chat template ({CHAT_TEMPLATE_KEY})")
    template = ChatTemplate(
        source, bos_token=_token_text(llama, llama.token_bos()), eos_token=_token_text(llama, llama.token_eos())
    )
    return LlamaGenerator(llama), template


def _token_text(llama: Any, token: int) -> str:
    if token is None or token < 0:
        return ""
    return bytes(llama.detokenize([token], special=True)).decode("utf-8", errors="replace")


def _common_prefix(previous: Sequence[int], tokens: Sequence[int]) -> int:
    count = 0
    for a, b in zip(previous, tokens, strict=False):
        if a != b:
            break
        count += 1
    return count


def _stop_position(text: str, stop: Sequence[str]) -> int | None:
    positions = [text.find(s) for s in stop if s and s in text]
    return min(positions) if positions else None
