"""Interchange: a finished run directory in the formats other tools read, and the run directory's own formats as
data. Exporters are readers of a run directory, like ``report`` and ``verify``:

    export_run(path, "inspect", out)     # an inspect_ai evaluation log (JSON), for ``inspect view``
    export_run(path, "parquet", out)     # one parquet table per record type (pyarrow: the ``parquet`` extra)
    TABLES                               # those tables' columns (documented in docs/run-directory.md)
    write_generated(root)                # docs/schemas/*.schema.json and the reference part of the docs
"""

from contextdelta.export._export import INSPECT_LISTED, ExportError, ExportFormat, export_run, inspect_file_name
from contextdelta.export._inspect import eval_log, eval_sample
from contextdelta.export._schemas import (
    RECORD_FILES,
    REGENERATE,
    RecordFile,
    field_reference,
    json_schema,
    rendered_schemas,
    stale_files,
    undocumented_fields,
    write_generated,
)
from contextdelta.export._tables import TABLES, Column, TableSpec, table_rows

__all__ = [
    "INSPECT_LISTED",
    "RECORD_FILES",
    "REGENERATE",
    "TABLES",
    "Column",
    "ExportError",
    "ExportFormat",
    "RecordFile",
    "TableSpec",
    "eval_log",
    "eval_sample",
    "export_run",
    "field_reference",
    "inspect_file_name",
    "json_schema",
    "rendered_schemas",
    "stale_files",
    "table_rows",
    "undocumented_fields",
    "write_generated",
]
