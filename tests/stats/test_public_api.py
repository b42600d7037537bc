"""The public surface of contextdelta.stats: exports, parameters, and the analysis hash."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

import contextdelta.stats as stats
from contextdelta.stats import _receipt


def test_all_lists_exactly_the_public_names() -> None:
    public = {name for name in dir(stats) if not name.startswith("_")}
    assert set(stats.__all__) == public
    assert all(
        getattr(stats, name).__module__.startswith("contextdelta.stats") for name in stats.__all__ if name[0].islower()
    )


def test_analysis_params_defaults_and_validation() -> None:
    params = stats.AnalysisParams()
    assert (params.resamples, params.seed, params.confidence) == (10_000, 0, 0.95)
    assert (params.alpha, params.power_datasets) == (0.05, 2_000)
    assert params.percentiles == pytest.approx((2.5, 97.5))
    assert params == stats.DEFAULT_PARAMS
    for bad in ({"confidence": 1.0}, {"resamples": 0}, {"seed": -1}, {"unknown": 1}):
        with pytest.raises(ValidationError):
            stats.AnalysisParams(**bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        params.seed = 3  # type: ignore[misc]


def recompute(folder: Path) -> str:
    """The documented recipe, written independently."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*.py"), key=lambda p: p.relative_to(folder).as_posix()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def test_analysis_sha256_follows_the_documented_recipe() -> None:
    folder = Path(stats.__file__).parent
    value = stats.analysis_sha256()
    assert len(value) == 64 and value == value.lower()
    assert value == recompute(folder)
    assert value == stats.analysis_sha256()


def test_analysis_sha256_changes_with_the_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "stats"
    shutil.copytree(Path(stats.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(_receipt, "_PACKAGE_DIR", copy)
    before = stats.analysis_sha256()
    assert before == recompute(Path(stats.__file__).parent)
    with (copy / "_signflip.py").open("a") as handle:
        handle.write("# changed\n")
    assert stats.analysis_sha256() != before
