"""Token prices per model, and what a usage costs with and without prompt caching.

Unknown price means unknown cost, never zero. A provider's prompt cache bills the prompt tokens it served from
the cache at a lower rate (``cached_input_per_mtok``) and, at some providers, the tokens it wrote to the cache at
a higher one (``cache_write_per_mtok``); a rate a price leaves out bills those tokens at the input rate, so a
price without caching rates costs the same with and without caching.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from contextdelta.providers.base import Usage


class Price(BaseModel):
    """USD per one million tokens."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    input_per_mtok: float = Field(ge=0, description="Prompt tokens not served from the cache.")
    output_per_mtok: float = Field(ge=0, description="Completion tokens.")
    cached_input_per_mtok: float | None = Field(
        default=None,
        ge=0,
        description="Prompt tokens served from the provider's prompt cache (cache reads); null: the input rate.",
    )
    cache_write_per_mtok: float | None = Field(
        default=None,
        ge=0,
        description="Prompt tokens written to the provider's prompt cache, where it reports and bills them "
        "apart; null: the input rate.",
    )

    def cost(self, usage: Usage, *, caching: bool = True) -> float:
        """USD for ``usage``. With ``caching`` the provider-reported cached and cache-write tokens are billed at
        their rates; without, every prompt token at the input rate (what the same tokens cost with no cache)."""
        if not caching:
            return (usage.prompt_tokens * self.input_per_mtok + usage.completion_tokens * self.output_per_mtok) / 1e6
        split = usage.prompt_split()
        cached_rate = self.input_per_mtok if self.cached_input_per_mtok is None else self.cached_input_per_mtok
        write_rate = self.input_per_mtok if self.cache_write_per_mtok is None else self.cache_write_per_mtok
        return (
            split.uncached * self.input_per_mtok
            + split.cached * cached_rate
            + split.cache_write * write_rate
            + usage.completion_tokens * self.output_per_mtok
        ) / 1e6

    @property
    def is_free(self) -> bool:
        """Every rate is zero (the scripted server, the embedded model): cost is a true zero."""
        rates = (self.input_per_mtok, self.output_per_mtok, self.cached_input_per_mtok, self.cache_write_per_mtok)
        return all(not r for r in rates)


class PriceTableError(ValueError):
    """A price table file that cannot be used; names the file, the model, the field and the problem."""


# List prices as published by the providers (USD per 1M tokens), checked 2026-11; OpenAI bills no cache writes.
# Models served by the scripted test server and the embedded local model cost nothing to run, which is a true
# zero, not an unknown.
DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4o": Price(input_per_mtok=2.50, output_per_mtok=10.00, cached_input_per_mtok=1.25),
    "gpt-4o-mini": Price(input_per_mtok=0.15, output_per_mtok=0.60, cached_input_per_mtok=0.075),
    "gpt-4.1": Price(input_per_mtok=2.00, output_per_mtok=8.00, cached_input_per_mtok=0.50),
    "gpt-4.1-mini": Price(input_per_mtok=0.40, output_per_mtok=1.60, cached_input_per_mtok=0.10),
    "gpt-4.1-nano": Price(input_per_mtok=0.10, output_per_mtok=0.40, cached_input_per_mtok=0.025),
    "claude-sonnet-4-5": Price(
        input_per_mtok=3.00, output_per_mtok=15.00, cached_input_per_mtok=0.30, cache_write_per_mtok=3.75
    ),
    "scripted-oracle": Price(input_per_mtok=0, output_per_mtok=0),
    "scripted-unsafe": Price(input_per_mtok=0, output_per_mtok=0),
    "scripted-context_trusting": Price(input_per_mtok=0, output_per_mtok=0),
    "qwen2.5-coder-1.5b-instruct-q4_k_m": Price(input_per_mtok=0, output_per_mtok=0),
    "qwen2.5-coder-0.5b-instruct-q4_k_m": Price(input_per_mtok=0, output_per_mtok=0),
}

PRICE_TABLE_FORMAT = (
    'JSON: {"model": {"input_per_mtok": .., "output_per_mtok": .., "cached_input_per_mtok": .. (optional), '
    '"cache_write_per_mtok": .. (optional)}}, USD per million tokens'
)
"""What a ``--price-table`` file holds, for error messages."""


class PriceTable:
    """Model name -> price; a file (see `PRICE_TABLE_FORMAT`) adds models and overrides built-in prices."""

    def __init__(self, prices: Mapping[str, Price] | None = None) -> None:
        self.prices = dict(DEFAULT_PRICES if prices is None else prices)

    @classmethod
    def load(cls, path: Path | None) -> PriceTable:
        """The built-in table, overridden by the file at ``path``.

        Raises:
            PriceTableError: unreadable or not JSON, not an object of objects, an unknown field, a rate that is
                missing, not a number, negative or not finite (the message names file, model and field).
        """
        table = cls()
        if path is None:
            return table
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise PriceTableError(f"{path}: cannot read price table ({exc}); expected {PRICE_TABLE_FORMAT}") from exc
        if not isinstance(raw, dict):
            raise PriceTableError(f"{path}: expected a JSON object of model -> price ({PRICE_TABLE_FORMAT})")
        for model, entry in raw.items():
            if not model.strip():
                raise PriceTableError(f"{path}: a model name is empty")
            try:
                table.prices[model] = Price.model_validate(entry)
            except ValidationError as exc:
                err = exc.errors(include_url=False)[0]
                field = ".".join(str(p) for p in err["loc"])
                where = f"{model}.{field}" if field else model
                raise PriceTableError(
                    f"{path}: {where}: {err['msg']} (got {err.get('input')!r}); expected {PRICE_TABLE_FORMAT}"
                ) from exc
        return table

    def price(self, model: str) -> Price | None:
        """The price of ``model``; None when unknown."""
        return self.prices.get(model)

    def for_models(self, models: list[str]) -> dict[str, Price | None]:
        """The prices of ``models`` (None for an unknown one), sorted by model: what a run records."""
        return {m: self.prices.get(m) for m in sorted(set(models))}

    def cost(self, model: str, usage: Usage | None, *, caching: bool = True) -> float | None:
        """USD for ``usage`` on ``model``; None when the price or the usage is unknown."""
        price = self.prices.get(model)
        if price is None or usage is None:
            return None
        return price.cost(usage, caching=caching)
