"""Configuration from the environment and ``.env`` (SPEC section 2). Command-line flags override it.

Every setting the product reads is a field of :class:`Settings` and is read the same way from the process
environment and from ``.env`` in the current folder (the environment wins). An empty value means *unset*, so the
``CONTEXTDELTA_API_KEY=`` line of a copied ``.env.example`` does not hide ``OPENAI_API_KEY``; so does a blank one
(only spaces or tabs, e.g. ``export CONTEXTDELTA_MODEL=" "``), which names nothing either. An invalid value is
a :class:`SettingsError` whose one-line message names the variable and the form it expects; the command line
turns it into exit 2 before any command runs. ``.env.example`` lists every field (a test compares the two).
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import AfterValidator, Field, SecretStr, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

ENV_PREFIX = "CONTEXTDELTA_"
DATABASE_FILE = "contextdelta.db"
"""The trace store's SQLite file inside the results folder, when ``CONTEXTDELTA_DATABASE_URL`` is unset."""


Temperature = Annotated[float, Field(ge=0.0, le=2.0, allow_inf_nan=False)]
"""A sampling temperature in the range OpenAI-compatible endpoints accept (the setting and ``--temperature``)."""


SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1
"""A run seed is a signed 64-bit integer (what the trace store's INTEGER column and JSON readers hold)."""


def header_safe(secret: SecretStr | None) -> SecretStr | None:
    """A key or token sent in an HTTP header: refused (never shown) when it holds a line break or another control
    character, as a ``.env`` saved with Windows line endings leaves (the HTTP client would refuse to send it)."""
    if secret is not None and any((ord(c) < 32 and c != "\t") or ord(c) == 127 for c in secret.get_secret_value()):
        raise ValueError(
            "it contains a line break or another control character (a .env saved with Windows line endings "
            "leaves a carriage return); remove it"
        )
    return secret


HeaderSecret = Annotated[SecretStr | None, AfterValidator(header_safe)]
"""A secret sent as an HTTP header value (API keys, the proxy token)."""


class SettingsError(ValueError):
    """A setting with an invalid value (or an unreadable ``.env``); the message is one line naming the variable."""


class _BlankIsUnset(PydanticBaseSettingsSource):
    """A settings source with its blank values left out (empty, or only whitespace), so that the next source or the
    default applies, as for an empty one: a blank model name or results folder would otherwise be used as given."""

    def __init__(self, source: PydanticBaseSettingsSource) -> None:
        super().__init__(source.settings_cls)
        self._source = source

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._source.get_field_value(field, field_name)

    def __call__(self) -> dict[str, Any]:
        return {k: v for k, v in self._source().items() if not (isinstance(v, str) and not v.strip())}


class Settings(BaseSettings):
    """Every setting ContextDelta reads; documented in ``.env.example``. Prefer :func:`load_settings`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_file=".env",
        env_file_encoding="utf-8",
        env_ignore_empty=True,
        extra="ignore",
        allow_inf_nan=False,  # nan passes every range check and inf an open end: "not a finite number", not a range
    )

    base_url: str | None = Field(
        default=None, description="an OpenAI-compatible endpoint URL, e.g. http://127.0.0.1:8000/v1"
    )
    model: str | None = Field(default=None, description="the model name sent to the endpoint")
    api_key: HeaderSecret = Field(default=None, description="the endpoint's API key (default: OPENAI_API_KEY)")
    openai_api_key: HeaderSecret = Field(
        default=None,
        validation_alias="OPENAI_API_KEY",
        description="used as the API key when CONTEXTDELTA_API_KEY is unset",
    )
    summary_model: str | None = Field(
        default=None, description="the model that writes semantic_summary summaries (default: the agent model)"
    )
    temperature: Temperature = Field(default=0.0, description="a sampling temperature from 0 to 2")
    seed: int = Field(default=0, ge=SEED_MIN, le=SEED_MAX, description="a 64-bit integer run seed")
    database_url: str | None = Field(
        default=None,
        description="a SQLAlchemy URL of the trace store (default: sqlite:///<results dir>/contextdelta.db)",
    )
    results_dir: str = Field(default="results", min_length=1, description="a folder for run directories")
    proxy_token: HeaderSecret = Field(
        default=None, description="the bearer token `contextdelta serve` requires from its clients"
    )
    upstream_api_key: HeaderSecret = Field(
        default=None, description="the key `contextdelta serve` sends upstream (default: the API key)"
    )
    workers: int | None = Field(
        default=None,
        ge=1,
        description="a number of worker processes for run-benchmark (default: the number of cores)",
    )
    model_cache: str | None = Field(
        default=None,
        description="a folder for the assembled local model file (default: $XDG_CACHE_HOME/contextdelta/models)",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The default sources in the default order, the environment and ``.env`` with blank values as unset."""
        return init_settings, _BlankIsUnset(env_settings), _BlankIsUnset(dotenv_settings), file_secret_settings

    @property
    def effective_api_key(self) -> SecretStr | None:
        """``CONTEXTDELTA_API_KEY``, else ``OPENAI_API_KEY``, else None (whichever file or variable set them)."""
        return self.api_key or self.openai_api_key

    def secrets(self) -> list[str]:
        """Every secret these settings hold (API keys, proxy token, upstream key): what a `Redactor` must cut out of
        anything the tool writes that came from elsewhere (an agent command's output, a command line)."""
        values = (getattr(self, name) for name in type(self).model_fields)
        return sorted({v.get_secret_value() for v in values if isinstance(v, SecretStr) and v.get_secret_value()})

    @property
    def effective_summary_model(self) -> str | None:
        return self.summary_model or self.model

    def database_url_for(self, results_dir: Path | str | None = None) -> str:
        """The trace store URL: ``CONTEXTDELTA_DATABASE_URL``, else a SQLite file in the results folder in use
        (``results_dir``, or ``CONTEXTDELTA_RESULTS_DIR``)."""
        if self.database_url:
            return self.database_url
        folder = Path(results_dir if results_dir is not None else self.results_dir)
        return f"sqlite:///{folder / DATABASE_FILE}"


def env_name(field: str) -> str:
    """The environment variable (and ``.env`` key) of a :class:`Settings` field."""
    alias = Settings.model_fields[field].validation_alias
    return alias if isinstance(alias, str) else f"{ENV_PREFIX}{field.upper()}"


def setting_names() -> list[str]:
    """Every variable :class:`Settings` reads, in field order (what ``.env.example`` must list)."""
    return [env_name(name) for name in Settings.model_fields]


def load_settings(env_file: Path | str | None = ".env") -> Settings:
    """The settings from the environment and ``env_file``; raises :class:`SettingsError` with a one-line message
    naming the variable, the value (never for a secret) and the expected form."""
    if env_file is not None:
        _check_env_file(Path(env_file))
    try:
        return Settings(_env_file=env_file)  # type: ignore[call-arg]
    except ValidationError as exc:
        raise SettingsError(_describe(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"cannot read the settings file {env_file}: {exc}") from None


def _check_env_file(path: Path) -> None:
    """Refuse a ``.env`` that would be skipped in silence (a folder) or read in part (a line python-dotenv cannot
    parse, which it only warns about without naming the file): the setting on that line would be lost."""
    if not path.exists():
        if path.is_symlink():  # a link to nothing: the settings the user keeps elsewhere would be skipped
            raise SettingsError(f"the settings file {path} is a link to {os.readlink(path)}, which does not exist")
        return
    if not path.is_file():
        raise SettingsError(
            f"the settings file {path} is not a file (a folder?); remove or rename it, or put the settings in a "
            f"file named {path.name}"
        )
    from dotenv.parser import parse_stream

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"cannot read the settings file {path}: {exc}") from None
    bad = next((b for b in parse_stream(io.StringIO(text)) if b.error), None)
    if bad is not None:
        line = bad.original.string.strip()
        # never the value, nor a line without "=": either may be a pasted secret
        shown = f" ({line.split('=', 1)[0].strip()[:60]}=...)" if "=" in line else ""
        raise SettingsError(
            f"the settings file {path}: line {bad.original.line}{shown} cannot be parsed; write it as NAME=value, "
            "or comment it out with #"
        )


def _describe(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False):
        loc = str(error["loc"][0]) if error["loc"] else ""
        field = next((n for n in Settings.model_fields if n == loc or env_name(n) == loc), None)
        if field is None:
            problems.append(f"{loc}: {error['msg']}")
            continue
        info = Settings.model_fields[field]
        secret = info.annotation is not None and "SecretStr" in str(info.annotation)
        shown = "" if secret else f"={error.get('input')!r}"
        reason = "not a finite number" if error["type"] == "finite_number" else error["msg"]
        problems.append(f"{env_name(field)}{shown} is invalid ({reason}); expected {info.description}")
    return "; ".join(problems)


class BaseUrlError(ValueError):
    """An endpoint URL that cannot be used (not http(s), no host, a port out of range, not a URL at all); the message
    names where it came from and how to fix it."""


class UrlCredentialsError(BaseUrlError):
    """A base URL that carries credentials (``user:password@`` or a query string); the message says how to fix it."""


def check_base_url(url: str | None, where: str = "--base-url / CONTEXTDELTA_BASE_URL") -> None:
    """Refuse an endpoint URL with credentials in it.

    ``user:password@host`` makes the HTTP client send Basic auth in place of the API key, and a query string
    (``?key=...``) is dropped or mangled by the client while the URL itself ends up in logs; both would also put
    the secret where files and the trace store record endpoints. Raises UrlCredentialsError naming ``where``.
    """
    if not url:
        return
    example = "e.g. http://127.0.0.1:8000/v1 or https://api.openai.com/v1"
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 -- raises ValueError for a port that is not a number from 0 to 65535
    except ValueError as exc:
        raise BaseUrlError(
            f"{where}: {redact_url_text(url)!r} is not a usable URL ({exc}); give the endpoint as {example}"
        ) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BaseUrlError(
            f"{where}: {redact_url_text(url)!r} is not an http:// or https:// URL with a host; give the endpoint as "
            f"{example}"
        )
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise UrlCredentialsError(
            f"{where}: credentials in the URL ({redact_url(url)} with user:password@) are refused; "
            "pass the key with CONTEXTDELTA_API_KEY instead"
        )
    if parts.query or parts.fragment:
        raise UrlCredentialsError(
            f"{where}: a query string or fragment in the URL ({redact_url(url)}?...) is refused (keys do not "
            "belong in URLs); pass the key with CONTEXTDELTA_API_KEY and give the bare endpoint, e.g. "
            "http://127.0.0.1:8000/v1"
        )


def redact_url_text(url: str) -> str:
    """A URL that may not parse, safe to show: its query string and anything before an ``@`` cut out."""
    text = url.strip().split("?", 1)[0].split("#", 1)[0]
    scheme, sep, rest = text.rpartition("://")
    return f"{scheme}{sep}{rest.rpartition('@')[2]}"


def redact_url(url: str | None) -> str | None:
    """The URL with any user:password and query string removed, safe to write to files and logs."""
    if not url:
        return url
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
