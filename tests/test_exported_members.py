"""Every package's public API is its ``__init__``: ``__all__`` lists exactly the public names it holds (as httpx's
``tests/test_exported_members.py`` does for httpx), and each listed name resolves."""

from __future__ import annotations
import __future__

import importlib
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(
    ".".join(path.parent.relative_to(ROOT).parts) for path in (ROOT / "contextdelta").rglob("__init__.py")
)
FUTURE_FEATURES = tuple(type(getattr(__future__, name)) for name in __future__.all_feature_names)


def public_members(module: types.ModuleType) -> set[str]:
    """Public names bound in the package, its submodules aside (they are files, not API)."""
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, (types.ModuleType, *FUTURE_FEATURES))
    }


@pytest.mark.parametrize("package", PACKAGES)
def test_all_public_members_are_exported_and_every_export_exists(package: str) -> None:
    module = importlib.import_module(package)
    exported = getattr(module, "__all__", None)
    assert isinstance(exported, list), f"{package}/__init__.py declares no __all__ list"
    assert len(exported) == len(set(exported)), f"{package}.__all__ lists a name twice"
    assert sorted(public_members(module) - set(exported)) == [], f"{package} binds public names not in __all__"
    missing = [name for name in exported if not hasattr(module, name)]
    assert missing == [], f"{package}.__all__ lists names it does not have"


def test_every_package_is_checked() -> None:
    assert {"contextdelta", "contextdelta.runner", "contextdelta.rundir", "contextdelta.worlds.order"} <= set(PACKAGES)
