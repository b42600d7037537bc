"""The public names of the report, verify and attribution packages resolve and are documented."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("package", ["contextdelta.report", "contextdelta.verify", "contextdelta.attribution"])
def test_every_exported_name_exists_and_has_a_docstring(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__doc__
    for name in module.__all__:
        value = getattr(module, name)
        if callable(value) and not name.isupper():
            assert value.__doc__, f"{package}.{name} has no docstring"
