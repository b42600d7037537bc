"""Settings (SPEC section 2): every setting read alike from .env and the environment, empty means unset, an invalid
value is a one-line error (exit 2) for every command, and .env.example lists exactly the settings model."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.settings import Settings, SettingsError, env_name, load_settings, setting_names

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()

# one valid, non-default value per setting: a new setting without one here fails the test below
SAMPLES: dict[str, tuple[str, object]] = {
    "base_url": ("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1"),
    "model": ("m-1", "m-1"),
    "api_key": ("sk-test-1", "sk-test-1"),
    "openai_api_key": ("sk-test-2", "sk-test-2"),
    "summary_model": ("m-2", "m-2"),
    "temperature": ("0.7", 0.7),
    "seed": ("42", 42),
    "database_url": ("sqlite:///x.db", "sqlite:///x.db"),
    "results_dir": ("elsewhere", "elsewhere"),
    "proxy_token": ("tok-1", "tok-1"),
    "upstream_api_key": ("sk-up", "sk-up"),
    "model_cache": ("/tmp/models", "/tmp/models"),
    "workers": ("3", 3),
}


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in setting_names():
        monkeypatch.delenv(name, raising=False)


def value(settings: Settings, field: str) -> object:
    raw = getattr(settings, field)
    return raw.get_secret_value() if hasattr(raw, "get_secret_value") else raw


def test_env_example_lists_exactly_the_settings_model() -> None:
    text = (ROOT / ".env.example").read_text(encoding="utf-8")
    listed = re.findall(r"^#?\s*([A-Z][A-Z0-9_]*)=", text, flags=re.MULTILINE)
    assert sorted(listed) == sorted(setting_names())
    assert len(listed) == len(set(listed))


def test_every_setting_has_a_sample_value() -> None:
    assert sorted(SAMPLES) == sorted(Settings.model_fields)


@pytest.mark.parametrize("field", sorted(SAMPLES))
def test_every_setting_is_read_alike_from_env_file_and_environment(
    field: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw, expected = SAMPLES[field]
    env_file = tmp_path / ".env"
    env_file.write_text(f"{env_name(field)}={raw}\n", encoding="utf-8")
    assert value(load_settings(env_file), field) == expected
    monkeypatch.setenv(env_name(field), raw)
    assert value(load_settings(None), field) == expected


@pytest.mark.parametrize("field", sorted(SAMPLES))
def test_an_empty_value_means_unset(field: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text(f"{env_name(field)}=\n", encoding="utf-8")
    default = Settings.model_fields[field].default
    assert value(load_settings(env_file), field) == default
    monkeypatch.setenv(env_name(field), "")
    assert value(load_settings(None), field) == default


@pytest.mark.parametrize("blank", [" ", "  \t "])
@pytest.mark.parametrize("field", sorted(SAMPLES))
def test_a_blank_value_means_unset(field: str, blank: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CONTEXTDELTA_MODEL=" " ran a benchmark against model ' ' (recorded in the manifest), and a blank
    CONTEXTDELTA_RESULTS_DIR wrote run directories into a folder named by spaces; --model ' ' was refused."""
    env_file = tmp_path / ".env"
    env_file.write_text(f'{env_name(field)}="{blank}"\n', encoding="utf-8")
    default = Settings.model_fields[field].default
    assert value(load_settings(env_file), field) == default
    raw, expected = SAMPLES[field]
    env_file.write_text(f"{env_name(field)}={raw}\n", encoding="utf-8")
    monkeypatch.setenv(env_name(field), blank)  # a blank variable does not hide the .env value, as an empty one
    assert value(load_settings(env_file), field) == expected
    assert value(load_settings(None), field) == default


def test_a_blank_api_key_does_not_hide_openai_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTDELTA_API_KEY", " ")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-shell")
    key = load_settings(None).effective_api_key
    assert key is not None and key.get_secret_value() == "sk-from-the-shell"


def test_run_benchmark_with_a_blank_model_says_no_model_is_configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CONTEXTDELTA_MODEL", "  ")
    out = runner.invoke(app, ["run-benchmark", "--tasks", str(ROOT / "tasks"), "--base-url", "http://127.0.0.1:9/v1"])
    assert out.exit_code == 2, out.output
    assert "no model configured: set CONTEXTDELTA_MODEL or pass --model" in " ".join(out.output.split())
    assert not (tmp_path / "results").exists()


def test_a_copied_env_example_does_not_hide_openai_api_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text((ROOT / ".env.example").read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-shell")
    key = load_settings(env_file).effective_api_key
    assert key is not None and key.get_secret_value() == "sk-from-the-shell"
    monkeypatch.setenv("CONTEXTDELTA_API_KEY", "sk-own")  # the product's own variable wins
    key = load_settings(env_file).effective_api_key
    assert key is not None and key.get_secret_value() == "sk-own"


def test_the_trace_store_defaults_to_the_results_folder_in_use(tmp_path: Path) -> None:
    settings = load_settings(None)
    assert settings.database_url_for(tmp_path / "r") == f"sqlite:///{tmp_path / 'r' / 'contextdelta.db'}"
    assert settings.database_url_for() == "sqlite:///results/contextdelta.db"
    assert Settings(database_url="sqlite:///a.db").database_url_for(tmp_path) == "sqlite:///a.db"


@pytest.mark.parametrize(
    ("variable", "raw", "expected"),
    [
        ("CONTEXTDELTA_SEED", "abc", "a 64-bit integer run seed"),
        ("CONTEXTDELTA_SEED", "99999999999999999999999", "a 64-bit integer run seed"),
        ("CONTEXTDELTA_SEED", str(-(2**63) - 1), "a 64-bit integer run seed"),
        ("CONTEXTDELTA_TEMPERATURE", "5", "a sampling temperature from 0 to 2"),
        ("CONTEXTDELTA_TEMPERATURE", "warm", "a sampling temperature from 0 to 2"),
    ],
)
def test_an_invalid_value_names_the_variable_and_the_expected_form(
    variable: str, raw: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".env").write_text(f"{variable}={raw}\n", encoding="utf-8")
    with pytest.raises(SettingsError) as caught:
        load_settings(tmp_path / ".env")
    message = str(caught.value)
    assert "\n" not in message and variable in message and repr(raw) in message and expected in message


def test_a_secret_is_never_echoed_in_a_settings_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTDELTA_API_KEY", "sk-secret-value")
    monkeypatch.setenv("CONTEXTDELTA_SEED", "x")
    with pytest.raises(SettingsError) as caught:
        load_settings(None)
    assert "sk-secret-value" not in str(caught.value)


def _command_paths() -> list[list[str]]:
    """Every leaf command of the CLI, as the words that invoke it."""
    paths: list[list[str]] = []

    def walk(command: Any, prefix: list[str]) -> None:
        if hasattr(command, "commands"):  # a group (typer ships its own click)
            for name, sub in command.commands.items():
                walk(sub, [*prefix, name])
        else:
            paths.append(prefix)

    walk(typer.main.get_command(app), [])
    return paths


@pytest.mark.parametrize("words", _command_paths(), ids=lambda words: " ".join(words))
def test_every_command_refuses_an_invalid_setting_in_one_line_with_exit_2(
    words: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("CONTEXTDELTA_SEED=abc\n", encoding="utf-8")
    result = runner.invoke(app, [*words, "x"] if words[-1] in {"report", "verify"} else words)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "CONTEXTDELTA_SEED='abc'" in lines[0] and "Traceback" not in result.stderr


def test_the_model_cache_is_read_from_env_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from contextdelta.local_model import default_cache_dir

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(f"CONTEXTDELTA_MODEL_CACHE={tmp_path / 'models'}\n", encoding="utf-8")
    assert default_cache_dir() == tmp_path / "models"


@pytest.mark.parametrize("command", ["run-benchmark", "run-external", "serve-world"])
@pytest.mark.parametrize("seed", ["99999999999999999999999", str(2**63), str(-(2**63) - 1)])
def test_a_seed_outside_64_bits_is_refused_before_anything_runs(command: str, seed: str, tmp_path: Path) -> None:
    """The trace store and the manifest's readers hold a signed 64-bit seed; a larger one lost the run's rows."""
    result = runner.invoke(app, [command, "--seed", seed, "--results-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "is not a 64-bit integer" in " ".join(result.output.split())
    assert list(tmp_path.iterdir()) == []


def test_the_settings_hold_every_configured_secret_for_redaction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTDELTA_API_KEY", "azurekey0123456789")
    monkeypatch.setenv("OPENAI_API_KEY", "openai-0123456789")
    monkeypatch.setenv("CONTEXTDELTA_PROXY_TOKEN", "proxy-token-0123")
    monkeypatch.setenv("CONTEXTDELTA_UPSTREAM_API_KEY", "")
    assert load_settings(None).secrets() == ["azurekey0123456789", "openai-0123456789", "proxy-token-0123"]


@pytest.mark.parametrize("seed", [2**63, -(2**63) - 1])
def test_the_python_api_refuses_a_seed_outside_64_bits_as_the_command_line_does(seed: int) -> None:
    """``BenchmarkRequest(seed=...)`` is the Python API's ``--seed``: the same bounds, so a run made from Python
    cannot lose its trace-store rows to a seed the store cannot hold."""
    from pydantic import ValidationError

    from contextdelta.runner.request import BenchmarkRequest

    with pytest.raises(ValidationError, match="seed"):
        BenchmarkRequest(seed=seed)
    assert BenchmarkRequest(seed=seed - 1 if seed > 0 else seed + 1).seed == (seed - 1 if seed > 0 else seed + 1)


@pytest.mark.parametrize("variable", ["CONTEXTDELTA_API_KEY", "OPENAI_API_KEY", "CONTEXTDELTA_PROXY_TOKEN"])
@pytest.mark.parametrize("raw", ["sk-abc\rDEF", "sk-abc\nDEF", "sk-abc\x1bDEF"])
def test_a_key_with_a_line_break_is_refused_in_one_line_without_showing_it(
    variable: str, raw: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sent as it is, the HTTP client refuses the header in the middle of a run (a traceback, exit 1)."""
    monkeypatch.setenv(variable, raw)
    with pytest.raises(SettingsError) as caught:
        load_settings(None)
    message = str(caught.value)
    assert "\n" not in message and variable in message and "line break" in message
    assert "sk-abc" not in message and "DEF" not in message


def test_run_benchmark_refuses_a_key_with_a_carriage_return_with_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CONTEXTDELTA_API_KEY", "sk-abc\r")
    result = runner.invoke(app, ["run-benchmark", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"])
    assert result.exit_code == 2, result.output
    assert "CONTEXTDELTA_API_KEY" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("127.0.0.1:8000/v1", "is not an http:// or https:// URL with a host"),
        ("localhost:8000", "is not an http:// or https:// URL with a host"),
        ("ftp://127.0.0.1/v1", "is not an http:// or https:// URL with a host"),
        ("http://", "is not an http:// or https:// URL with a host"),
        ("http://[::1/v1", "is not a usable URL (Invalid IPv6 URL)"),
        ("http://127.0.0.1:99999/v1", "is not a usable URL (Port out of range 0-65535)"),
    ],
)
def test_run_benchmark_refuses_an_unusable_base_url_naming_it_with_exit_2(
    url: str, why: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a traceback (a port out of range) nor an unnamed 'Invalid IPv6 URL' nor a connection error to fathom."""
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["run-benchmark", "--base-url", url, "--model", "m", "--tasks", "package:core"])
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert f"--base-url / CONTEXTDELTA_BASE_URL: {url!r} {why}" in line
    assert "e.g. http://127.0.0.1:8000/v1" in line


def test_a_base_url_that_does_not_parse_is_shown_without_its_credentials() -> None:
    from contextdelta.settings import BaseUrlError, check_base_url

    with pytest.raises(BaseUrlError) as caught:
        check_base_url("http://user:hunter2@[::1/v1?key=sk-abc")
    assert "hunter2" not in str(caught.value) and "sk-abc" not in str(caught.value)


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf"])
def test_a_temperature_that_is_not_a_finite_number_says_so(
    raw: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nan used to be refused as 'less than or equal to 2'."""
    monkeypatch.setenv("CONTEXTDELTA_TEMPERATURE", raw)
    with pytest.raises(SettingsError) as caught:
        load_settings(None)
    message = str(caught.value)
    assert f"CONTEXTDELTA_TEMPERATURE={raw!r} is invalid (not a finite number)" in message
    assert "less than" not in message


def test_a_env_that_is_a_folder_is_refused_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder named .env was skipped in silence: the settings the user meant to give were not read."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").mkdir()
    result = runner.invoke(app, ["tools"])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (
        "error: the settings file .env is not a file (a folder?); remove or rename it, or put the settings in a "
        "file named .env"
    )


def test_a_env_line_that_does_not_parse_is_refused_naming_the_file_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """python-dotenv only warned 'could not parse statement starting at line 2' (no file) and went on without it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("CONTEXTDELTA_SEED=1\nsk-not-shown value\n", encoding="utf-8")
    result = runner.invoke(app, ["tools"])
    assert result.exit_code == 2, result.output
    message = result.stderr.strip()
    assert message.startswith("error: the settings file .env: line 2 cannot be parsed; write it as NAME=value")
    assert "sk-not-shown" not in message and len(message.splitlines()) == 1


def test_a_env_link_to_nothing_is_refused_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").symlink_to(tmp_path / "gone.env")
    result = runner.invoke(app, ["tools"])
    assert result.exit_code == 2, result.output
    assert " ".join(result.stderr.split()) == (
        f"error: the settings file .env is a link to {tmp_path / 'gone.env'}, which does not exist"
    )
