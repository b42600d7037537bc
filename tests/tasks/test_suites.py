"""Task suites: which folder ``--tasks`` names, what the package ships, and how a run records it."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextdelta.tasks import (
    CORE_SUITE,
    LOCK_NAME,
    SuiteError,
    packaged_suites,
    packaged_suites_root,
    recorded_source,
    resolve_suite,
    summarize_suite,
)

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "tasks"


def test_in_a_checkout_the_packaged_suites_are_tasks_and_every_folder_below_it_with_a_lock() -> None:
    # the rule setup.py packages by: a suite is tasks/ itself, or any folder below it holding a SUITE.lock
    nested = sorted(p.parent.relative_to(TASKS).as_posix() for p in TASKS.rglob(LOCK_NAME) if p.parent != TASKS)
    assert packaged_suites_root() == TASKS
    suites = packaged_suites()
    assert list(suites) == [CORE_SUITE, *nested]
    assert suites[CORE_SUITE] == TASKS
    assert "horizon" in nested  # issue 20's generated suite ships with no list naming it


@pytest.mark.slow
def test_every_packaged_suite_loads_and_matches_its_lock() -> None:
    for name, path in packaged_suites().items():
        summary = summarize_suite(name, path)
        assert summary.problems == 0, name
        assert summary.tasks > 0, name
        assert summary.lock_matches, f"{name}: {LOCK_NAME} does not record {summary.suite_hash}"
        assert summary.source == f"package:{name}"


def test_without_tasks_the_default_is_dot_tasks_when_it_is_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tasks").mkdir()
    suite = resolve_suite(None)
    assert (suite.source, suite.path, suite.packaged) == ("tasks", Path("tasks"), False)


def test_without_tasks_and_without_dot_tasks_the_default_is_the_packaged_core_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tasks").write_text("a file, not a folder")
    suite = resolve_suite(None)
    assert (suite.source, suite.path, suite.packaged) == ("package:core", TASKS, True)


def test_package_names_resolve_and_an_unknown_one_is_refused_naming_the_known_ones() -> None:
    assert resolve_suite("package:horizon").path == TASKS / "horizon"
    with pytest.raises(SuiteError) as refused:
        resolve_suite("package:nope")
    assert str(refused.value) == (
        "--tasks package:nope: no packaged suite 'nope'; packaged: "
        + ", ".join(f"package:{n}" for n in packaged_suites())
        + " (`contextdelta suites`)"
    )


@pytest.mark.parametrize("given", ["tasks", "tasks/", "./tasks/horizon", "{cwd}/tasks/horizon", "{outside}/suite"])
def test_a_folder_is_recorded_relative_to_the_working_directory_never_absolute(
    given: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    suite = resolve_suite(given.format(cwd=work, outside=tmp_path / "elsewhere"))
    assert not suite.source.startswith("/")
    assert "\\" not in suite.source
    assert (work / suite.source).resolve() == (work / suite.path).resolve()
    assert suite.source == recorded_source(suite.path)
