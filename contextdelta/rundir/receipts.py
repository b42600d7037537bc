"""Receipts: the hash chain over ``raw_runs.jsonl`` and the seal of everything else in a run directory.

What ``verify`` cannot re-derive (timestamps, usage, latencies, the model's replies, ...) it can only compare with
what was recorded at the time. So every record gets a receipt the moment it is appended, and every manifest write
seals the rest:

- ``raw_runs.receipts.jsonl``: one :class:`RecordReceipt` per line of ``raw_runs.jsonl``, in file order (a line is
  never rewritten; an episode may own several lines, e.g. a retried attempt). It holds the SHA-256 of the line's
  bytes, a short digest of each *part* of the record (:func:`parts_of`: every value by JSON path, down to a fixed
  depth), and a chain value over the previous receipt's, so the receipts are one hash chain.
- ``run_manifest.json`` ``seal`` (:func:`seal_directory`): the chain's line count and head, the SHA-256 of the
  manifest without its seal and the digests of its parts, and the SHA-256 of every other file (derived files, the
  task snapshot).

A changed byte therefore shows as a line whose SHA-256 is not its receipt's, and the part digests say which field
changed (``trace.steps[3].response.latency_s``, ``started_at``). There is no secret key: this is tamper-evidence
against edits, not proof against a forger who recomputes every digest (docs/decisions.md says why).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from contextdelta.canonical import canonical_json, content_hash, sha256_hex
from contextdelta.rundir._parts import PART_DIGEST_CHARS, parts_of
from contextdelta.rundir.io import atomic_write_text, parse_json
from contextdelta.rundir.records import EpisodeRecord, RecordReceipt, RecordsSeal, Seal

RECEIPTS = "raw_runs.receipts.jsonl"
SEAL_VERSION = 1
UNSEALED = (".tmp",)
"""File name endings a seal leaves out: temp files of an atomic write killed half way."""
SEALED_SINCE = (0, 2, 0)
"""The first contextdelta version that writes a seal into every run directory it writes (receipts: CHANGELOG
0.2.0); a run that records this version or a later one and has no seal had it removed."""


def version_writes_seal(version: str) -> bool:
    """Whether contextdelta ``version`` (as a manifest's ``environment.contextdelta`` records it) seals every run
    directory: 0.2.0 and later. A string that is not a version is not one an earlier release wrote: True."""
    found = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version.strip())
    if found is None:
        return True
    return tuple(int(part or 0) for part in found.groups()) >= SEALED_SINCE


def chain_start(run_group_id: str) -> str:
    """The chain value before the first receipt: bound to the run group, so receipts cannot move between runs."""
    return sha256_hex(f"contextdelta receipts v{SEAL_VERSION}\n{run_group_id}")


def chain_next(previous: str, receipt: RecordReceipt) -> str:
    """The chain value after ``receipt``: over the previous value and every other field of the receipt."""
    return sha256_hex(f"{previous}\n{canonical_json(receipt.model_dump(mode='json', exclude={'chain'}))}")


def receipt_for(line_text: str | bytes, line: int, previous: str) -> RecordReceipt:
    """The receipt of one ``raw_runs.jsonl`` line (its text or bytes without the newline) at ``line``, chained to
    ``previous``. A line that is not a JSON object still gets one (its parts are then the whole line)."""
    data = line_text.encode("utf-8") if isinstance(line_text, str) else line_text
    try:
        value: Any = parse_json(data)
    except ValueError:
        value = None
    digest = sha256_hex(data)
    parts = parts_of(value) if isinstance(value, dict) else {"(root)": digest[:PART_DIGEST_CHARS]}
    if not isinstance(value, dict):
        value = {}
    return _receipt(line, value.get("run_id"), value.get("attempt"), digest, parts, previous)


def record_receipt(record: EpisodeRecord, line: int, previous: str) -> RecordReceipt:
    """The receipt of ``record``'s line (:meth:`EpisodeRecord.canonical_text`), from the parts found while that
    line was written: the same receipt as :func:`receipt_for` of the line, without reading it back."""
    text = record.canonical_text()
    return _receipt(line, record.run_id, record.attempt, sha256_hex(text), record.part_digests(), previous)


def _receipt(line: int, run_id: Any, attempt: Any, digest: str, parts: dict[str, str], previous: str) -> RecordReceipt:
    receipt = RecordReceipt(
        line=line,
        run_id=run_id if isinstance(run_id, str) else None,
        attempt=attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else None,
        sha256=digest,
        parts=parts,
        chain="",
    )
    receipt.chain = chain_next(previous, receipt)
    return receipt


def receipt_line(receipt: RecordReceipt) -> str:
    """A receipt as its line of ``raw_runs.receipts.jsonl`` (canonical JSON, without the newline)."""
    return canonical_json(receipt.model_dump(mode="json"))


class ChainState:
    """The end of a chain: how many receipts, and the last chain value."""

    def __init__(self, lines: int, head: str) -> None:
        self.lines = lines
        self.head = head

    def seal(self) -> RecordsSeal:
        return RecordsSeal(lines=self.lines, head=self.head)


class ReceiptsError(ValueError):
    """A receipts file damaged somewhere other than a torn last line; the message names the line."""


def read_receipts(path: Path) -> list[RecordReceipt]:
    """Every receipt of ``path`` in order; a torn or unreadable last line (a killed writer) is left out. Raises
    :class:`ReceiptsError` for any other line that is not a receipt of its own line number."""
    if not path.is_file():
        return []
    lines, torn = split_lines(path.read_bytes())
    receipts: list[RecordReceipt] = []
    for number, raw in enumerate(lines, start=1):
        last = number == len(lines)
        if last and torn:
            break
        try:
            receipt = RecordReceipt.model_validate_json(raw)
        except ValueError:
            if last:
                break
            raise ReceiptsError(f"{path}: line {number} is not a receipt") from None
        if receipt.line != number:
            raise ReceiptsError(f"{path}: line {number} holds the receipt of line {receipt.line}")
        receipts.append(receipt)
    return receipts


def chain_state(path: Path, run_group_id: str) -> ChainState:
    """Where the receipts file at ``path`` ends (no file, or no receipt: the chain's start)."""
    receipts = read_receipts(path)
    if not receipts:
        return ChainState(0, chain_start(run_group_id))
    return ChainState(len(receipts), receipts[-1].chain)


def split_lines(data: bytes) -> tuple[list[bytes], bool]:
    """The lines of a JSONL file's bytes (without newlines) and whether the last one lacks its newline (torn)."""
    if not data:
        return [], False
    lines = data.split(b"\n")
    if lines[-1] == b"":
        return lines[:-1], False
    return lines, True


def complete_lines(path: Path) -> list[bytes]:
    """The complete lines of a JSONL file (a torn last line, without its newline, left out)."""
    if not path.is_file():
        return []
    lines, torn = split_lines(path.read_bytes())
    return lines[:-1] if torn else lines


def lines_unlike_receipts(raw_runs: Path, receipts: Path) -> list[int]:
    """The numbers of the complete lines of ``raw_runs`` whose bytes are not those their receipt sealed. A line is
    written before its receipt, so no kill leaves a receipted line different from its receipt: such a line was
    edited (or removed, moving the lines after it) since it was written. Raises :class:`ReceiptsError` for a
    receipts file damaged other than at its end."""
    lines = complete_lines(raw_runs)
    return [
        r.line for r in read_receipts(receipts) if r.line <= len(lines) and sha256_hex(lines[r.line - 1]) != r.sha256
    ]


def reconcile_receipts(raw_runs: Path, receipts: Path, run_group_id: str) -> tuple[int, int]:
    """Bring ``receipts`` in line with ``raw_runs`` after a killed session: drop a torn or unreadable tail and any
    receipt past the last complete line, then add receipts for complete lines that lack one (a kill between the
    two appends). Returns how many receipt lines were dropped and how many receipts were added. Receipts already
    written are never changed; a receipts file damaged elsewhere raises :class:`ReceiptsError` (re-deriving it
    would seal whatever the lines now hold)."""
    lines = complete_lines(raw_runs)
    found = len(split_lines(receipts.read_bytes())[0]) if receipts.is_file() else 0
    kept = read_receipts(receipts)[: len(lines)]
    text = "".join(receipt_line(r) + "\n" for r in kept)
    state = kept[-1].chain if kept else chain_start(run_group_id)
    added: list[str] = []
    for number in range(len(kept) + 1, len(lines) + 1):
        receipt = receipt_for(lines[number - 1], number, state)
        state = receipt.chain
        added.append(receipt_line(receipt) + "\n")
    current = receipts.read_bytes() if receipts.is_file() else None
    wanted = text + "".join(added)
    if current != wanted.encode("utf-8"):
        atomic_write_text(receipts, wanted)
    return found - len(kept), len(added)


def file_kind(mode: int) -> str:
    """What a ``stat`` mode is, in words (for a message that names an entry that is not a plain file)."""
    kinds = (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    return next((what for test, what in kinds if test(mode)), "a special file")


def odd_entries(root: Path) -> list[tuple[str, str]]:
    """(path relative to ``root``, what it is) of every entry below ``root`` that a run does not leave there: a
    temp file of an atomic write killed half way, a symbolic link (never followed: a folder it names is not
    walked), a FIFO, socket or device (never opened: opening a FIFO waits for a writer). Sorted by path."""
    found: list[tuple[str, str]] = []

    def walk(folder: Path, prefix: str) -> None:
        with os.scandir(folder) as entries:
            for entry in entries:
                name = f"{prefix}{entry.name}"
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISLNK(mode):
                    found.append((name, f"a symbolic link to {os.readlink(entry.path)}"))
                elif stat.S_ISDIR(mode):
                    walk(Path(entry.path), f"{name}/")
                elif not stat.S_ISREG(mode):
                    found.append((name, file_kind(mode)))
                elif entry.name.endswith(UNSEALED):
                    found.append((name, "a temp file left by a write that was killed half way"))

    walk(root, "")
    return sorted(found)


def sealed_files(root: Path, skip: Iterable[str]) -> Iterator[tuple[str, Path]]:
    """(path relative to ``root``, path) of every regular file a seal covers, sorted; ``skip`` names files sealed
    otherwise (the manifest, raw_runs.jsonl and its receipts). A symbolic link is never followed (nor sealed), a
    FIFO or other special file never opened."""
    left_out = set(skip)
    found = []
    for path in root.rglob("*"):
        name = path.relative_to(root).as_posix()
        if name in left_out or path.name.endswith(UNSEALED) or path.is_symlink() or not path.is_file():
            continue
        found.append((name, path))
    yield from sorted(found)


def part_differences(sealed: Mapping[str, str], found: Mapping[str, str]) -> list[tuple[str, str]]:
    """(path, ``edited``/``removed``/``added``) of every part whose digest differs, in path order."""
    out = []
    for path in sorted(set(sealed) | set(found)):
        if path not in found:
            out.append((path, "removed"))
        elif path not in sealed:
            out.append((path, "added"))
        elif sealed[path] != found[path]:
            out.append((path, "edited"))
    return out


def manifest_edits(value: Mapping[str, Any]) -> list[str]:
    """The paths of a manifest's JSON value that differ from what its seal digested (none without a seal)."""
    seal = value.get("seal")
    if not isinstance(seal, dict) or not isinstance(seal.get("manifest_parts"), dict):
        return []
    parts = seal["manifest_parts"]
    body = {k: v for k, v in value.items() if k != "seal"}
    changed = [path for path, _ in part_differences(parts, parts_of(body))]
    if not changed and content_hash(body) != seal.get("manifest_sha256"):
        changed = ["seal.manifest_sha256"]
    return changed


def file_digests(root: Path, skip: Iterable[str]) -> dict[str, str]:
    """SHA-256 of the bytes of every file :func:`sealed_files` lists, by relative path."""
    return {name: sha256_hex(path.read_bytes()) for name, path in sealed_files(root, skip)}


def seal_directory(root: Path, manifest: Mapping[str, Any], chain: ChainState, skip: Iterable[str]) -> Seal:
    """The seal of a run directory: ``manifest`` is the manifest's JSON value (its seal, if any, is left out)."""
    value = {k: v for k, v in manifest.items() if k != "seal"}
    seal = Seal(
        version=SEAL_VERSION,
        records=chain.seal(),
        manifest_sha256=content_hash(value),
        manifest_parts=parts_of(value),
        files=file_digests(root, skip),
    )
    return seal.model_copy(update={"sha256": seal_sha256(seal.model_dump(mode="json"))})


def seal_sha256(seal: Mapping[str, Any]) -> str:
    """A seal's own digest: the SHA-256 of its canonical JSON without ``sha256``."""
    return content_hash({k: v for k, v in seal.items() if k != "sha256"})
