"""The recorder interface: everything a run writes goes through it, and the run directory is the first recorder.

The runner (the driver) alone calls recorders, in this order, from one thread::

    start(RunStart)            once, after the run directory exists and its manifest says ``running``
    episode(EpisodeRecord)     once per finished episode, in the order they finish
    finish(RunEnd)             once, however the run ended (complete, budget, signal, error)

After every recorder's ``finish`` returned, the driver writes the final manifest: the manifest is the run's
commit record, so a ``complete`` manifest on disk means every recorder finished. Where episodes ran (this
process, worker processes, another machine) is the executor's business; records come back to the driver, which
passes them to the recorders, so no recorder needs to be thread- or process-safe.

Recorders here: `RunDirectoryRecorder` (``raw_runs.jsonl``, ``tool_events.jsonl``, ``task_results.csv``). The
report files, the trace store and the progress bar are recorders of their own packages
(``contextdelta.report.ReportFiles``, ``contextdelta.store.StoreRecorder``,
``contextdelta.runner.ProgressDisplay``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from contextdelta.rundir.io import JsonlWriter
from contextdelta.rundir.layout import RAW_RUNS, RAW_RUNS_RECEIPTS, TOOL_EVENTS, RunDirectory, tool_event_records
from contextdelta.rundir.receipts import ChainState, chain_state, receipt_line, record_receipt
from contextdelta.rundir.records import EpisodeRecord, RunManifest


@dataclass(frozen=True)
class RunStart:
    """What recorders learn when a run opens (a new run, or a resumed one)."""

    path: Path
    """The run directory."""
    manifest: RunManifest
    """The manifest as written when the run opened: status ``running``, this session appended."""
    planned: int
    """Episodes in the whole plan (earlier sessions' included)."""
    done: tuple[EpisodeRecord, ...]
    """Episodes already in ``raw_runs.jsonl`` (from earlier sessions): each one's current record, in file order;
    empty for a new run."""
    pending: int
    """Episodes this session means to run (missing ones, and with ``--retry-failed`` failed trials again)."""
    superseded: tuple[EpisodeRecord, ...] = ()
    """Earlier attempts already in ``raw_runs.jsonl`` that a later attempt replaced (``--retry-failed``)."""

    @property
    def resumed(self) -> bool:
        """This session continues a run that an earlier session started."""
        return len(self.manifest.sessions) > 1


@dataclass(frozen=True)
class RunEnd:
    """What recorders learn when a run ends, before the driver commits the final manifest."""

    path: Path
    """The run directory."""
    manifest: RunManifest
    """The final manifest (status ``complete`` or ``incomplete``, counts, stop reason) about to be committed."""
    records: tuple[EpisodeRecord, ...]
    """Every finished episode's current record (its latest attempt), earlier sessions' included, in the order
    they were recorded: what every derived file counts."""
    new: int
    """How many of ``records`` this session added (the last ``new`` ones)."""
    superseded: tuple[EpisodeRecord, ...] = ()
    """Every attempt a later attempt of the same episode replaced (``--retry-failed``), in the order recorded:
    kept in ``raw_runs.jsonl``, shown by the report, counted nowhere."""

    @property
    def stop_reason(self) -> str | None:
        """Why the run stopped before every planned episode finished; None when it is complete."""
        return self.manifest.stop_reason


@runtime_checkable
class Recorder(Protocol):
    """Something a run writes to: a file set, a database, a display, an export."""

    def start(self, run: RunStart) -> None:
        """The run opened; ``run.done`` holds what earlier sessions recorded."""

    def episode(self, record: EpisodeRecord) -> None:
        """One episode finished (graded, costed); called by the driver as records arrive."""

    def finish(self, run: RunEnd) -> None:
        """The run ended; write what depends on every episode. Called however the run ended."""


class Recorders:
    """Several recorders called in order, as one."""

    def __init__(self, recorders: Iterable[Recorder]) -> None:
        self.recorders = list(recorders)

    def start(self, run: RunStart) -> None:
        for recorder in self.recorders:
            recorder.start(run)

    def episode(self, record: EpisodeRecord) -> None:
        for recorder in self.recorders:
            recorder.episode(record)

    def finish(self, run: RunEnd) -> None:
        """Every recorder's ``finish``, even when an earlier one raised (the first error is raised at the end)."""
        error: BaseException | None = None
        for recorder in self.recorders:
            try:
                recorder.finish(run)
            except BaseException as exc:  # each recorder gets to close its files; the first failure is reported
                error = error or exc
        if error is not None:
            raise error


class RunDirectoryRecorder:
    """The run directory's per-episode files: each finished episode is appended to ``raw_runs.jsonl`` (the source
    of truth), then its receipt to ``raw_runs.receipts.jsonl`` (the next link of the hash chain), then its lines to
    ``tool_events.jsonl``; at the end both derived files are rebuilt from all episodes, so a run killed between two
    appends still ends consistent (a record without its receipt gets one on resume)."""

    def __init__(self, directory: RunDirectory) -> None:
        self.directory = directory
        self._raw: JsonlWriter | None = None
        self._receipts: JsonlWriter | None = None
        self._events: JsonlWriter | None = None
        self._chain: ChainState | None = None

    def start(self, run: RunStart) -> None:
        if run.done:
            # an earlier session may have died between its two appends: start from files that agree (the
            # current records only: a superseded attempt is no row and no tool event line)
            self.directory.write_derived(list(run.done))
        self._raw = JsonlWriter(self.directory.file(RAW_RUNS))
        self._receipts = JsonlWriter(self.directory.file(RAW_RUNS_RECEIPTS))
        self._chain = chain_state(self.directory.file(RAW_RUNS_RECEIPTS), run.manifest.run_group_id)
        self._events = JsonlWriter(self.directory.file(TOOL_EVENTS))

    def episode(self, record: EpisodeRecord) -> None:
        if self._raw is None or self._receipts is None or self._events is None or self._chain is None:
            raise RuntimeError("RunDirectoryRecorder.episode before start")
        line = record.canonical_text()
        receipt = record_receipt(record, self._chain.lines + 1, self._chain.head)
        writers = (self._raw, self._receipts, self._events)
        ends = [writer.end for writer in writers]
        try:
            self._raw.append_lines([line])
            self._receipts.append_lines([receipt_line(receipt)])
            self._events.append(list(tool_event_records(record)))
        except OSError:
            # all or nothing (a full disk): a record kept without its receipt is a line no kill explains, which a
            # sealed run counts as added after it; the episode the caller does not keep is missing, and runs again
            for writer, end in zip(writers, ends, strict=True):
                with contextlib.suppress(OSError):
                    writer.truncate(end)
            raise
        self._chain = ChainState(receipt.line, receipt.chain)

    def finish(self, run: RunEnd) -> None:
        for writer in (self._raw, self._receipts, self._events):
            if writer is not None:
                writer.close()
        self._raw = self._receipts = self._events = None
        self.directory.write_derived(list(run.records))


class OpenedLater:
    """A recorder made only when the run opens, every check passed (``make`` gets the RunStart; None: no
    recorder): a refused run opens no database and imports nothing it would have needed."""

    def __init__(self, make: Callable[[RunStart], Recorder | None]) -> None:
        self.make = make
        self.inner: Recorder | None = None

    def start(self, run: RunStart) -> None:
        self.inner = self.make(run)
        if self.inner is not None:
            self.inner.start(run)

    def episode(self, record: EpisodeRecord) -> None:
        if self.inner is not None:
            self.inner.episode(record)

    def finish(self, run: RunEnd) -> None:
        if self.inner is not None:
            self.inner.finish(run)
