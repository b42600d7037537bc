"""Every third-party package the code imports is declared in ``pyproject.toml``, with a lower bound.

The package (``contextdelta/``) may import what ``[project] dependencies`` or an optional extra other than ``test``
declares (an extra's modules import it lazily, behind their command); the tests, benchmarks, examples and
migrations may also import the ``test`` extra. A package imported without being declared works only where
something else happened to install it (``pandas``, ``altair`` and ``jinja2`` once did), so a clean install breaks.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
import tomllib
from collections.abc import Iterator, Mapping
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = ("contextdelta",)
OTHER_DIRS = ("tests", "benchmarks", "examples", "migrations", "scripts")
FIRST_PARTY = {"contextdelta", "tests", "benchmarks", "examples", "contextdelta_example_strategies"}
NOT_INSTALLED_HERE = {"llama_cpp": "llama-cpp-python", "fastapi": "fastapi"}
"""Modules of optional extras the test environment does not install (the ``local`` extra): their distributions."""


def normalise(name: str) -> str:
    """PEP 503 name normalisation (``PyYAML`` and ``pyyaml``, ``mcp_types`` and ``mcp-types`` are one name)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def imported_modules(folder: Path) -> Iterator[tuple[str, Path]]:
    """(top-level module, file) of every absolute import in the Python files under ``folder``."""
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                yield name.split(".")[0], path


def third_party(folders: tuple[str, ...]) -> dict[str, set[Path]]:
    """Third-party top-level modules imported under ``folders`` (standard library and first party left out)."""
    found: dict[str, set[Path]] = {}
    for folder in folders:
        if not (ROOT / folder).is_dir():
            continue
        for module, path in imported_modules(ROOT / folder):
            if module in sys.stdlib_module_names or module in FIRST_PARTY:
                continue
            found.setdefault(module, set()).add(path.relative_to(ROOT))
    return found


@functools.cache
def installed() -> Mapping[str, list[str]]:
    """Top-level module -> the installed distributions providing it (one scan of the environment)."""
    return packages_distributions()


def distributions(module: str) -> set[str]:
    """The (normalised) distributions that provide ``module``."""
    if module in NOT_INSTALLED_HERE:
        return {normalise(NOT_INSTALLED_HERE[module])}
    return {normalise(d) for d in installed().get(module, [module])}


def declared() -> tuple[dict[str, Requirement], dict[str, dict[str, Requirement]]]:
    """The core requirements and each optional extra's, by normalised name."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = {normalise(r.name): r for r in map(Requirement, project["dependencies"])}
    extras = {
        extra: {normalise(r.name): r for r in map(Requirement, requirements)}
        for extra, requirements in project.get("optional-dependencies", {}).items()
    }
    return core, extras


def undeclared(folders: tuple[str, ...], allowed: set[str]) -> list[str]:
    return [
        f"{module} (distribution {' or '.join(sorted(dists))}) imported by {', '.join(map(str, sorted(paths)[:3]))}"
        for module, paths in sorted(third_party(folders).items())
        if not (dists := distributions(module)) & allowed
    ]


@pytest.mark.slow
def test_the_package_imports_only_declared_dependencies() -> None:
    core, extras = declared()
    allowed = set(core) | {name for extra, reqs in extras.items() if extra != "test" for name in reqs}
    missing = undeclared(PACKAGE_DIRS, allowed)
    assert not missing, "declare these in pyproject.toml ([project] dependencies or an extra):\n" + "\n".join(missing)


@pytest.mark.slow
def test_tests_and_scripts_import_only_declared_dependencies() -> None:
    core, extras = declared()
    allowed = set(core) | {name for reqs in extras.values() for name in reqs}
    missing = undeclared(OTHER_DIRS, allowed)
    assert not missing, "declare these in pyproject.toml (the test extra):\n" + "\n".join(missing)


def test_every_requirement_has_a_lower_bound() -> None:
    core, extras = declared()
    everything = [*core.values(), *(r for reqs in extras.values() for r in reqs.values())]
    unbounded = [str(r) for r in everything if not any(s.operator in (">=", "==", "~=", ">") for s in r.specifier)]
    assert not unbounded, f"requirements without a lower bound: {unbounded}"


def test_the_check_sees_an_undeclared_import(tmp_path: Path) -> None:
    """The scanner finds third-party imports (absolute, from-imports, nested) and leaves stdlib and relative ones."""
    module = tmp_path / "m.py"
    module.write_text("import os\nfrom . import x\nimport yaml.cyaml\ndef f():\n    from pandas import DataFrame\n")
    assert sorted(m for m, _ in imported_modules(tmp_path) if m not in sys.stdlib_module_names) == ["pandas", "yaml"]
    assert distributions("yaml") == {"pyyaml"}
