"""The run directory's formats as data: JSON Schemas generated from the record models, and the reference part of
``docs/run-directory.md`` (every record's fields, every CSV column, every parquet table) generated from the same
models and column lists, so the documentation cannot drift from the code.

``make schemas`` (``python -m contextdelta.export.schemas``) writes both; ``tests/export/test_schemas.py`` fails
when the checked-in files differ from what the models give, naming that command.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from contextdelta.export._tables import TABLES
from contextdelta.report import AggregateMetrics
from contextdelta.rundir import (
    ATTEMPT_COLUMN,
    ATTEMPT_COLUMN_DOC,
    CONTROL_COLUMN,
    CONTROL_COLUMN_DOC,
    TASK_RESULT_COLUMN_DOCS,
    EpisodeRecord,
    RecordReceipt,
    RunManifest,
    ToolEventRecord,
)
from contextdelta.tasks import Task

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMAS_DIR = Path("docs") / "schemas"
RUN_DIRECTORY_DOC = Path("docs") / "run-directory.md"
BEGIN = "<!-- BEGIN GENERATED REFERENCE (make schemas) -->"
END = "<!-- END GENERATED REFERENCE -->"
REGENERATE = "make schemas"
"""The one command that regenerates the schemas and the reference (``python -m contextdelta.export.schemas``)."""


@dataclass(frozen=True)
class RecordFile:
    """A file of the run directory whose content is one record model."""

    path: str
    """Its path in the run directory."""
    model: type[BaseModel]
    schema: str
    """The schema's file name under ``docs/schemas/``."""
    layout: str
    """How the records are laid out in the file."""


RECORD_FILES: tuple[RecordFile, ...] = (
    RecordFile("run_manifest.json", RunManifest, "run-manifest.schema.json", "one JSON object"),
    RecordFile("raw_runs.jsonl", EpisodeRecord, "episode.schema.json", "one JSON object per line, one per episode"),
    RecordFile(
        "raw_runs.receipts.jsonl",
        RecordReceipt,
        "record-receipt.schema.json",
        "one JSON object per line, one per line of raw_runs.jsonl",
    ),
    RecordFile(
        "tool_events.jsonl", ToolEventRecord, "tool-event.schema.json", "one JSON object per line, one per tool call"
    ),
    RecordFile("aggregate_metrics.json", AggregateMetrics, "aggregate-metrics.schema.json", "one JSON object"),
    RecordFile("tasks/<world>/<task id>.yaml", Task, "task.schema.json", "one YAML document per task file"),
)
"""Every record file of a run directory, in the order the documentation lists them."""

DOCUMENTED_RECORDS: tuple[type[BaseModel], ...] = (
    RunManifest,
    EpisodeRecord,
    RecordReceipt,
    ToolEventRecord,
    AggregateMetrics,
)
"""The records whose every field (and every nested record's field) must carry a description (tested). Task files
are documented by the annotated example in docs/task-format.md."""


def json_schema(record: RecordFile) -> dict[str, Any]:
    """The JSON Schema of a record file: what its loader accepts (validation mode, so files written before a
    field existed validate too)."""
    schema = record.model.model_json_schema(mode="validation")
    return {"$schema": SCHEMA_DIALECT, "$id": record.schema, **schema}


def rendered_schemas() -> dict[str, str]:
    """Each schema file's name and exact text (sorted keys, two-space indent, one trailing newline)."""
    return {
        r.schema: json.dumps(json_schema(r), indent=2, sort_keys=True, ensure_ascii=False) + "\n" for r in RECORD_FILES
    }


# ---- the field reference ------------------------------------------------------------------------------------------


def _nested(annotation: Any) -> Iterator[type[BaseModel]]:
    stack = [annotation]
    while stack:
        current = stack.pop()
        if isinstance(current, type) and issubclass(current, BaseModel):
            yield current
        stack.extend(reversed(typing.get_args(current)))


def record_models(root: type[BaseModel]) -> list[type[BaseModel]]:
    """``root`` and every record model its fields hold, depth first in field order, each once."""
    found: list[type[BaseModel]] = []

    def visit(model: type[BaseModel]) -> None:
        if model in found:
            return
        found.append(model)
        for info in model.model_fields.values():
            for nested in _nested(info.annotation):
                visit(nested)

    visit(root)
    return found


def type_name(annotation: Any) -> str:
    """A field's type as a reader writes it: ``int | None``, ``list[StepRecord]``, ``dict[str, Price | None]``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(type_name(a) for a in args)}]" if args else name
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return " | ".join(f'"{m.value}"' for m in annotation)
    return getattr(annotation, "__name__", str(annotation))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _model_section(model: type[BaseModel]) -> list[str]:
    doc = (model.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    lines = [f"#### `{model.__name__}`", ""]
    if doc:
        lines += [doc, ""]
    lines += ["| field | type | description |", "|---|---|---|"]
    for name, info in model.model_fields.items():
        required = "" if info.is_required() else " (optional)"
        lines.append(
            f"| `{name}` | `{_cell(type_name(info.annotation))}`{required} | {_cell(info.description or '')} |"
        )
    return [*lines, ""]


def field_reference() -> str:
    """The generated part of ``docs/run-directory.md``: the CSV columns, each record file's models and fields, and
    the parquet tables of ``contextdelta export --format parquet``."""
    lines = [
        BEGIN,
        "",
        "### `task_results.csv` columns",
        "",
        "One row per episode, in run id order; booleans `true`/`false`, empty for N/A or unknown.",
        "",
        "| column | type | description |",
        "|---|---|---|",
        *(
            f"| `{c}` | {t} | {_cell(d)} |"
            for c, (t, d) in (
                *TASK_RESULT_COLUMN_DOCS.items(),
                (CONTROL_COLUMN, CONTROL_COLUMN_DOC),
                (ATTEMPT_COLUMN, ATTEMPT_COLUMN_DOC),
            )
        ),
        "",
    ]
    shown: set[type[BaseModel]] = set()
    for record in RECORD_FILES:
        lines += [
            f"### `{record.path}` records",
            "",
            f"{record.layout}; JSON Schema: [`schemas/{record.schema}`](schemas/{record.schema}).",
            "",
        ]
        for model in record_models(record.model):
            if model in shown:
                lines += [f"`{model.__name__}`: as above.", ""]
                continue
            shown.add(model)
            lines += _model_section(model)
    lines += ["### Parquet tables (`contextdelta export RUN_ID --format parquet`)", ""]
    for spec in TABLES:
        lines += [
            f"#### `{spec.name}.parquet`",
            "",
            spec.description,
            "",
            "| column | type | description |",
            "|---|---|---|",
            *(f"| `{c.name}` | `{c.type_name}` | {_cell(c.description)} |" for c in spec.columns),
            "",
        ]
    return "\n".join([*lines, END]) + "\n"


def render_doc(current: str) -> str:
    """``docs/run-directory.md`` with its generated part replaced (the hand-written parts kept)."""
    if BEGIN not in current or END not in current:
        raise ValueError(f"{RUN_DIRECTORY_DOC} lacks the markers {BEGIN!r} and {END!r}")
    head, rest = current.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + field_reference().rstrip("\n") + tail


def undocumented_fields() -> list[str]:
    """``Model.field`` of every field of `DOCUMENTED_RECORDS` (nested records included) without a description."""
    missing = []
    seen: set[type[BaseModel]] = set()
    for root in DOCUMENTED_RECORDS:
        for model in record_models(root):
            if model in seen:
                continue
            seen.add(model)
            missing += [f"{model.__name__}.{n}" for n, info in model.model_fields.items() if not info.description]
    return missing


def stale_files(root: Path) -> list[str]:
    """The generated files under ``root`` (a checkout) that differ from what the models give, or are missing."""
    stale = []
    folder = root / SCHEMAS_DIR
    wanted = rendered_schemas()
    for name, text in wanted.items():
        path = folder / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            stale.append(str(SCHEMAS_DIR / name))
    if folder.is_dir():
        stale += [str(SCHEMAS_DIR / p.name) for p in sorted(folder.glob("*.json")) if p.name not in wanted]
    doc = root / RUN_DIRECTORY_DOC
    try:
        current = doc.read_text(encoding="utf-8")
        if render_doc(current) != current:
            stale.append(str(RUN_DIRECTORY_DOC))
    except (OSError, ValueError):
        stale.append(str(RUN_DIRECTORY_DOC))
    return stale


def write_generated(root: Path) -> list[str]:
    """Write every schema and the reference part of the documentation under ``root``; returns what changed."""
    changed = stale_files(root)
    folder = root / SCHEMAS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    wanted = rendered_schemas()
    for name, text in wanted.items():
        (folder / name).write_text(text, encoding="utf-8")
    for path in folder.glob("*.json"):
        if path.name not in wanted:
            path.unlink()
    doc = root / RUN_DIRECTORY_DOC
    doc.write_text(render_doc(doc.read_text(encoding="utf-8")), encoding="utf-8")
    return changed
