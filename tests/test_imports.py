"""The import graph of the package: no cycles between packages, and packages talk only through their public faces.

A *package* is a top-level folder of ``contextdelta`` (``runner``, ``worlds``, ...) or a top-level module
(``canonical``, ``settings``, ``cli``). Between packages:

- no cycles (``a`` imports ``b`` imports ... ``a``), ``TYPE_CHECKING`` and function-level imports included;
- ``from contextdelta.X import name`` only (or from a public subpackage of X, ``contextdelta.X.sub``), never
  from a module of X: what a package's ``__init__.py`` exports (its ``__all__``) is its public API, and ``name``
  must be in it;
- no ``_private`` module or name of another package (a private module is private to the package holding it and
  that package's subpackages: ``contextdelta._loopback`` serves all of ``contextdelta``).
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "contextdelta"


@dataclass(frozen=True)
class Import:
    """One import statement's target, as found in a module."""

    importer: str
    line: int
    module: str
    names: tuple[str, ...]
    """The names of ``from module import names``; empty for ``import module``."""


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(importer: str, source: str, is_package: bool = False) -> Iterator[Import]:
    """Every import of the package's own modules in ``source`` (relative imports resolved)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    yield Import(importer, node.lineno, alias.name, ())
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = importer.split(".") if is_package else importer.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, module] if module else base)
            if module.split(".")[0] == PACKAGE:
                yield Import(importer, node.lineno, module, tuple(a.name for a in node.names))


def package_of(module: str) -> str:
    """The top-level package (or top-level module) a module belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _is_private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def _within(importer: str, owner: str) -> bool:
    return importer == owner or importer.startswith(owner + ".")


def violations(found: list[Import], exported: dict[str, set[str]]) -> list[str]:
    """Cross-package imports that bypass a public face (``exported``: every package, top-level or a public
    subpackage such as ``contextdelta.tasks.families``, by dotted name -> its ``__all__``)."""
    problems = []
    for i in found:
        where = f"{i.importer}:{i.line}: "
        parts = i.module.split(".")
        # a private module anywhere in the path belongs to its parent and that parent's subpackages
        private = next(
            (
                ".".join(parts[:depth])
                for depth, part in enumerate(parts)
                if part.startswith("_")
                and not part.startswith("__")
                and not _within(i.importer, ".".join(parts[:depth]))
            ),
            None,
        )
        if private is not None:
            problems.append(where + f"imports the private module {i.module} of {private}")
            continue
        if package_of(i.importer) == package_of(i.module) or len(parts) < 2:
            continue
        if i.module not in exported:
            if f"{PACKAGE}.{package_of(i.module)}" in exported:
                face = max((p for p in exported if _within(i.module, p)), key=len)
                problems.append(where + f"imports {i.module}: import from {face} (its __init__'s __all__) instead")
            continue  # a top-level module (canonical, settings) is its own face
        for name in i.names:
            if name.startswith("_"):
                problems.append(where + f"imports the private name {name} of {i.module}")
            elif name not in exported[i.module]:
                problems.append(where + f"imports {name} from {i.module}, which does not export it (__all__)")
    return problems


def package_graph(found: list[Import]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for i in found:
        source, target = package_of(i.importer), package_of(i.module)
        if source != target and i.module != PACKAGE:
            graph.setdefault(source, set()).add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one package (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for child in sorted(graph.get(node, ())):
            if child not in index:
                visit(child)
                low[node] = min(low[node], low[child])
            elif child in on_stack:
                low[node] = min(low[node], index[child])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def _package_imports() -> list[Import]:
    found: list[Import] = []
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        found.extend(imports_of(module_name(path), path.read_text(encoding="utf-8"), path.name == "__init__.py"))
    return found


def _exported() -> dict[str, set[str]]:
    packages = sorted(module_name(p) for p in (ROOT / PACKAGE).rglob("__init__.py"))
    return {name: set(importlib.import_module(name).__all__) for name in packages if name != PACKAGE}


# ---- the package ------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_no_cycle_between_packages() -> None:
    found = _package_imports()
    loops = cycles(package_graph(found))
    sites = [
        f"{i.importer}:{i.line} -> {i.module}"
        for loop in loops
        for i in found
        if package_of(i.importer) in loop
        and package_of(i.module) in loop
        and package_of(i.importer) != package_of(i.module)
    ]
    assert loops == [], f"import cycles between packages {loops}: {sites}"


@pytest.mark.slow
def test_packages_import_each_other_only_through_their_public_api() -> None:
    assert violations(_package_imports(), _exported()) == []


# ---- the checks themselves fail on what they exist to catch --------------------------------------------------------


def _imports(sources: dict[str, str]) -> list[Import]:
    return [i for module, source in sources.items() for i in imports_of(module, source)]


def test_a_cycle_through_three_packages_is_found() -> None:
    found = _imports(
        {
            "contextdelta.a.x": "from contextdelta.b import f",
            "contextdelta.b.y": "from contextdelta.c import g",
            "contextdelta.c.z": "def h():\n    from contextdelta.a import k\n",
            "contextdelta.d.w": "from contextdelta.a import k",
        }
    )
    assert cycles(package_graph(found)) == [["a", "b", "c"]]


@pytest.mark.parametrize(
    ("module", "source", "problem"),
    [
        ("contextdelta.dashboard.data", "from contextdelta.report._format import num", "private module"),
        ("contextdelta.dashboard.data", "from contextdelta.replay import _content", "private name"),
        ("contextdelta.dashboard.data", "import contextdelta.replay._render", "private module"),
        ("contextdelta.verify.check", "from contextdelta.rundir.layout import RAW_RUNS", "instead"),
        ("contextdelta.verify.check", "from contextdelta.rundir import not_exported", "does not export"),
        ("contextdelta.verify.check", "from ..rundir.layout import RAW_RUNS", "instead"),
    ],
)
def test_each_kind_of_violation_is_named(module: str, source: str, problem: str) -> None:
    found = _imports({module: source})
    faces = {"contextdelta.report": {"num"}, "contextdelta.replay": set(), "contextdelta.rundir": {"RAW_RUNS"}}
    (message,) = violations(found, faces)
    assert problem in message and module in message


def test_inside_a_package_and_its_private_helpers_anything_goes() -> None:
    found = _imports(
        {
            "contextdelta.report._build": "from contextdelta.report._format import num",
            "contextdelta.dashboard.views.episode": "from contextdelta.dashboard import _ui",
            "contextdelta.testing.app": "from contextdelta._loopback import LoopbackServer",
            "contextdelta.runner.episode": "from contextdelta.canonical import canonical_json",
        }
    )
    assert violations(found, {f"contextdelta.{p}": set() for p in ("report", "dashboard", "testing", "runner")}) == []


def test_a_public_subpackage_is_a_face_of_its_own() -> None:
    found = _imports(
        {
            "contextdelta.cli": "from contextdelta.tasks.families import FAMILIES",
            "contextdelta.runner.x": "from contextdelta.tasks.families.order import OrderFamily",
        }
    )
    faces = {"contextdelta.tasks": {"Task"}, "contextdelta.tasks.families": {"FAMILIES"}}
    (message,) = violations(found, faces)
    assert "import from contextdelta.tasks.families (its __init__'s __all__) instead" in message
