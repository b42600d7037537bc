"""Tampering, generated: every kind of field of every record type of a real run directory is edited (and every key
deleted) in turn, and verify must name the record and the field each time; the untouched directory verifies MATCH.

The edits are derived from the files themselves, so a field added to a record is covered without touching this
test: each leaf of each ``raw_runs.jsonl`` record (step messages, responses, usage, tool results, verdicts,
timestamps...), of ``run_manifest.json`` and of ``raw_runs.receipts.jsonl`` is changed to another value of its type
(a value seen elsewhere at the same place when that is what keeps the record valid: an enum); one leaf per kind
of path (list indices folded), the first in file order. An edit of a record must give exit 1 with a divergence
naming the record and the field (the part of the path the seal resolves), whether or not it keeps the record valid
(one that breaks the record's schema names its line too); a manifest edit that breaks its schema is a malformed
directory (exit 2) and the message names the field. Every derived
file and every file of the task snapshot is edited by one byte.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError
from typer.testing import CliRunner

from contextdelta.canonical import canonical_json
from contextdelta.cli import app
from contextdelta.rundir import (
    DERIVED_FILES,
    MANIFEST,
    RAW_RUNS,
    RAW_RUNS_RECEIPTS,
    EpisodeRecord,
    RecordReceipt,
    RunManifest,
    Seal,
)
from contextdelta.runner import BenchmarkRequest, run_benchmark
from contextdelta.testing import serve_scripted
from contextdelta.verify import Divergence, VerifyError, verify_run
from tests.report import runs

TASKS = Path(__file__).resolve().parents[2] / "tasks"
Path_ = tuple[str | int, ...]


@pytest.fixture(scope="module")
def sealed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """unsafe on one calendar task under full_history, last_n and semantic_summary (which calls the summary model
    from step 3), unprotected, with every 25th request refused as too long: successes, failures and a failed trial."""
    results = tmp_path_factory.mktemp("tamper")
    with serve_scripted("unsafe", TASKS, in_process=True, fail_context_length="every:25") as url:
        outcome = run_benchmark(
            BenchmarkRequest(
                tasks_dir=TASKS,
                base_url=url,
                model="scripted-unsafe",
                results_dir=results,
                task_ids=["cal-onsite-loop"],
                strategies=["full_history", "last_n", "semantic_summary"],
                protection_modes=["unprotected"],
                repeats=1,
                concurrency=1,
                summary_trigger=1,
                summary_keep=1,
            )
        )
    records = outcome.records
    assert {r.trace.termination.value for r in records} >= {"final_answer", "context_window_exceeded"}
    assert any(s.context.summary_calls for r in records for s in r.trace.steps)
    return outcome.path


@pytest.fixture
def run(sealed_run: Path, tmp_path: Path) -> Path:
    return runs.copy_run(sealed_run, tmp_path)


# ---- generating the edits --------------------------------------------------------------------------------------


Kind = tuple[str, ...]
"""A path as a kind of field: list indices, and keys of free-form maps (resource ids, argument names), folded."""


class Schema:
    """A record model's JSON schema, walked alongside a document: which keys are fields and which are data."""

    def __init__(self, model: type[BaseModel]) -> None:
        self.root = model.model_json_schema()
        self.defs = self.root.get("$defs", {})

    def resolve(self, node: dict[str, Any], value: Any) -> dict[str, Any]:
        """``node`` with references followed and the ``anyOf`` alternative that fits ``value`` chosen."""
        while True:
            if "$ref" in node:
                node = self.defs[node["$ref"].rsplit("/", 1)[-1]]
            elif "anyOf" in node:
                node = next((a for a in node["anyOf"] if self._fits(a, value)), {})
            else:
                return node

    def _fits(self, node: dict[str, Any], value: Any) -> bool:
        node = self.resolve(node, value) if "$ref" in node else node
        shape = node.get("type")
        if isinstance(value, dict):
            return shape == "object" or "properties" in node
        if isinstance(value, list):
            return shape == "array"
        return shape not in ("object", "array")

    def child(self, node: dict[str, Any], value: Any, key: str | int) -> tuple[str, dict[str, Any]]:
        """(the key as a kind, the schema of ``value[key]``)."""
        node = self.resolve(node, value)
        if isinstance(key, int):
            items = node.get("items", {})
            return "[]", items if isinstance(items, dict) else {}
        properties = node.get("properties")
        if properties is not None and key in properties:
            return key, properties[key]
        extra = node.get("additionalProperties", {})
        return "*", extra if isinstance(extra, dict) else {}


def leaves(value: Any, schema: Schema) -> Iterator[tuple[Path_, Kind, Any]]:
    """(path, kind, value) of every scalar and empty container, depth first."""

    def walk(node: Any, at: dict[str, Any], path: Path_, kinds: Kind) -> Iterator[tuple[Path_, Kind, Any]]:
        if isinstance(node, dict | list) and node:
            for key in sorted(node) if isinstance(node, dict) else range(len(node)):
                name, below = schema.child(at, node, key)
                yield from walk(node[key], below, (*path, key), (*kinds, name))
        else:
            yield path, kinds, node

    yield from walk(value, schema.root, (), ())


def keys(value: Any, schema: Schema) -> Iterator[tuple[Path_, Kind]]:
    """(path, kind) of every object key that names a field (keys of free-form maps are data)."""

    def walk(node: Any, at: dict[str, Any], path: Path_, kinds: Kind) -> Iterator[tuple[Path_, Kind]]:
        if isinstance(node, dict | list):
            for key in sorted(node) if isinstance(node, dict) else range(len(node)):
                name, below = schema.child(at, node, key)
                if isinstance(key, str) and name != "*":
                    yield (*path, key), (*kinds, name)
                yield from walk(node[key], below, (*path, key), (*kinds, name))

    yield from walk(value, schema.root, (), ())


def json_path(path: Path_) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z0-9_-]+", part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part, ensure_ascii=False)}]"
    return out


def get(value: Any, path: Path_) -> Any:
    for part in path:
        value = value[part]
    return value


def put(value: Any, path: Path_, new: Any) -> None:
    get(value, path[:-1])[path[-1]] = new


def delete(value: Any, path: Path_) -> None:
    del get(value, path[:-1])[path[-1]]


def seen_at(documents: list[Any], schema: Schema) -> dict[Kind, list[Any]]:
    """Every value found at each kind of path across ``documents`` (what an enum field may hold instead)."""
    found: dict[Kind, list[Any]] = {}
    for document in documents:
        for _, at, value in leaves(document, schema):
            bucket = found.setdefault(at, [])
            if value not in bucket:
                bucket.append(value)
    return found


def candidates(value: Any, others: list[Any]) -> list[Any]:
    """Other values of the leaf's type, the plainest first, then those seen at the same kind of path."""
    if isinstance(value, bool):
        plain: list[Any] = [not value]
    elif isinstance(value, int):
        plain = [value + 1, value - 1]
    elif isinstance(value, float):
        plain = [value + 1.5, value / 2]
    elif isinstance(value, str):
        plain = [value + "x", "x"]
    elif value is None:
        plain = []
    else:  # an empty list or object
        plain = [[0], [""], {"x": 1}]
    rest = [v for v in others if v != value or type(v) is not type(value)]
    tail = ["x", 1, 1.5, True] if value is None else []
    return [v for v in [*plain, *rest, *tail] if not (v == value and type(v) is type(value))]


def valid(model: type[BaseModel], document: Any) -> bool:
    try:
        model.model_validate(document)
    except ValidationError:
        return False
    return True


Edit = tuple[str, Path_, Callable[[Any], None]]
"""(description, path, the edit applied to a copy of the document)."""


def edits_of(
    documents: list[Any], model: type[BaseModel], *, deletions: bool = True
) -> Iterator[tuple[int, Edit, bool]]:
    """(document index, edit, whether the edited document still validates) for one leaf of each kind of field,
    and one deletion of each kind of field the model lets go (a required one is only a malformed file), the first
    in document order."""
    schema = Schema(model)
    everything = seen_at(documents, schema)
    done: set[Kind] = set()
    for index, document in enumerate(documents):
        for path, at, value in leaves(document, schema):
            if at in done:
                continue
            done.add(at)
            choices = candidates(value, everything.get(at, []))
            chosen, ok = None, False
            for choice in choices:
                trial = json.loads(json.dumps(document))
                put(trial, path, choice)
                if valid(model, trial):
                    chosen, ok = choice, True
                    break
            if not ok:
                chosen = choices[0] if choices else "x"
            yield index, (f"set {json_path(path)} to {chosen!r}", path, _setter(path, chosen)), ok
    if not deletions:
        return
    deleted: set[Kind] = set()
    for index, document in enumerate(documents):
        for path, at in keys(document, schema):
            if at in deleted:
                continue
            deleted.add(at)
            trial = json.loads(json.dumps(document))
            delete(trial, path)
            if valid(model, trial):
                yield index, (f"delete {json_path(path)}", path, _deleter(path)), True


def _setter(path: Path_, value: Any) -> Callable[[Any], None]:
    return lambda document: put(document, path, value)


def _deleter(path: Path_) -> Callable[[Any], None]:
    return lambda document: delete(document, path)


def named(found: list[Divergence], run_id: str | None, field: str) -> bool:
    """A divergence of ``run_id`` (None: of any) whose field is ``field`` or the part of it the seal resolves (a
    prefix that ends where a path component does)."""
    for divergence in found:
        if run_id is not None and divergence.run_id != run_id:
            continue
        name = divergence.field
        if field == name or field.startswith((name + ".", name + "[")) or name.startswith((field + ".", field + "[")):
            return True
    return False


def outcome(path: Path) -> tuple[int, list[Divergence], str]:
    try:
        result = verify_run(path)
    except VerifyError as exc:
        return 2, [], str(exc)
    return (0 if result.ok else 1), result.divergences, ""


# ---- the tests -------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_untouched_run_verifies_match(sealed_run: Path) -> None:
    result = CliRunner().invoke(app, ["verify", str(sealed_run)])
    assert (result.exit_code, result.stdout) == (0, "MATCH\n")
    assert "no hash chain" not in result.stderr


def _lines(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow  # about 300 edits, each verified
def test_every_kind_of_record_field_edited_is_named_with_its_record_and_field(run: Path) -> None:
    raw = run / RAW_RUNS
    original = raw.read_bytes()
    records = _lines(raw)
    checked = 0
    for index, (what, path, edit), still_valid in edits_of(records, EpisodeRecord):
        edited = json.loads(json.dumps(records[index]))
        edit(edited)
        lines = original.decode("utf-8").splitlines()
        lines[index] = canonical_json(edited)
        raw.write_text("\n".join(lines) + "\n", encoding="utf-8")
        code, found, message = outcome(run)
        run_id = records[index]["run_id"]
        where = f"{run_id} ({RAW_RUNS} line {index + 1}): {what}"
        # valid or not, an edit of a sealed record is named by its receipt: exit 1, the record and the field
        assert code == 1, (where, message)
        assert named(found, run_id, json_path(path)), (where, [d.render() for d in found][:8])
        if not still_valid:
            assert any(f"{RAW_RUNS} line {index + 1}: " in d.detail for d in found), (where, found[:4])
        checked += 1
        raw.write_bytes(original)
    assert checked > 150  # steps, responses, usage, summary calls, tool calls and events, verdict, totals, ...
    assert outcome(run)[0] == 0


@pytest.mark.slow  # about 120 edits, each verified
def test_every_kind_of_manifest_field_edited_is_named(run: Path) -> None:
    file = run / MANIFEST
    original = file.read_bytes()
    manifest = json.loads(original)
    checked = 0
    for _, (what, path, edit), still_valid in edits_of([manifest], RunManifest):
        if path[0] == "seal":
            continue  # the seal's own fields: the next test
        edited = json.loads(original)
        edit(edited)
        file.write_text(json.dumps(edited, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
        code, found, message = outcome(run)
        if still_valid:
            assert code == 1, what
            # (an edited run_group_id renames the run group itself: any divergence's run id will do)
            assert named(found, None, f"{MANIFEST} {json_path(path)}"), (what, [d.render() for d in found][:8])
        else:
            assert code == 2 and "run_manifest.json" in message, (what, message)
        checked += 1
        file.write_bytes(original)
    assert checked > 60


@pytest.mark.slow
def test_every_kind_of_seal_and_receipt_field_edited_is_named(run: Path) -> None:
    file = run / MANIFEST
    original = file.read_bytes()
    manifest = json.loads(original)
    for _, (what, _, edit), still_valid in edits_of([manifest["seal"]], Seal):
        edited = json.loads(original)
        edit(edited["seal"])
        file.write_text(json.dumps(edited, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
        code, found, message = outcome(run)
        if still_valid:  # the seal no longer fits what it seals: named as the sealed file, field or chain
            assert code == 1 and found, what
        else:
            assert code == 2 and "seal" in message, (what, message)
        file.write_bytes(original)
    receipts = run / RAW_RUNS_RECEIPTS
    original = receipts.read_bytes()
    documents = _lines(receipts)
    for index, (what, _, edit), _ in edits_of(documents, RecordReceipt):
        edited = json.loads(json.dumps(documents[index]))
        edit(edited)
        lines = original.decode("utf-8").splitlines()
        lines[index] = canonical_json(edited)
        receipts.write_text("\n".join(lines) + "\n", encoding="utf-8")
        code, found, _ = outcome(run)
        assert code == 1, what
        assert any(RAW_RUNS_RECEIPTS in d.field or d.field.startswith("trace") for d in found), (what, found[:4])
        receipts.write_bytes(original)


@pytest.mark.parametrize("name", DERIVED_FILES)
def test_a_byte_of_a_derived_file_edited_is_named(run: Path, name: str) -> None:
    file = run / name
    data = bytearray(file.read_bytes())
    at = len(data) // 2
    data[at : at + 1] = b"X" if data[at : at + 1] != b"X" else b"Y"
    file.write_bytes(bytes(data))
    code, found, _ = outcome(run)
    assert code == 1
    assert any(d.field == name and d.detail.startswith("edited after the run") for d in found)


def test_a_byte_of_each_snapshot_file_edited_is_named(run: Path) -> None:
    for file in sorted((run / "tasks").rglob("*.yaml")):
        original = file.read_bytes()
        file.write_bytes(original + b"# an added comment\n")
        code, found, _ = outcome(run)
        name = file.relative_to(run).as_posix()
        assert code == 1 and any(d.field == name for d in found), name
        file.write_bytes(original)


def test_a_file_added_to_the_run_directory_is_named(run: Path) -> None:
    (run / "notes.txt").write_text("added later\n")
    code, found, _ = outcome(run)
    assert code == 1 and [d.field for d in found] == ["notes.txt"]


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("swap", "holds the record sealed as line"),
        ("torn", "is torn: cut short"),
        ("drop", "is missing: the chain sealed a record of this episode"),
        ("reformat", "its bytes differ from the sealed record's, every value is equal"),
        ("append", "is not in the hash chain"),
    ],
)
def test_line_order_torn_missing_and_added_lines_are_named_as_such(run: Path, damage: str, expected: str) -> None:
    raw = run / RAW_RUNS
    lines = raw.read_text(encoding="utf-8").splitlines()
    if damage == "swap":
        lines[0], lines[1] = lines[1], lines[0]
        text = "\n".join(lines) + "\n"
    elif damage == "torn":
        text = "\n".join(lines)[:-200]
    elif damage == "drop":
        text = "\n".join(lines[1:]) + "\n"
    elif damage == "reformat":
        lines[0] = json.dumps(json.loads(lines[0]), sort_keys=True)
        text = "\n".join(lines) + "\n"
    else:
        copy = json.loads(lines[0])
        copy["run_id"] = copy["run_id"].replace(".r1", ".r2")
        text = "\n".join([*lines, canonical_json(copy)]) + "\n"
    raw.write_text(text, encoding="utf-8")
    code, found, _ = outcome(run)
    assert code == 1
    relevant = [d for d in found if d.field == RAW_RUNS]
    assert any(expected in d.detail for d in relevant), [d.render() for d in found][:6]
    if damage == "swap":  # the derived files follow the sealed order: nothing is blamed on them
        assert not any(d.field.startswith(("tool_events", "task_results")) for d in found), found
    if damage == "torn":
        assert not any("planned episode missing" in d.detail for d in found)


def test_cli_names_an_edited_latency_and_a_changed_model(run: Path) -> None:
    raw = run / RAW_RUNS
    lines = raw.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    record["trace"]["steps"][1]["response"]["latency_s"] += 0.25
    lines[0] = canonical_json(record)
    raw.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["verify", str(run)])
    assert result.exit_code == 1
    assert f"{record['run_id']}: trace.steps[1].response.latency_s: raw_runs.jsonl line 1: edited" in result.stdout
    manifest = json.loads((run / MANIFEST).read_text())
    manifest["provider"]["model"] = "another-model"
    (run / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    result = CliRunner().invoke(app, ["verify", str(run)])
    assert f"{manifest['run_group_id']}: run_manifest.json provider.model: edited after the run" in result.stdout
    assert f"{record['run_id']}: trace.model: recorded scripted-unsafe, the record and manifest say another-model" in (
        result.stdout
    )


CATEGORIES: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "a sent message": (lambda r: _step(r, "messages")[1].__setitem__("content", "edited"), "trace.steps[1].messages"),
    "a reply's text": (
        lambda r: _step(r, "response").__setitem__("content", "edited"),
        "trace.steps[1].response.content",
    ),
    "a reply's usage": (
        lambda r: _step(r, "response")["usage"].__setitem__("prompt_tokens", 1),
        "trace.steps[1].response.usage",
    ),
    "a tool result": (lambda r: _step(r, "tool_calls")[0].__setitem__("result", "{}"), "trace.steps[1].tool_calls"),
    "a verdict": (lambda r: r["verdict"].__setitem__("end_state", not r["verdict"]["end_state"]), "verdict.end_state"),
    "a timestamp": (lambda r: r.__setitem__("started_at", "2020-01-01T00:00:00Z"), "started_at"),
    "a total": (lambda r: r["trace"]["totals"].__setitem__("latency_s", 0.0), "trace.totals.latency_s"),
    "a tool event": (
        lambda r: _step(r, "evaluator")["tool_events"][0].__setitem__("outcome", "rejected"),
        "trace.steps[1].evaluator.tool_events",
    ),
}


def _step(record: dict[str, Any], name: str) -> Any:
    return record["trace"]["steps"][1][name]


@pytest.mark.slow
@pytest.mark.parametrize("category", sorted(CATEGORIES))
def test_an_edit_of_each_kind_of_recorded_fact_is_named(run: Path, category: str) -> None:
    edit, field = CATEGORIES[category]
    raw = run / RAW_RUNS
    lines = raw.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    edit(record)
    lines[0] = canonical_json(record)
    raw.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, found, _ = outcome(run)
    assert code == 1 and named(found, record["run_id"], field), [d.render() for d in found][:6]


def test_a_snapshot_file_that_no_longer_loads_is_named_by_its_path_in_the_run_directory(run: Path) -> None:
    """A snapshot task cut short (invalid YAML) was named ``tasks/ID.yaml``, a path that does not exist in the run
    directory (the file is ``tasks/WORLD/ID.yaml``)."""
    (file,) = sorted((run / "tasks").rglob("*.yaml"))[:1]
    file.write_bytes(file.read_bytes()[: len(file.read_bytes()) // 2])
    name = file.relative_to(run).as_posix()
    code, found, _ = outcome(run)
    assert code == 1
    loading = [d for d in found if str(file) in d.detail]
    assert loading and all(d.field == name for d in loading), [(d.field, d.detail[:80]) for d in found]


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda b: b"", "empty (no header): the run writes a header and one row per episode"),
        (lambda b: b"\xef\xbb\xbf" + b, "column 1 is '\\ufeffrun_id', the run writes 'run_id'"),
        (lambda b: b.replace(b",world,", b",World,", 1), "column 4 is 'World', the run writes 'world'"),
    ],
    ids=["emptied", "byte order mark", "renamed column"],
)
def test_a_task_results_header_that_differs_names_the_column(
    run: Path, damage: Callable[[bytes], bytes], expected: str
) -> None:
    """The header check printed the whole header list cut short ('columns null' for an emptied file) instead of
    saying which column differs."""
    path = run / "task_results.csv"
    path.write_bytes(damage(path.read_bytes()))
    code, found, _ = outcome(run)
    assert code == 1
    assert [d.detail for d in found if d.field == "task_results.csv header"] == [expected]


def test_a_task_results_header_row_repeated_is_named_as_the_header(run: Path) -> None:
    """A header row repeated below the header (a file joined to itself, an export that appended) was named as the
    row of an episode 'run_id' that is not in raw_runs.jsonl."""
    path = run / "task_results.csv"
    header, rest = path.read_bytes().split(b"\n", 1)
    path.write_bytes(header + b"\n" + header + b"\n" + rest)
    code, found, _ = outcome(run)
    assert code == 1
    named = [(d.field, d.detail) for d in found]
    assert ("task_results.csv", "line 2: the header row again, not an episode's row") in named
    assert not [d for d in found if "not in raw_runs.jsonl" in d.detail], named
