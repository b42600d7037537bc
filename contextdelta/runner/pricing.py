"""Token prices per model, for cost accounting and budgets. Unknown price means unknown cost, never zero."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from contextdelta.providers import Usage


class Price(BaseModel):
    """USD per one million tokens."""

    model_config = ConfigDict(extra="forbid")

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


class PriceTableError(ValueError):
    """A price table file that cannot be used; names the file and the problem."""


# List prices as published by the providers (USD per 1M tokens), checked 2026-11. Models served by the scripted
# test server and the embedded local model cost nothing to run, which is a true zero, not an unknown.
DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4o": Price(input_per_mtok=2.50, output_per_mtok=10.00),
    "gpt-4o-mini": Price(input_per_mtok=0.15, output_per_mtok=0.60),
    "gpt-4.1": Price(input_per_mtok=2.00, output_per_mtok=8.00),
    "gpt-4.1-mini": Price(input_per_mtok=0.40, output_per_mtok=1.60),
    "gpt-4.1-nano": Price(input_per_mtok=0.10, output_per_mtok=0.40),
    "scripted-oracle": Price(input_per_mtok=0, output_per_mtok=0),
    "scripted-unsafe": Price(input_per_mtok=0, output_per_mtok=0),
    "scripted-context_trusting": Price(input_per_mtok=0, output_per_mtok=0),
    "qwen2.5-coder-1.5b-instruct-q4_k_m": Price(input_per_mtok=0, output_per_mtok=0),
    "qwen2.5-coder-0.5b-instruct-q4_k_m": Price(input_per_mtok=0, output_per_mtok=0),
}


class PriceTable:
    """Model name -> price; a file (JSON ``{"model": {"input_per_mtok": .., "output_per_mtok": ..}}``) overrides."""

    def __init__(self, prices: dict[str, Price] | None = None) -> None:
        self.prices = dict(DEFAULT_PRICES if prices is None else prices)

    @classmethod
    def load(cls, path: Path | None) -> PriceTable:
        table = cls()
        if path is None:
            return table
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise PriceTableError(f"{path}: cannot read price table ({exc})") from exc
        if not isinstance(raw, dict):
            raise PriceTableError(f"{path}: expected a JSON object of model -> price")
        for model, entry in raw.items():
            try:
                table.prices[model] = Price.model_validate(entry)
            except ValidationError as exc:
                err = exc.errors(include_url=False)[0]
                field = ".".join(str(p) for p in err["loc"])
                raise PriceTableError(f"{path}: {model}.{field}: {err['msg']} (got {err.get('input')!r})") from exc
        return table

    def cost(self, model: str, usage: Usage | None) -> float | None:
        """USD for ``usage`` on ``model``; None when the price or the usage is unknown."""
        price = self.prices.get(model)
        if price is None or usage is None:
            return None
        return (usage.prompt_tokens * price.input_per_mtok + usage.completion_tokens * price.output_per_mtok) / 1e6
