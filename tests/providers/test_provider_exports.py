"""The public API of contextdelta.providers and contextdelta.testing: every exported name resolves."""

from __future__ import annotations

import subprocess
import sys

import pytest

import contextdelta.providers
import contextdelta.testing


@pytest.mark.parametrize("module", [contextdelta.providers, contextdelta.testing], ids=lambda m: m.__name__)
def test_every_exported_name_resolves(module: object) -> None:
    names = module.__all__  # type: ignore[attr-defined]
    for name in names:
        assert getattr(module, name) is not None, name


def test_importing_the_providers_package_does_not_import_openai() -> None:
    code = "import sys, contextdelta.providers; print('openai' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "False"
