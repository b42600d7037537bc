"""The run directory's formats as checked-in files: JSON Schemas (docs/schemas/) and the reference part of
docs/run-directory.md are what the record models give (else: run `make schemas`), every record field carries a
description, real run directories validate against the schemas, and the documentation names every file a run
directory holds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest

from contextdelta.export import RECORD_FILES, REGENERATE, rendered_schemas, stale_files, undocumented_fields
from contextdelta.export._schemas import RUN_DIRECTORY_DOC, SCHEMAS_DIR
from contextdelta.report import METRICS_SCHEMA_VERSION
from contextdelta.rundir import AGGREGATE_METRICS, MANIFEST, RAW_RUNS, TOOL_EVENTS
from tests.report import runs

ROOT = Path(__file__).resolve().parents[2]
OLD_RUNS = [
    ROOT / "tests" / "verify" / "fixtures" / "20261201T104738Z-6ea5de",
    ROOT / "tests" / "verify" / "fixtures" / "20261201T084019Z-5ad6dd",
]


def test_the_checked_in_schemas_and_reference_are_what_the_models_give() -> None:
    stale = stale_files(ROOT)
    assert not stale, f"stale generated files {stale}: run `{REGENERATE}` and commit the result"


def test_every_record_field_is_documented() -> None:
    missing = undocumented_fields()
    assert not missing, f"add Field(description=...) to {missing}, then run `{REGENERATE}`"


def test_a_changed_model_makes_the_files_stale(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    shutil.copytree(ROOT / SCHEMAS_DIR, tmp_path / SCHEMAS_DIR)
    shutil.copyfile(ROOT / RUN_DIRECTORY_DOC, tmp_path / RUN_DIRECTORY_DOC)
    assert stale_files(tmp_path) == []
    name = RECORD_FILES[0].schema
    schema = json.loads((tmp_path / SCHEMAS_DIR / name).read_text())
    schema["properties"].pop("prices")
    (tmp_path / SCHEMAS_DIR / name).write_text(json.dumps(schema))
    doc = (tmp_path / RUN_DIRECTORY_DOC).read_text()
    (tmp_path / RUN_DIRECTORY_DOC).write_text(doc.replace("| `prices` |", "| `price` |"))
    (tmp_path / SCHEMAS_DIR / "left-over.schema.json").write_text("{}")
    assert stale_files(tmp_path) == [
        str(SCHEMAS_DIR / name),
        str(SCHEMAS_DIR / "left-over.schema.json"),
        str(RUN_DIRECTORY_DOC),
    ]


def _validate(schema_name: str, value: object) -> None:
    schema = json.loads(rendered_schemas()[schema_name])
    jsonschema.validate(value, schema, cls=jsonschema.Draft202012Validator)


@pytest.mark.slow
@pytest.mark.parametrize("path", [runs.cached_run, runs.unsafe_run, *[(lambda p=p: p) for p in OLD_RUNS]])
def test_run_directories_validate_against_the_schemas(path: object) -> None:
    folder: Path = path()  # type: ignore[operator]
    _validate("run-manifest.schema.json", json.loads((folder / MANIFEST).read_text()))
    metrics = json.loads((folder / AGGREGATE_METRICS).read_text())
    if (
        metrics["schema_version"] == METRICS_SCHEMA_VERSION
    ):  # an older metrics schema is another format (verify notes it)
        _validate("aggregate-metrics.schema.json", metrics)
    for line in (folder / RAW_RUNS).read_text().splitlines()[:5]:
        _validate("episode.schema.json", json.loads(line))
    if (folder / TOOL_EVENTS).exists():
        for line in (folder / TOOL_EVENTS).read_text().splitlines()[:20]:
            _validate("tool-event.schema.json", json.loads(line))


def test_a_schema_refuses_what_the_loader_refuses() -> None:
    manifest = json.loads((runs.cached_run() / MANIFEST).read_text())
    manifest["status"] = "finished"
    with pytest.raises(jsonschema.ValidationError, match="finished"):
        _validate("run-manifest.schema.json", manifest)


def test_the_documentation_names_every_file_of_a_run_directory() -> None:
    doc = (ROOT / RUN_DIRECTORY_DOC).read_text()
    files = sorted(p.name for p in runs.cached_run().iterdir())
    assert "tasks" in files
    for name in files:
        shown = "`tasks/<world>/<id>.yaml`" if name == "tasks" else f"`{name}`"
        assert f"| {shown} |" in doc, name
    for record in RECORD_FILES:
        assert f"(schemas/{record.schema})" in doc
