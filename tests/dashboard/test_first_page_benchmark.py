"""benchmarks/dashboard_first_page.py with ``--results-dir``: the pages it waits for are those of the run it times,
whatever its size (it waited for "576 of 576 episodes", the generated run's count, and timed out on any other)."""

from __future__ import annotations

from pathlib import Path

from benchmarks.dashboard_first_page import COPY, entry_pages, served_folder


def test_the_episodes_page_waits_for_the_runs_own_episode_count() -> None:
    pages = {name: expect for name, _path, expect in entry_pages("run-12", 12, "runs")}
    assert pages["episodes"] == ["Episodes", "12 of 12 episodes"]
    assert not any("576" in text for texts in pages.values() for text in texts)


def test_the_generated_run_still_waits_for_its_576_episodes() -> None:
    pages = {name: expect for name, _path, expect in entry_pages("run-576", 576, "runs")}
    assert pages["episodes"] == ["Episodes", "576 of 576 episodes"]


def test_compare_is_timed_on_the_run_and_a_copy_never_on_the_run_with_itself(tmp_path: Path) -> None:
    """The dashboard refuses a run compared with itself: the benchmark compares the run with a copy of it, both in
    a folder of its own (the user's results folder is only read)."""
    from urllib.parse import parse_qs, urlsplit

    run = tmp_path / "results" / "run-12"
    (run / "tasks").mkdir(parents=True)
    (run / "raw_runs.jsonl").write_text("{}\n")
    (run / "tasks" / "t.yaml").write_text("id: t\n")
    work = tmp_path / "work"
    work.mkdir()
    served = served_folder(run, work)
    assert sorted(p.name for p in served.iterdir()) == ["run-12", "run-12" + COPY]
    assert (served / ("run-12" + COPY) / "tasks" / "t.yaml").read_text() == "id: t\n"
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["run-12"]  # nothing added there
    path = {name: path for name, path, _expect in entry_pages("run-12", 12, "runs")}["compare"]
    query = parse_qs(urlsplit(path).query)
    assert query["a"] == ["run-12"] and query["b"] == ["run-12" + COPY]
