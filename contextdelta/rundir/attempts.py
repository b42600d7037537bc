"""Attempts: how an episode that was run more than once reads from ``raw_runs.jsonl``.

``raw_runs.jsonl`` is append-only: no line is ever rewritten. ``run-benchmark --resume ID --retry-failed`` re-runs
the failed trials of a run and appends each re-run as a new record of the same episode (the same run id, so the
same task, strategy, mode, repeat and control, and the same episode seed) whose ``attempt`` is one higher than the
latest. The record with the highest attempt is the episode's *current* record: every derived file, report, the
trace store and the dashboard count current records only. The earlier ones are *superseded* attempts: kept as
evidence, re-derived by ``verify``, shown by the report and the dashboard, counted nowhere. A failed attempt stays
failed; a retry that fails again is simply the next failed attempt.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from contextdelta.rundir.records import EpisodeRecord


def current_records(records: Iterable[EpisodeRecord]) -> list[EpisodeRecord]:
    """The current record of each episode (its highest attempt; of equal attempts the later line), in the order
    their lines appear: ``records`` with every superseded attempt left out."""
    listed = list(records)
    best: dict[str, int] = {}
    for position, record in enumerate(listed):
        held = best.get(record.run_id)
        if held is None or record.attempt >= listed[held].attempt:
            best[record.run_id] = position
    keep = set(best.values())
    return [record for position, record in enumerate(listed) if position in keep]


@dataclass(frozen=True)
class EpisodeAttempts:
    """Every record of a run in the order written (``raw_runs.jsonl`` lines), split into current and superseded."""

    records: tuple[EpisodeRecord, ...]
    """Every attempt of every episode, in file order."""
    current: tuple[EpisodeRecord, ...]
    """Each episode's current record (its highest attempt), in file order."""
    superseded: tuple[EpisodeRecord, ...]
    """The attempts a later attempt of the same episode replaced, in file order."""

    @classmethod
    def of(cls, records: Iterable[EpisodeRecord]) -> EpisodeAttempts:
        listed = tuple(records)
        current = current_records(listed)
        kept = {id(r) for r in current}
        return cls(listed, tuple(current), tuple(r for r in listed if id(r) not in kept))

    @cached_property
    def by_episode(self) -> dict[str, list[EpisodeRecord]]:
        """Every attempt of each episode, in file order, by run id."""
        grouped: dict[str, list[EpisodeRecord]] = {}
        for record in self.records:
            grouped.setdefault(record.run_id, []).append(record)
        return grouped

    def attempts_of(self, run_id: str) -> list[EpisodeRecord]:
        """Every attempt of one episode, in file order (empty when it has none)."""
        return list(self.by_episode.get(run_id, ()))

    @property
    def retried(self) -> list[EpisodeRecord]:
        """The current records of the episodes that have superseded attempts, in file order."""
        again = {r.run_id for r in self.superseded}
        return [r for r in self.current if r.run_id in again]
