"""Prices with prompt caching: the price table's rates and their validation, what a usage costs with and without
the cache, and where OpenAI-compatible endpoints report cached and cache-write tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextdelta.providers import DEFAULT_PRICES, Price, PriceTable, PriceTableError, Usage, usage_of


def write(tmp_path: Path, value: object) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(value if isinstance(value, str) else json.dumps(value))
    return path


def test_the_table_accepts_cached_and_cache_write_rates(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "my-model": {
                "input_per_mtok": 3,
                "output_per_mtok": 15,
                "cached_input_per_mtok": 0.3,
                "cache_write_per_mtok": 3.75,
            },
            "plain": {"input_per_mtok": 1, "output_per_mtok": 2},
        },
    )
    table = PriceTable.load(path)
    assert table.price("my-model") == Price(
        input_per_mtok=3, output_per_mtok=15, cached_input_per_mtok=0.3, cache_write_per_mtok=3.75
    )
    plain = table.price("plain")
    assert plain is not None and plain.cached_input_per_mtok is None and plain.cache_write_per_mtok is None
    assert table.price("gpt-4.1") == DEFAULT_PRICES["gpt-4.1"]  # the built-in table stays underneath
    assert table.for_models(["plain", "unknown", "plain"]) == {"plain": plain, "unknown": None}


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        ({"input_per_mtok": 1, "output_per_mtok": 2, "cached_input_per_mtok": -0.1}, "m.cached_input_per_mtok"),
        ({"input_per_mtok": 1, "output_per_mtok": 2, "cache_write_per_mtok": "cheap"}, "m.cache_write_per_mtok"),
        ({"input_per_mtok": 1, "output_per_mtok": 2, "cached_per_mtok": 0.1}, "m.cached_per_mtok"),
        ({"input_per_mtok": 1}, "m.output_per_mtok"),
        ({"input_per_mtok": 1, "output_per_mtok": 2, "cached_input_per_mtok": float("inf")}, "m.cached_input_per_mtok"),
        ("not an object", "m: Input should be a valid dictionary"),
    ],
)
def test_a_bad_rate_is_a_named_error(tmp_path: Path, entry: object, named: str) -> None:
    path = write(tmp_path, json.dumps({"m": entry}))
    with pytest.raises(PriceTableError) as error:
        PriceTable.load(path)
    message = str(error.value)
    assert message.startswith(f"{path}: {named}") and "cached_input_per_mtok" in message
    assert "\n" not in message


@pytest.mark.parametrize(("text", "problem"), [("[1, 2]", "expected a JSON object"), ("{", "cannot read")])
def test_a_file_that_is_not_a_table_is_a_named_error(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(PriceTableError, match=problem):
        PriceTable.load(write(tmp_path, text))


def test_cost_with_and_without_caching() -> None:
    price = Price(input_per_mtok=2, output_per_mtok=8, cached_input_per_mtok=0.5, cache_write_per_mtok=2.5)
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=100_000, cached_tokens=600_000, cache_write_tokens=300_000)
    assert usage.prompt_split() == (100_000, 600_000, 300_000)
    assert price.cost(usage, caching=False) == pytest.approx(2.0 + 0.8)
    assert price.cost(usage) == pytest.approx(0.1 * 2 + 0.6 * 0.5 + 0.3 * 2.5 + 0.8)
    # a price without caching rates bills the cache at the input rate: the same with and without
    plain = Price(input_per_mtok=2, output_per_mtok=8)
    assert plain.cost(usage) == pytest.approx(plain.cost(usage, caching=False))
    # no cached tokens reported: no difference either
    assert price.cost(Usage(prompt_tokens=10, completion_tokens=5)) == price.cost(
        Usage(prompt_tokens=10, completion_tokens=5), caching=False
    )


def test_a_report_claiming_more_cached_tokens_than_the_prompt_is_capped() -> None:
    assert Usage(prompt_tokens=10, cached_tokens=25, cache_write_tokens=4).prompt_split() == (0, 10, 0)
    assert Usage(prompt_tokens=10, cached_tokens=6, cache_write_tokens=9).prompt_split() == (0, 6, 4)


def test_usage_adds_up_with_unreported_parts_kept_unknown() -> None:
    a = Usage(prompt_tokens=10, completion_tokens=1, cached_tokens=4)
    b = Usage(prompt_tokens=20, completion_tokens=2, cache_write_tokens=7)
    total = a + b
    assert (total.prompt_tokens, total.cached_tokens, total.cache_write_tokens) == (30, 4, 7)
    assert (Usage() + Usage()).cached_tokens is None and (Usage() + Usage()).cache_write_tokens is None


def test_an_old_usage_record_without_cache_writes_loads() -> None:
    old = Usage.model_validate({"prompt_tokens": 5, "completion_tokens": 1, "cached_tokens": 0})
    assert old.cache_write_tokens is None and old.prompt_split() == (5, 0, 0)


@pytest.mark.parametrize(
    ("usage", "cached", "written"),
    [
        ({"prompt_tokens_details": {"cached_tokens": 64}}, 64, None),  # OpenAI, vLLM, llama.cpp, xAI
        ({"prompt_tokens_details": {"cached_tokens": 64, "cache_write_tokens": 30}}, 64, 30),  # OpenRouter
        ({"prompt_cache_hit_tokens": 50, "prompt_cache_miss_tokens": 50}, 50, None),  # DeepSeek
        ({"cache_read_input_tokens": 40, "cache_creation_input_tokens": 20}, 40, 20),  # LiteLLM over Anthropic
        ({"prompt_tokens_details": {"cached_tokens": None}}, None, None),
        ({"prompt_tokens_details": {"cached_tokens": -3}, "prompt_cache_hit_tokens": True}, None, None),
        ({}, None, None),
    ],
)
def test_cached_and_cache_write_tokens_are_read_where_endpoints_report_them(
    usage: dict[str, object], cached: int | None, written: int | None
) -> None:
    found = usage_of({"usage": {"prompt_tokens": 100, "completion_tokens": 10, **usage}})
    assert found is not None
    assert (found.prompt_tokens, found.cached_tokens, found.cache_write_tokens) == (100, cached, written)
