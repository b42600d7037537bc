"""create_provider: providers by kind, from settings plus overrides."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import SecretStr

from contextdelta.providers import (
    MockProvider,
    OpenAIProvider,
    ProviderConfigError,
    RetryPolicy,
    create_provider,
    provider_kinds,
)
from contextdelta.settings import Settings


def settings(**values: Any) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]  # .env in the checkout must not leak in


def test_openai_provider_from_settings() -> None:
    provider = create_provider(
        settings(base_url="http://127.0.0.1:8000/v1", model="qwen", api_key=SecretStr("k"), temperature=0.5, seed=3)
    )
    assert isinstance(provider, OpenAIProvider) and provider.is_mock is False
    assert (provider.base_url, provider.model, provider.temperature, provider.seed) == (
        "http://127.0.0.1:8000/v1",
        "qwen",
        0.5,
        3,
    )


def test_overrides_win_over_settings() -> None:
    retry = RetryPolicy(max_attempts=2)
    provider = create_provider(settings(model="a", seed=1), model="b", seed=7, timeout_s=5.0, retry=retry)
    assert isinstance(provider, OpenAIProvider)
    assert (provider.model, provider.seed, provider.timeout_s, provider.retry) == ("b", 7, 5.0, retry)


def test_a_model_is_required() -> None:
    with pytest.raises(ProviderConfigError, match="CONTEXTDELTA_MODEL"):
        create_provider(settings())


def test_bad_options_and_kinds_are_config_errors() -> None:
    with pytest.raises(ProviderConfigError, match="bad option"):
        create_provider(settings(model="m"), colour="blue")
    with pytest.raises(ProviderConfigError, match="known kinds: mock, openai"):
        create_provider(settings(model="m"), kind="anthropic")
    assert provider_kinds() == ["mock", "openai"]


def test_mock_kind() -> None:
    provider = create_provider(settings(), kind="mock", script=["hi"])
    assert isinstance(provider, MockProvider) and provider.is_mock
    with pytest.raises(ProviderConfigError, match="script"):
        create_provider(settings(), kind="mock")


def test_api_key_from_settings_is_not_in_the_repr() -> None:
    provider = create_provider(settings(model="m", api_key=SecretStr("sk-very-secret")))
    assert "sk-very-secret" not in repr(provider)
