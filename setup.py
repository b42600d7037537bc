"""The one piece of build configuration that pyproject.toml cannot express: the task suites as package data.

Everything else (metadata, dependencies, the migrations as data files) is in ``pyproject.toml``. The suites stay
where contributors edit them, ``tasks/`` at the repository root (SPEC section 1); the build maps that folder to
``contextdelta._suites`` (each folder below it a namespace package, as setuptools wants data folders), so the wheel
and the sdist carry every task file and every ``SUITE.lock`` below ``tasks/`` by rule, with no copy in the source
tree. ``contextdelta.tasks.suites`` finds them there in an installed package, and ``tasks/`` in a source checkout.
"""

from setuptools import find_namespace_packages, find_packages, setup

SUITES_PACKAGE = "contextdelta._suites"
suite_packages = [SUITES_PACKAGE, *(f"{SUITES_PACKAGE}.{name}" for name in find_namespace_packages(where="tasks"))]

setup(
    packages=[*find_packages(include=["contextdelta", "contextdelta.*"]), *suite_packages],
    package_dir={SUITES_PACKAGE: "tasks"},
    package_data={name: ["*.yaml", "SUITE.lock"] for name in suite_packages},
)
