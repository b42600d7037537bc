"""Checking a run directory's receipts (``contextdelta.rundir.receipts``): what cannot be re-derived must be what
was sealed when it was written.

- ``run_manifest.json``: in the form the runner writes it (compared as bytes: CRLF and a lost final newline are
  named), and equal, part by part, to what its seal digested;
- ``raw_runs.receipts.jsonl``: one unbroken hash chain whose head (at the sealed line count) is the seal's;
- ``raw_runs.jsonl``: every line's SHA-256 is its receipt's. A line that differs is named with its record and
  the field(s) whose digests differ; a record on another line than sealed is named as out of order; a line cut
  short as torn; a sealed line that is gone as missing; a line without a receipt as not in the chain;
- every other file (derived files, the task snapshot): the SHA-256 the seal recorded; none added.

A run directory written before receipts existed has no seal: a note says so, and only a torn last line of
``raw_runs.jsonl`` is looked for here (everything else is re-derived as before). A run that must carry a seal
(``RunDirectory.seal_expected``: it has receipts, or its manifest records a version that seals every run) and has
none had its seal removed: a divergence naming the directory, the field and the remedy.
"""

from __future__ import annotations

import bisect
import codecs
import json
import os
from dataclasses import dataclass, field
from typing import Any

from contextdelta._words import plural
from contextdelta.canonical import canonical_json, content_hash, sha256_hex
from contextdelta.rundir import (
    DERIVED_FILES,
    MANIFEST,
    RAW_RUNS,
    RAW_RUNS_RECEIPTS,
    SEAL_VERSION,
    SEALED_APART,
    SEALED_SINCE,
    TASKS_SNAPSHOT,
    UNSEALED,
    RecordReceipt,
    RunDirectory,
    RunManifest,
    RunStatus,
    Seal,
    chain_next,
    chain_start,
    file_digests,
    odd_entries,
    parse_json,
    part_differences,
    parts_of,
    seal_sha256,
    split_lines,
)

MAX_FIELDS_PER_RECORD = 12
"""At most this many edited fields are named per record; the rest are counted in one line."""
NO_CHAIN_NOTE = (
    "this run directory carries no hash chain (it was written before receipts existed): what cannot be "
    "re-derived (timestamps, usage, latencies, the model's replies) is not checked against a seal"
)


@dataclass
class SealFindings:
    """What the receipts check found, for the verifier to report."""

    divergences: list[tuple[str, str, str, int | None]] = field(default_factory=list)
    """(run id or run group, field, detail, the record's attempt where a record is named)."""
    notes: list[str] = field(default_factory=list)
    sealed_order: list[int] = field(default_factory=list)
    """For each complete line of ``raw_runs.jsonl`` in file order, the position its receipt sealed it at (lines
    without a receipt keep their own): the order the derived files were written in."""
    torn: set[str] = field(default_factory=set)
    """Episodes whose line is torn (named here, so not again as missing)."""
    seal_expected: bool = True
    """Whether the run must carry a seal (``RunDirectory.seal_expected``); False only for a run from before
    receipts."""


def _run_id_of(raw: bytes) -> str | None:
    """The run id a line holds, even a torn one (canonical JSON puts ``run_id`` early)."""
    try:
        value = parse_json(raw)
        return str(value["run_id"]) if isinstance(value, dict) and "run_id" in value else None
    except ValueError:
        marker = b'"run_id":"'
        at = raw.find(marker)
        if at < 0:
            return None
        end = raw.find(b'"', at + len(marker))
        return raw[at + len(marker) : end].decode("utf-8", "replace") if end > 0 else None


COPIED_WHILE_WRITING = (
    "this directory is an incomplete copy of a run that was still writing it (the receipts were copied after the "
    "records; a kill never leaves a receipt ahead of its record); copy it again once the run is complete, or resume "
    "it with run-benchmark --resume"
)


def copied_while_writing(directory: RunDirectory) -> str | None:
    """Why the run directory (its manifest ``running``) reads as a copy taken while its run was writing it, or None:
    ``raw_runs.receipts.jsonl`` holds more whole receipts than ``raw_runs.jsonl`` whole records, which a kill never
    leaves (a record is appended before its receipt) and a copy of the two files taken one after the other does."""
    try:
        lines, torn = split_lines(directory.file(RAW_RUNS).read_bytes())
        receipts, cut = split_lines(directory.file(RAW_RUNS_RECEIPTS).read_bytes())
    except OSError:
        return None
    records, sealed = len(lines) - (1 if torn else 0), len(receipts) - (1 if cut else 0)
    if sealed <= records:
        return None
    last = f" and a last line cut short after {len(lines[-1])} bytes" if torn else ""
    return (
        f"{RAW_RUNS} holds {plural(records, 'whole record')}{last}, {RAW_RUNS_RECEIPTS} "
        f"{plural(sealed, 'receipt')}: {COPIED_WHILE_WRITING}"
    )


BOM_ADDED = "starts with a UTF-8 byte order mark (BOM) added after the run; the runner writes none"
CRLF_LINE = "its line ending was converted to CRLF (\\r\\n) after the run"
CRLF_FILE = "its line endings were converted to CRLF (\\r\\n) after the run; the runner writes \\n"


def _as_written(lines: list[bytes], torn: bool) -> tuple[list[bytes], dict[int, list[str]]]:
    """The lines of a JSONL file as the runner wrote them, and for each line (by index) whose bytes an editor
    changed without changing a value, what changed: a byte order mark before it, a carriage return before its
    newline (a CRLF conversion; not looked for on a torn last line, which has no newline)."""
    out: list[bytes] = []
    found: dict[int, list[str]] = {}
    for i, raw in enumerate(lines):
        if raw.startswith(codecs.BOM_UTF8):
            raw = raw[len(codecs.BOM_UTF8) :]
            found.setdefault(i, []).append(BOM_ADDED)
        if raw.endswith(b"\r") and not (torn and i == len(lines) - 1):
            raw = raw[:-1]
            found.setdefault(i, []).append(CRLF_LINE)
        out.append(raw)
    return out, found


def _whole_file_crlf(found: dict[int, list[str]], complete: int) -> bool:
    """Whether every complete line was converted to CRLF (named once for the file, not per line); removes those
    per-line findings when so."""
    if complete == 0 or any(CRLF_LINE not in found.get(i, []) for i in range(complete)):
        return False
    for i in range(complete):
        found[i].remove(CRLF_LINE)
        if not found[i]:
            del found[i]
    return True


def _longest_increasing(values: list[int]) -> set[int]:
    """Indices (into ``values``) of one longest strictly increasing subsequence."""
    tails: list[int] = []
    tail_index: list[int] = []
    previous = [-1] * len(values)
    for i, value in enumerate(values):
        at = bisect.bisect_left(tails, value)
        if at == len(tails):
            tails.append(value)
            tail_index.append(i)
        else:
            tails[at] = value
            tail_index[at] = i
        previous[i] = tail_index[at - 1] if at > 0 else -1
    keep: set[int] = set()
    i = tail_index[-1] if tail_index else -1
    while i >= 0:
        keep.add(i)
        i = previous[i]
    return keep


def _manifest_form(data: bytes, value: Any) -> str | None:
    """How the bytes of ``run_manifest.json`` differ from the form the runner writes (None: they do not)."""
    wanted = (json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
    if data == wanted:
        return None
    if data.startswith(codecs.BOM_UTF8):
        rest = _manifest_form(data[len(codecs.BOM_UTF8) :], value)
        bom = "a UTF-8 byte order mark (BOM) was added at its start after the run; the runner writes none"
        return bom if rest is None else f"{bom}; and {rest}"
    if data + b"\n" == wanted:
        return "lost its final newline after the run (every other byte is as the runner wrote it)"
    unix = data.replace(b"\r\n", b"\n")
    if unix in (wanted, wanted[:-1]):
        lost = " and lost its final newline" if unix != wanted else ""
        return f"its line endings were converted to CRLF (\\r\\n){lost} after the run; the runner writes \\n"
    return "its bytes are not the form the runner writes (reformatted after the run)"


class _SealCheck:
    def __init__(self, directory: RunDirectory, manifest: RunManifest) -> None:
        self.directory = directory
        self.manifest = manifest
        self.group = manifest.run_group_id
        self.running = manifest.status is RunStatus.RUNNING
        self.out = SealFindings()

    def diverge(self, run_id: str | None, name: str, detail: str, attempt: int | None = None) -> None:
        self.out.divergences.append((run_id or self.group, name, detail, attempt))

    # ---- the manifest -------------------------------------------------------------------------------------

    def check_manifest(self, seal: Seal) -> None:
        # bytes, not text: read_text would turn "\r\n" back into "\n" and hide a converted file
        data = self.directory.file(MANIFEST).read_bytes()
        value = parse_json(data)
        form = _manifest_form(data, value)
        if form is not None:
            self.diverge(None, MANIFEST, form)
        if seal_sha256(value["seal"]) != seal.sha256:
            self.diverge(None, f"{MANIFEST} seal", "edited after the run (its own digest does not match)")
        if seal.version != SEAL_VERSION:
            self.diverge(None, f"{MANIFEST} seal.version", f"{seal.version}; this verify knows {SEAL_VERSION}")
        body = {k: v for k, v in value.items() if k != "seal"}
        found = parts_of(body)
        changed = part_differences(seal.manifest_parts, found)
        for path, what in changed[:MAX_FIELDS_PER_RECORD]:
            self.diverge(None, f"{MANIFEST} {path}", f"{what} after the run (its digest is not the sealed one)")
        if len(changed) > MAX_FIELDS_PER_RECORD:
            self.diverge(None, MANIFEST, f"{len(changed) - MAX_FIELDS_PER_RECORD} more fields differ from the seal")
        if content_hash(body) != seal.manifest_sha256 and not changed:
            self.diverge(None, f"{MANIFEST} seal.manifest_sha256", "does not hash the manifest (the seal was edited)")

    # ---- the receipts -------------------------------------------------------------------------------------

    def read_chain(self, seal: Seal) -> list[RecordReceipt]:
        """The receipts, each checked to be canonical, numbered and chained; the chain checked against the seal."""
        path = self.directory.file(RAW_RUNS_RECEIPTS)
        if not path.is_file():
            self.diverge(None, RAW_RUNS_RECEIPTS, "missing: the manifest seals a hash chain over raw_runs.jsonl")
            return []
        lines, torn = split_lines(path.read_bytes())
        lines, forms = _as_written(lines, torn)
        if _whole_file_crlf(forms, len(lines) - (1 if torn else 0)):
            self.diverge(None, RAW_RUNS_RECEIPTS, CRLF_FILE)
        receipts: list[RecordReceipt] = []
        previous = chain_start(self.group)
        sealed = seal.records.lines
        if sealed == 0 and seal.records.head != previous:
            self.diverge(None, f"{MANIFEST} seal.records.head", "is not the start of this run group's chain")
        for number, raw in enumerate(lines, start=1):
            where = f"{RAW_RUNS_RECEIPTS} line {number}"
            if number == len(lines) and torn:
                if self.running and number > sealed:
                    self.out.notes.append(f"{where} is torn (the run was killed while writing it)")
                else:
                    self.diverge(None, where, "torn: cut short (no newline)")
                break
            try:
                receipt = RecordReceipt.model_validate_json(raw)
            except ValueError:
                self.diverge(None, where, "not a receipt (edited after the run); the lines after it are not checked")
                break
            for what in forms.get(number - 1, []):
                self.diverge(receipt.run_id, where, what)
            if raw.decode("utf-8", "replace") != canonical_json(receipt.model_dump(mode="json")):
                self.diverge(receipt.run_id, where, "its bytes are not the form the runner writes (reformatted)")
            if receipt.line != number:
                self.diverge(receipt.run_id, where, f"numbered {receipt.line} (edited, or lines moved)")
            if receipt.chain != chain_next(previous, receipt):
                self.diverge(receipt.run_id, where, "the hash chain breaks here: the receipt was edited after the run")
            previous = receipt.chain
            if number == sealed and receipt.chain != seal.records.head:
                self.diverge(None, f"{MANIFEST} seal.records.head", f"is not the chain value at line {sealed}")
            receipts.append(receipt)
        if len(receipts) < sealed:
            self.diverge(
                None, RAW_RUNS_RECEIPTS, f"holds {len(receipts)} receipts; the manifest sealed a chain of {sealed}"
            )
        elif len(receipts) > sealed and not self.running:
            self.diverge(
                None,
                RAW_RUNS_RECEIPTS,
                f"holds {len(receipts)} receipts; the manifest sealed a chain of {sealed} (added after the run)",
            )
        return receipts

    # ---- raw_runs.jsonl -----------------------------------------------------------------------------------

    def check_lines(self, receipts: list[RecordReceipt]) -> None:
        lines, torn = split_lines(self.directory.file(RAW_RUNS).read_bytes())
        lines, forms = _as_written(lines, torn)  # each line is then compared with its receipt as the runner wrote it
        if _whole_file_crlf(forms, len(lines) - (1 if torn else 0)):
            self.diverge(None, RAW_RUNS, CRLF_FILE)
        for i, found in sorted(forms.items()):
            for what in found:
                self.diverge(_run_id_of(lines[i]), RAW_RUNS, f"line {i + 1}: {what}")
        digests = [sha256_hex(line) for line in lines]
        match: list[int | None] = [None] * len(lines)
        used: set[int] = set()
        for i, digest in enumerate(digests):  # in place
            if i < len(receipts) and receipts[i].sha256 == digest:
                match[i] = i
                used.add(i)
        by_digest: dict[str, list[int]] = {}
        for j, receipt in enumerate(receipts):
            if j not in used:
                by_digest.setdefault(receipt.sha256, []).append(j)
        for i, digest in enumerate(digests):  # moved
            if match[i] is None and by_digest.get(digest):
                j = by_digest[digest].pop(0)
                match[i] = j
                used.add(j)
        edited = self._pair_edited(lines, match, used, receipts)
        exact = [(i, k) for i, k in enumerate(match) if k is not None and i not in edited]
        in_order = _longest_increasing([k for _, k in exact])
        for position, (i, k) in enumerate(exact):
            if position not in in_order:
                self.diverge(
                    receipts[k].run_id,
                    RAW_RUNS,
                    f"line {i + 1} holds the record sealed as line {k + 1}: lines out of order",
                )
        for i, paired in edited.items():
            self._edited_line(i, lines[i], receipts[paired], paired, last_torn=torn and i == len(lines) - 1)
        complete = len(lines) - (1 if torn else 0)
        line_of_digest = {receipt.sha256: j for j, receipt in reversed(list(enumerate(receipts)))}
        for i, sealed_at in enumerate(match):
            if sealed_at is None and i not in edited:
                # a kill between a record and its receipt leaves only the last complete line, just past the chain
                killed = i == complete - 1 == len(receipts)
                self._unsealed_line(
                    i,
                    lines[i],
                    last_torn=torn and i == len(lines) - 1,
                    sealed=len(receipts),
                    killed=killed,
                    copy_of=line_of_digest.get(digests[i]),
                )
        ahead = []
        for j, receipt in enumerate(receipts):
            if j not in used and j not in edited.values():
                if self.running and j >= complete:  # receipts copied after raw_runs.jsonl, while the run wrote both
                    ahead.append(receipt)
                    continue
                self.diverge(
                    receipt.run_id, RAW_RUNS, f"line {j + 1} is missing: the chain sealed a record of this episode"
                )
        if ahead:
            self.out.notes.append(
                f"{RAW_RUNS_RECEIPTS} holds {plural(len(ahead), 'receipt')} past the last whole line of {RAW_RUNS} "
                f"(from line {ahead[0].line}): {COPIED_WHILE_WRITING}"
            )
        order = []
        for i in range(complete):
            sealed_as = match[i] if match[i] is not None else edited.get(i)
            order.append(sealed_as if sealed_as is not None else i)
        self.out.sealed_order = order

    def _pair_edited(
        self, lines: list[bytes], match: list[int | None], used: set[int], receipts: list[RecordReceipt]
    ) -> dict[int, int]:
        """Lines without an exact receipt paired with receipts without an exact line: at the same position, else by
        run id (an edited record that was also moved)."""
        free = {j for j in range(len(receipts)) if j not in used}
        edited: dict[int, int] = {}
        for i in range(len(lines)):
            if match[i] is None and i in free:
                edited[i] = i
                free.discard(i)
        by_run: dict[str | None, list[int]] = {}
        for j in sorted(free):
            by_run.setdefault(receipts[j].run_id, []).append(j)
        for i in range(len(lines)):
            if match[i] is None and i not in edited:
                run_id = _run_id_of(lines[i])
                if run_id is not None and by_run.get(run_id):
                    edited[i] = by_run[run_id].pop(0)
        return edited

    def _edited_line(self, i: int, raw: bytes, receipt: RecordReceipt, j: int, *, last_torn: bool) -> None:
        run_id, attempt = receipt.run_id, receipt.attempt
        where = f"line {i + 1}"
        if j != i:
            self.diverge(
                run_id, RAW_RUNS, f"{where} holds the record sealed as line {j + 1}: lines out of order", attempt
            )
        why = ""
        try:
            value: Any = parse_json(raw)
        except ValueError as exc:
            value, why = None, f"{exc}; "
        if last_torn and self.running:  # a kill tears a line before its receipt exists: this is a copy mid-write
            self.out.notes.append(
                f"{RAW_RUNS} {where} ({run_id or 'unknown episode'}) is cut short after {len(raw)} bytes, yet its "
                f"receipt is in {RAW_RUNS_RECEIPTS}: {COPIED_WHILE_WRITING}"
            )
            self.out.torn.add(run_id or "")
            return
        if last_torn or value is None:
            what = (
                f"torn: cut short after {len(raw)} bytes, edited after the run (its manifest says "
                f"{self.manifest.status.value}; a copy taken while it ran would say running)"
                if last_torn
                else f"not a JSON record ({why}{len(raw)} bytes): edited after the run"
            )
            self.diverge(run_id, RAW_RUNS, f"{where} is {what}; the chain sealed a whole record", attempt)
            self.out.torn.add(run_id or "")
            return
        found = parts_of(value) if isinstance(value, dict) else {"(root)": ""}
        changed = part_differences(receipt.parts, found)
        for path, what in changed[:MAX_FIELDS_PER_RECORD]:
            self.diverge(
                run_id, path, f"{RAW_RUNS} {where}: {what} after the run (not what its receipt sealed)", attempt
            )
        if len(changed) > MAX_FIELDS_PER_RECORD:
            self.diverge(
                run_id, RAW_RUNS, f"{where}: {len(changed) - MAX_FIELDS_PER_RECORD} more fields differ", attempt
            )
        if not changed:
            self.diverge(
                run_id, RAW_RUNS, f"{where}: its bytes differ from the sealed record's, every value is equal", attempt
            )

    def _unsealed_line(
        self, i: int, raw: bytes, *, last_torn: bool, sealed: int, killed: bool, copy_of: int | None = None
    ) -> None:
        run_id = _run_id_of(raw)
        where = f"line {i + 1}"
        if copy_of is not None:  # a sealed record's line again: a duplicate, whatever the status
            self.diverge(
                run_id,
                RAW_RUNS,
                f"{where} repeats the record sealed as line {copy_of + 1}: a copy added after the run (not in the hash "
                f"chain; {sealed} sealed)",
            )
            return
        if self.running and (last_torn or killed):
            what = (
                "is torn (the run was killed while writing it, or this directory was copied while the run wrote it: "
                "then copy it again once the run is complete)"
                if last_torn
                else "has no receipt yet (the run was killed between writing it and its receipt; nothing can tell "
                "this line from an edit of it)"
            )
            self.out.notes.append(f"{RAW_RUNS} {where} ({run_id or 'unknown episode'}) {what}")
            return
        if self.running:
            self.diverge(
                run_id,
                RAW_RUNS,
                f"{where} has no receipt ({sealed} in {RAW_RUNS_RECEIPTS}): a kill leaves at most the last record "
                "without one, so its receipt was removed after the run stopped (or a machine crash lost it); "
                "restore the receipts as the run wrote them",
            )
            return
        if last_torn:
            self.diverge(run_id, RAW_RUNS, f"{where} is torn: cut short after {len(raw)} bytes (no receipt seals it)")
            self.out.torn.add(run_id or "")
            return
        self.diverge(run_id, RAW_RUNS, f"{where} is not in the hash chain (added after the run; {sealed} sealed)")

    # ---- every other file ---------------------------------------------------------------------------------

    def check_files(self, seal: Seal) -> None:
        actual = file_digests(self.directory.path, SEALED_APART)
        names = sorted(set(seal.files) | set(actual))
        if self.running:  # derived files are rebuilt after the opening manifest: only the snapshot is final
            names = [n for n in names if n.startswith(f"{TASKS_SNAPSHOT}/")]
            self.out.notes.append("the run is still running (or was killed): its derived files are not sealed yet")
        for name in names:
            sealed, found = seal.files.get(name), actual.get(name)
            if sealed == found:
                continue
            if found is None:
                self.diverge(None, name, "missing: the manifest sealed it")
            elif sealed is None:
                self.diverge(None, name, "not written by the run (the manifest's seal does not list it)")
            else:
                self.diverge(None, name, "edited after the run (its SHA-256 is not the one the manifest sealed)")


def _legacy_torn_tail(directory: RunDirectory, manifest: RunManifest, out: SealFindings) -> None:
    lines, torn = split_lines(directory.file(RAW_RUNS).read_bytes())
    if not lines:
        return
    last = lines[-1]
    if not torn:
        try:
            parse_json(last)
            return
        except ValueError:
            pass
    run_id = _run_id_of(last)
    what = f"line {len(lines)} is torn: cut short after {len(last)} bytes"
    if manifest.status is RunStatus.COMPLETE:
        out.divergences.append((run_id or manifest.run_group_id, RAW_RUNS, what, None))
        out.torn.add(run_id or "")
    else:
        out.notes.append(f"{RAW_RUNS} {what} (a killed writer; resume cuts it)")


def missing_seal_detail(directory: RunDirectory, manifest: RunManifest) -> str:
    """Why a run directory without a seal should have one, and what to do (the divergence's detail)."""
    if os.path.lexists(directory.file(RAW_RUNS_RECEIPTS)):
        why = f"it holds {RAW_RUNS_RECEIPTS}, which only a run that seals writes"
    else:
        version = manifest.environment.contextdelta
        since = ".".join(str(part) for part in SEALED_SINCE)
        why = f"it records contextdelta {version}, and every version since {since} seals each run directory"
    return (
        f"missing from {directory.file(MANIFEST)} ({why}): the seal was removed after the run, so edits to "
        f"{directory.path} cannot be ruled out; restore {MANIFEST} as the run wrote it (from a backup or a copy of "
        "the run directory), or run the benchmark again"
    )


READ_BY_VERIFY = (MANIFEST, RAW_RUNS, RAW_RUNS_RECEIPTS, TASKS_SNAPSHOT, *DERIVED_FILES)
"""The entries verify reads: one that is a link or a special file is refused, never followed or opened."""


def odd_entry_findings(directory: RunDirectory) -> tuple[list[tuple[str, str]], list[str]]:
    """What verify says about the entries of ``directory`` a run does not leave there (``odd_entries``): (name,
    detail) of each that stands where verify reads a file (refused: a malformed directory), and a note for each
    other one (leftover temp files, links, FIFOs, ...; not sealed, not read, so not a divergence by itself)."""
    refused: list[tuple[str, str]] = []
    notes: list[str] = []
    if not directory.path.is_dir():
        return refused, notes
    for name, what in odd_entries(directory.path):
        if name in READ_BY_VERIFY:
            refused.append(
                (
                    name,
                    f"is {what}, not the file the run wrote: verify never follows a link or opens a special file; "
                    "put the file the run wrote in its place",
                )
            )
        elif name.endswith(UNSEALED):
            notes.append(f"{name} is {what}: not sealed and not read; delete it")
        else:
            notes.append(
                f"{name} is {what}: not a file a run writes, so neither read nor sealed (verify never follows a "
                "link or opens a special file); remove it"
            )
    return refused, notes


def check_seal(directory: RunDirectory, manifest: RunManifest) -> SealFindings:
    """Everything the seal of ``manifest`` covers in ``directory`` (see the module docstring). An entry verify
    reads that is a link or a special file is named and never opened; when it is the manifest, ``raw_runs.jsonl``
    or its receipts, nothing else is checked."""
    refused, _ = odd_entry_findings(directory)
    named: list[tuple[str, str, str, int | None]] = [
        (manifest.run_group_id, name, detail, None) for name, detail in refused
    ]
    if any(name in SEALED_APART for name, _ in refused):
        return SealFindings(divergences=named)
    out = _check_seal(directory, manifest)
    out.divergences[:0] = named
    return out


def _check_seal(directory: RunDirectory, manifest: RunManifest) -> SealFindings:
    seal = manifest.seal
    if seal is None:
        if directory.seal_expected(manifest):
            out = SealFindings()
            out.divergences.append(
                (manifest.run_group_id, f"{MANIFEST} seal", missing_seal_detail(directory, manifest), None)
            )
        else:
            out = SealFindings(notes=[NO_CHAIN_NOTE], seal_expected=False)
        _legacy_torn_tail(directory, manifest, out)
        return out
    check = _SealCheck(directory, manifest)
    check.check_manifest(seal)
    receipts = check.read_chain(seal)
    check.check_lines(receipts)
    check.check_files(seal)
    return check.out
