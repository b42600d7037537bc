"""benchmarks/dashboard_first_page.py with ``--results-dir``: the pages it waits for are those of the run it times,
whatever its size (it waited for "576 of 576 episodes", the generated run's count, and timed out on any other)."""

from __future__ import annotations

from benchmarks.dashboard_first_page import entry_pages


def test_the_episodes_page_waits_for_the_runs_own_episode_count() -> None:
    pages = {name: expect for name, _path, expect in entry_pages("run-12", 12, "runs")}
    assert pages["episodes"] == ["Episodes", "12 of 12 episodes"]
    assert not any("576" in text for texts in pages.values() for text in texts)


def test_the_generated_run_still_waits_for_its_576_episodes() -> None:
    pages = {name: expect for name, _path, expect in entry_pages("run-576", 576, "runs")}
    assert pages["episodes"] == ["Episodes", "576 of 576 episodes"]
