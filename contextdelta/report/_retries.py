"""The retried failed trials of a run (``run-benchmark --resume ID --retry-failed``): how many episodes were re-run,
how many superseded attempts ``raw_runs.jsonl`` keeps, and how the re-runs ended.

Every other section counts each episode's current (latest) attempt only (``contextdelta.rundir.attempts``); the
superseded attempts are counted here and nowhere else, so nothing is counted twice and a failed attempt never
turns into a success: a re-run that fails again is a failed trial like any other.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from contextdelta.report._models import RetriedEpisode, RetrySection
from contextdelta.rundir import EpisodeRecord


def failed_call_ending(record: EpisodeRecord) -> str | None:
    """How the failed model call that ended ``record`` ended: its last attempt's HTTP status (``HTTP 503``), or its
    error without an answer (``APITimeoutError``); None when no step recorded a failed call."""
    failed = next((s.failed_call for s in reversed(record.trace.steps) if s.failed_call is not None), None)
    if failed is None:
        return None
    if failed.status_code is not None:
        return f"HTTP {failed.status_code}"
    return failed.attempt_failures[-1].error if failed.attempt_failures else "no answer"


def retries_section(records: Sequence[EpisodeRecord], superseded: Sequence[EpisodeRecord]) -> RetrySection | None:
    """The section from the current ``records`` and the ``superseded`` attempts; None when nothing was retried."""
    if not superseded:
        return None
    earlier: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for record in superseded:
        earlier[record.run_id].append(record)
    episodes = []
    for record in sorted((r for r in records if r.run_id in earlier), key=lambda r: r.run_id):
        before = sorted(earlier[record.run_id], key=lambda r: r.attempt)
        outcome = "failed_trial" if record.failed else ("success" if record.verdict.success else "failure")
        episodes.append(
            RetriedEpisode(
                run_id=record.run_id,
                attempts=len(before) + 1,
                superseded=[r.trace.termination.value for r in before],
                termination=record.trace.termination.value,
                outcome=outcome,
            )
        )
    calls = Counter(ended for r in superseded if (ended := failed_call_ending(r)) is not None)
    return RetrySection(
        retried_episodes=len(episodes),
        superseded_attempts=len(superseded),
        with_verdict=sum(e.outcome != "failed_trial" for e in episodes),
        succeeded=sum(e.outcome == "success" for e in episodes),
        failed_again=sum(e.outcome == "failed_trial" for e in episodes),
        superseded_terminations=dict(sorted(Counter(r.trace.termination.value for r in superseded).items())),
        superseded_failed_calls=dict(sorted(calls.items())) if calls else None,
        episodes=episodes,
    )
