"""Providers by kind, built from settings plus command-line overrides."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contextdelta.providers.base import ChatProvider
from contextdelta.settings import Settings, load_settings

ProviderFactory = Callable[..., ChatProvider]
"""Builds a provider from ``(settings, **overrides)``."""

_FACTORIES: dict[str, ProviderFactory] = {}


class ProviderConfigError(ValueError):
    """A provider cannot be built from the given settings (unknown kind, missing model, bad option)."""


def register_provider(kind: str, factory: ProviderFactory) -> None:
    """Make ``create_provider(kind=...)`` build providers with ``factory(settings, **overrides)``."""
    _FACTORIES[kind] = factory


def provider_kinds() -> list[str]:
    """The registered provider kinds, sorted."""
    return sorted(_FACTORIES)


def create_provider(settings: Settings | None = None, *, kind: str = "openai", **overrides: Any) -> ChatProvider:
    """A provider of ``kind`` configured from ``settings`` (default: read from the environment).

    Overrides win over settings and are the command-line flags' way in. For ``openai``: ``base_url``,
    ``model``, ``api_key``, ``temperature``, ``seed``, ``max_tokens``, ``timeout_s``, ``retry``, ``sleep``.
    For ``mock``: ``script`` (required) and ``model``.
    """
    factory = _FACTORIES.get(kind)
    if factory is None:
        raise ProviderConfigError(f"unknown provider kind {kind!r}; known kinds: {', '.join(provider_kinds())}")
    return factory(settings if settings is not None else load_settings(), **overrides)


def _openai_factory(settings: Settings, **overrides: Any) -> ChatProvider:
    from contextdelta.providers.openai_compat import OpenAIProvider

    options: dict[str, Any] = {
        "base_url": settings.base_url,
        "model": settings.model,
        "api_key": settings.effective_api_key,
        "temperature": settings.temperature,
        "seed": settings.seed,
    }
    options.update(overrides)
    if not options.get("model"):
        raise ProviderConfigError("no model configured: set CONTEXTDELTA_MODEL or pass --model")
    try:
        return OpenAIProvider(**options)
    except TypeError as exc:
        raise ProviderConfigError(f"bad option for the openai provider: {exc}") from None
    except ValueError as exc:  # a refused value: credentials in the base URL, no model, a bad timeout
        raise ProviderConfigError(str(exc)) from None


def _mock_factory(settings: Settings, **overrides: Any) -> ChatProvider:
    from contextdelta.providers.mock import MockProvider

    if "script" not in overrides:
        raise ProviderConfigError("the mock provider needs a script (a list of replies or a function)")
    return MockProvider(overrides.pop("script"), **overrides)


register_provider("openai", _openai_factory)
register_provider("mock", _mock_factory)
