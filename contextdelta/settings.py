"""Configuration from the environment and ``.env`` (SPEC section 2). Command-line flags override it."""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Every setting ContextDelta reads; documented in ``.env.example``."""

    model_config = SettingsConfigDict(env_prefix="CONTEXTDELTA_", env_file=".env", extra="ignore")

    base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    model: str | None = Field(default=None, description="Model name sent to the endpoint.")
    api_key: SecretStr | None = Field(default=None, description="API key; falls back to OPENAI_API_KEY.")
    summary_model: str | None = Field(default=None, description="Model for semantic_summary; default: model.")
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    seed: int = 0
    database_url: str = "sqlite:///results/contextdelta.db"
    results_dir: str = "results"

    @model_validator(mode="after")
    def _fallbacks(self) -> Settings:
        if self.api_key is None and os.environ.get("OPENAI_API_KEY"):
            self.api_key = SecretStr(os.environ["OPENAI_API_KEY"])
        return self

    @property
    def effective_summary_model(self) -> str | None:
        return self.summary_model or self.model


def redact_url(url: str | None) -> str | None:
    """The URL with any user:password and query string removed, safe to write to files and logs."""
    if not url:
        return url
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
