"""``contextdelta export RUN_ID --format inspect|parquet --out PATH``: read a run directory, write another format.

Nothing in the run directory changes. An existing output is refused unless ``overwrite`` (nothing is lost by a
mistyped path), and an output in any run directory always (``overwrite`` there would replace a run's records); the
inspect log is written atomically, each parquet table too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

from contextdelta.canonical import has_lone_surrogate
from contextdelta.export._inspect import TASK_NAME, eval_log
from contextdelta.export._tables import TABLES, Column, table_rows
from contextdelta.rundir import (
    MANIFEST,
    TASKS_SNAPSHOT,
    EpisodeAttempts,
    EpisodeRecord,
    RunDirectory,
    RunDirectoryError,
    RunManifest,
    atomic_write_text,
)
from contextdelta.tasks import Task, load_directory


class ExportFormat(StrEnum):
    INSPECT = "inspect"
    """An inspect_ai evaluation log (JSON)."""
    PARQUET = "parquet"
    """A folder of parquet tables, one per record type."""


class ExportError(Exception):
    """An export that cannot be made; the message names the path or the missing package and how to fix it."""


INSPECT_LISTED = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}[:-]\d{2}[:-]\d{2}.*\.json$")
"""The names of the JSON logs inspect_ai lists (``inspect view --log-dir``, ``list_eval_logs``, ``evals_df``,
``samples_df``): an ISO timestamp first. A log under another name is read by ``read_eval_log`` alone."""


def inspect_file_name(manifest: RunManifest) -> str:
    """The name inspect_ai would give the run's log: ``{created}_{task}_{id}.json``, the creation time with ``-`` for
    ``:`` (``2026-01-01T12-00-00+00-00``), the task ``contextdelta``, the run group id (``_`` written ``-``, as the
    name's parts are split at ``_``)."""
    stamp = manifest.created_at.replace("Z", "+00:00").replace(":", "-")
    return f"{stamp}_{TASK_NAME}_{manifest.run_group_id.replace('_', '-')}.json"


def inspect_target(path: Path, out: Path) -> Path:
    """The file an inspect export of the run at ``path`` writes for ``--out``: in a folder, the name inspect_ai gives
    its logs (so ``inspect view --log-dir`` lists it); otherwise ``out``, which must end in ``.json``."""
    if out.is_dir():
        try:
            manifest = RunDirectory(path).read_manifest()
        except RunDirectoryError as exc:
            raise ExportError(f"malformed run directory: {exc}") from exc
        return out / inspect_file_name(manifest)
    if not out.suffix and not out.exists():
        raise ExportError(
            f"--out {out}: no such folder (and no .json name); create the folder to write the log there under the "
            "name inspect_ai gives its logs, or give a .json file"
        )
    if out.suffix.lower() != ".json":
        raise ExportError(
            f"--out {out}: an inspect export is a JSON log, so its name must end in .json (inspect_ai tells its log "
            "formats apart by the suffix: it reads a .eval file as a zip archive, and lists no other); give a .json "
            "file, or a folder to get the name inspect_ai gives its logs (`inspect log convert` makes a .eval of it)"
        )
    return out


PARQUET_MISSING = "--format parquet needs pyarrow: install the parquet extra (pip install 'contextdelta[parquet]')"


def _read(path: Path) -> tuple[RunManifest, EpisodeAttempts, dict[str, Task]]:
    directory = RunDirectory(path)
    try:
        manifest = directory.read_manifest()
        attempts = directory.read_attempts()
    except RunDirectoryError as exc:
        raise ExportError(f"malformed run directory: {exc}") from exc
    loaded, _ = load_directory(directory.file(TASKS_SNAPSHOT)) if directory.file(TASKS_SNAPSHOT).is_dir() else ([], [])
    return manifest, attempts, {t.task.id: t.task for t in loaded}


def _run_directory_holding(out: Path) -> Path | None:
    """The run directory that ``out`` is, or lies in (a folder with a ``run_manifest.json``), if any."""
    target = out.resolve()
    for folder in (target, *target.parents):
        if (folder / MANIFEST).is_file():
            return folder
    return None


def _refuse_run_directory(out: Path) -> None:
    holding = _run_directory_holding(out)
    if holding is not None:  # --overwrite there would replace a run's own records (raw_runs.jsonl, a manifest)
        raise ExportError(
            f"--out {out} is inside the run directory {holding}, which export never writes to; give a path outside "
            "every run directory"
        )


def _check_target(out: Path, overwrite: bool) -> None:
    _refuse_run_directory(out)
    if out.exists() and not overwrite:
        raise ExportError(f"--out {out} already exists; choose another path or pass --overwrite")
    if not out.parent.exists():
        raise ExportError(f"--out {out}: the folder {out.parent} does not exist")


def _lone_surrogate(where: str, manifest: RunManifest, output: str) -> ExportError:
    return ExportError(
        f"{where} of run {manifest.run_group_id} holds a lone UTF-16 surrogate (a \\uD800-\\uDFFF escape without "
        f"its pair), which {output} cannot hold; the runner writes none, so raw_runs.jsonl was edited or damaged "
        f"after its run (`contextdelta verify {manifest.run_group_id}` names the change)"
    )


def write_inspect(
    out: Path,
    manifest: RunManifest,
    records: list[EpisodeRecord],
    tasks: dict[str, Task],
    superseded: Sequence[EpisodeRecord] = (),
) -> Path:
    """The run as one inspect_ai JSON log at ``out`` (the ``superseded`` attempts listed in their samples)."""
    log = eval_log(manifest, records, tasks, superseded=superseded)
    if has_lone_surrogate(log):  # UTF-8 cannot encode it, and inspect_ai refuses the \uD800 escape
        where = next(
            (str(sample.get("id")) for sample in log.get("samples", []) if has_lone_surrogate(sample)), "the header"
        )
        raise _lone_surrogate(f"sample {where}", manifest, "an inspect log")
    atomic_write_text(out, json.dumps(log, indent=2, ensure_ascii=False) + "\n")
    return out


def _arrow_type(column: Column) -> Any:
    import pyarrow as pa

    return {"string": pa.string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(), None: pa.string()}[
        column.type
    ]


def write_parquet(
    out: Path, manifest: RunManifest, records: list[EpisodeRecord], superseded: Sequence[EpisodeRecord] = ()
) -> list[Path]:
    """One ``<table>.parquet`` per `TABLES` entry in the folder ``out`` (created) from the current ``records`` and
    the ``superseded`` attempts; each column carries its description in the field metadata."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ExportError(PARQUET_MISSING) from exc
    tables = [(spec, table_rows(spec, manifest, superseded if spec.superseded else records)) for spec in TABLES]
    for spec, rows in tables:  # before anything is written: UTF-8 cannot encode a lone surrogate
        damaged = next((row for row in rows if has_lone_surrogate(row)), None)
        if damaged is not None:
            raise _lone_surrogate(f"a row of table {spec.name} (episode {damaged.get('run_id')})", manifest, "parquet")
    out.mkdir(exist_ok=True)
    written = []
    for spec, rows in tables:
        schema = pa.schema(
            [pa.field(c.name, _arrow_type(c), metadata={"description": c.description}) for c in spec.columns],
            metadata={"table": spec.name, "description": spec.description, "run_group_id": manifest.run_group_id},
        )
        table = pa.Table.from_pylist(rows, schema=schema)
        target = out / f"{spec.name}.parquet"
        partial = out / f".{spec.name}.parquet.tmp"
        pq.write_table(table, partial)
        partial.replace(target)
        written.append(target)
    return written


def export_run(path: Path, fmt: ExportFormat | str, out: Path, *, overwrite: bool = False) -> list[Path]:
    """Export the run directory at ``path`` as ``fmt`` to ``out``; returns the files written. An inspect export to
    a folder writes the file `inspect_file_name` names there.

    Raises:
        ExportError: a malformed run directory, an existing output without ``overwrite``, or pyarrow missing.
    """
    fmt = ExportFormat(fmt)
    if fmt is ExportFormat.INSPECT:
        _refuse_run_directory(out)  # before its name is checked: the refusal that matters
        out = inspect_target(path, out)
    _check_target(out, overwrite)
    if fmt is ExportFormat.PARQUET and out.exists() and not out.is_dir():
        raise ExportError(f"--out {out} is a file; --format parquet writes a folder of tables")
    manifest, attempts, tasks = _read(path)
    if fmt is ExportFormat.INSPECT:
        return [write_inspect(out, manifest, list(attempts.current), tasks, attempts.superseded)]
    return write_parquet(out, manifest, list(attempts.current), attempts.superseded)
