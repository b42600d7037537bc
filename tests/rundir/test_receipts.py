"""Receipts: every line of raw_runs.jsonl gets one the moment it is appended, chained to the one before; each
manifest write seals the chain, the manifest and every other file; a resume repairs what a kill left between the
two appends and refuses receipts damaged elsewhere."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextdelta.canonical import canonical_json
from contextdelta.rundir import (
    MANIFEST,
    RAW_RUNS,
    RAW_RUNS_RECEIPTS,
    RunDirectory,
    RunDirectoryError,
    RunStatus,
    chain_next,
    chain_start,
    parts_of,
    read_receipts,
    receipt_for,
)
from contextdelta.rundir._parts import sealed_json
from contextdelta.runner import BenchmarkError, BenchmarkRequest, run_benchmark
from contextdelta.testing import serve_scripted
from contextdelta.verify import verify_run
from tests.report import runs

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def test_parts_name_each_value_by_path_down_to_a_fixed_depth() -> None:
    value = {
        "started_at": "t",
        "trace": {
            "steps": [{"response": {"latency_s": 0.5, "usage": {"prompt_tokens": 3}}, "messages": [{"role": "user"}]}],
            "evaluator": {"final_state": {"calendar/room/a.b": {"version": 2}}},
        },
        "verdict": {"details": [], "success": True},
    }
    parts = parts_of(value)
    assert sorted(parts) == [
        "started_at",
        'trace.evaluator.final_state["calendar/room/a.b"]',
        "trace.steps[0].messages",  # a step's lists are one part each
        "trace.steps[0].response.latency_s",
        "trace.steps[0].response.usage",  # four keys deep: its token counts are in it
        "verdict.details",
        "verdict.success",
    ]
    assert all(len(digest) == 16 for digest in parts.values())
    changed = parts_of({**value, "started_at": "u"})
    assert [p for p in parts if parts[p] != changed[p]] == ["started_at"]


def test_each_receipt_chains_every_field_to_the_one_before() -> None:
    first = receipt_for('{"run_id":"a"}', 1, chain_start("group"))
    second = receipt_for('{"run_id":"b"}', 2, first.chain)
    assert (first.run_id, second.run_id, second.line) == ("a", "b", 2)
    assert second.chain == chain_next(first.chain, second)
    assert chain_next(first.chain, second.model_copy(update={"run_id": "c"})) != second.chain
    assert receipt_for('{"run_id":"a"}', 1, chain_start("other")).chain != first.chain  # bound to its run group
    torn = receipt_for(b'{"run_id":"a", "tr', 1, first.chain)
    assert list(torn.parts) == ["(root)"] and torn.run_id is None


def test_a_run_writes_one_receipt_per_line_and_seals_everything(tmp_path: Path) -> None:
    path = runs.copy_run(runs.single_task_run(), tmp_path)
    lines = (path / RAW_RUNS).read_text().splitlines()
    receipts = read_receipts(path / RAW_RUNS_RECEIPTS)
    assert [r.line for r in receipts] == list(range(1, len(lines) + 1))
    assert [r.run_id for r in receipts] == [json.loads(line)["run_id"] for line in lines]
    seal = RunDirectory(path).read_manifest().seal
    assert seal is not None and (seal.records.lines, seal.records.head) == (len(lines), receipts[-1].chain)
    assert sorted(seal.files) == sorted(
        [
            "aggregate_metrics.json",
            "benchmark_report.md",
            "failure_atlas.md",
            "task_results.csv",
            "tasks/config/cfg-search-ramp.yaml",
            "tool_events.jsonl",
        ]
    )
    assert RunDirectory(path).manifest_edits() == []


def _small_run(url: str, results: Path) -> Path:
    request = BenchmarkRequest(
        tasks_dir=TASKS,
        base_url=url,
        model="scripted-oracle",
        results_dir=results,
        task_ids=["order-grinder-refund", "cfg-search-ramp"],
        strategies=["full_history"],
        protection_modes=["unprotected"],
        repeats=1,
    )
    return run_benchmark(request).path


def _resume(url: str, path: Path) -> None:
    run_benchmark(BenchmarkRequest(base_url=url, model="scripted-oracle", resume=str(path)))


@pytest.mark.slow
def test_a_kill_between_the_two_appends_is_repaired_on_resume(tmp_path: Path) -> None:
    with serve_scripted("oracle", TASKS, in_process=True) as url:
        path = _small_run(url, tmp_path)
        receipts = path / RAW_RUNS_RECEIPTS
        kept = receipts.read_text().splitlines()
        receipts.write_text(kept[0] + "\n" + kept[1][:40])  # the last receipt torn, as a kill leaves it
        directory = RunDirectory(path)  # and the manifest as the session wrote it when it opened
        directory.write_manifest(directory.read_manifest().model_copy(update={"status": RunStatus.RUNNING}))
        _resume(url, path)
    assert receipts.read_text().splitlines() == kept  # the same receipt, re-derived from the same line
    assert verify_run(path).lines() == ["MATCH"]


@pytest.mark.slow
def test_receipts_damaged_before_their_last_line_refuse_a_resume(tmp_path: Path) -> None:
    with serve_scripted("oracle", TASKS, in_process=True) as url:
        path = _small_run(url, tmp_path)
        receipts = path / RAW_RUNS_RECEIPTS
        kept = receipts.read_text().splitlines()
        receipts.write_text("garbage\n" + kept[1] + "\n")
        with pytest.raises(BenchmarkError, match=r"raw_runs.receipts.jsonl: line 1 is not a receipt"):
            _resume(url, path)
        with pytest.raises(RunDirectoryError, match="line 1 is not a receipt"):
            RunDirectory(path).repair_raw_runs()


def test_a_manifest_edited_after_its_seal_refuses_a_resume(tmp_path: Path) -> None:
    with serve_scripted("oracle", TASKS, in_process=True) as url:
        path = _small_run(url, tmp_path)
        manifest = json.loads((path / MANIFEST).read_text())
        manifest["created_at"] = "2020-01-01T00:00:00Z"
        (path / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        with pytest.raises(BenchmarkError, match=r"edited after it was sealed \(created_at\)"):
            _resume(url, path)


def test_a_manifest_whose_seal_was_removed_refuses_a_resume(tmp_path: Path) -> None:
    """Resuming would write a fresh seal over whatever was changed meanwhile."""
    with serve_scripted("oracle", TASKS, in_process=True) as url:
        path = _small_run(url, tmp_path)
        manifest = json.loads((path / MANIFEST).read_text())
        del manifest["seal"]
        (path / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        with pytest.raises(BenchmarkError, match=r"edited after it was sealed \(seal \(removed\)\)"):
            _resume(url, path)


def test_receipt_lines_are_canonical_json() -> None:
    path = runs.single_task_run()
    for line in (path / RAW_RUNS_RECEIPTS).read_text().splitlines():
        assert line == canonical_json(json.loads(line))


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=60,
)


def reference_parts(value: object) -> dict[str, str]:
    """The parts as the receipts' rule states them, written out plainly (the test's oracle): every value reached by
    at most 4 object keys that is a scalar, an empty container or at that depth, lists down to 2 keys split."""
    out: dict[str, str] = {}

    def walk(node: object, path: str, keys: int) -> None:
        if isinstance(node, dict) and node and keys < 4:
            for key in sorted(node):
                plain = key.replace("_", "a").replace("-", "a").isalnum()
                where = (
                    (f"{path}.{key}" if path else key) if plain else f"{path}[{json.dumps(key, ensure_ascii=False)}]"
                )
                walk(node[key], where, keys + 1)
        elif isinstance(node, list) and node and path and keys <= 2:
            for index, item in enumerate(node):
                walk(item, f"{path}[{index}]", keys)
        else:
            out[path or "(root)"] = hashlib.sha256(canonical_json(node).encode()).hexdigest()[:16]

    walk(value, "", 0)
    return out


@given(st.dictionaries(st.sampled_from(["trace", "steps", "a.b", "x-y", "verdict", ""]), JSON_VALUES, max_size=5))
def test_a_record_line_and_its_parts_come_from_one_pass_exactly_as_from_two(value: dict[str, object]) -> None:
    line, parts = sealed_json(value)
    assert line == canonical_json(value)
    assert parts == reference_parts(json.loads(line)) == parts_of(json.loads(line))


def test_a_key_that_is_not_a_string_gives_the_parts_of_the_line_read_back() -> None:
    value = {"trace": {1: "a", 2: {"b": [1.5]}}}
    line, parts = sealed_json(value)
    assert line == canonical_json(value)
    assert parts == reference_parts(json.loads(line))
    assert sorted(parts) == ["trace.1", "trace.2.b"]


def test_the_receipt_written_with_a_record_is_the_receipt_verify_derives_from_its_line() -> None:
    run_dir = runs.single_task_run()
    lines = (run_dir / RAW_RUNS).read_bytes().splitlines()
    written = read_receipts(run_dir / RAW_RUNS_RECEIPTS)
    previous = chain_start(json.loads((run_dir / MANIFEST).read_text())["run_group_id"])
    for number, (line, receipt) in enumerate(zip(lines, written, strict=True), start=1):
        assert receipt == receipt_for(line, number, previous)
        previous = receipt.chain


@pytest.mark.parametrize("damage", ["record deleted", "record overwritten", "receipt deleted"])
def test_a_sealed_record_gone_from_a_finished_run_refuses_a_resume(tmp_path: Path, damage: str) -> None:
    """A run that ended closed both files before its manifest sealed them, so a sealed line missing now is an edit,
    not a kill: the repair would drop it, and the resume would run the episode again and seal the new record, leaving
    verify nothing to name."""
    with serve_scripted("oracle", TASKS, in_process=True) as url:
        path = _small_run(url, tmp_path)
        raw, receipts = path / RAW_RUNS, path / RAW_RUNS_RECEIPTS
        lines = raw.read_text().splitlines(keepends=True)
        if damage == "record deleted":
            raw.write_text("".join(lines[:-1]))
        elif damage == "record overwritten":
            raw.write_text("".join(lines[:-1]) + "{not an episode\n")
        else:
            receipts.write_text("".join(receipts.read_text().splitlines(keepends=True)[:-1]))
        before = {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()}
        with pytest.raises(BenchmarkError, match=r"but the manifest sealed 2.*restore .* as the run wrote it"):
            _resume(url, path)
    assert {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()} == before


def test_a_task_snapshot_changed_after_its_seal_refuses_a_resume(tmp_path: Path) -> None:
    """A comment added to a snapshot task file changes no replay; resuming would still seal it as the run's."""
    with serve_scripted("oracle", TASKS, in_process=True) as url:
        path = _small_run(url, tmp_path)
        (task,) = sorted((path / "tasks").rglob("*.yaml"))[:1]
        task.write_text(task.read_text() + "# added after the run\n")
        name = task.relative_to(path).as_posix()
        with pytest.raises(BenchmarkError, match=rf"task snapshot was changed after it was sealed \({name}\)"):
            _resume(url, path)
        extra = path / "tasks" / "order" / "extra.yaml"
        extra.write_text("id: extra\n")
        assert RunDirectory(path).snapshot_edits() == sorted([name, "tasks/order/extra.yaml"])


@pytest.mark.parametrize("status", [RunStatus.RUNNING, RunStatus.COMPLETE])
@pytest.mark.parametrize("damage", ["verdict edited", "record removed"])
def test_a_record_edited_after_its_receipt_refuses_a_resume(tmp_path: Path, status: RunStatus, damage: str) -> None:
    """A line is written before its receipt, so no kill leaves a receipted line changed. The resume of a killed run
    took such an edit as the run's: it counted the flipped verdict, printed it and wrote the reports from it."""
    with serve_scripted("oracle", TASKS, in_process=True) as url:
        path = _small_run(url, tmp_path)
        directory = RunDirectory(path)
        directory.write_manifest(directory.read_manifest().model_copy(update={"status": status}))
        raw = path / RAW_RUNS
        lines = raw.read_text().splitlines(keepends=True)
        if damage == "verdict edited":
            record = json.loads(lines[0])
            record["verdict"]["success"] = not record["verdict"]["success"]
            lines[0] = canonical_json(record) + "\n"
            expected = "line 1 changed"
        else:
            lines = lines[1:]  # sealed when the manifest was written: no kill removes it, running or not
            expected = "but the manifest sealed 2"
        raw.write_text("".join(lines))
        before = {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()}
        with pytest.raises(BenchmarkError, match=rf"{re.escape(expected)}.*restore .* as the run wrote it"):
            _resume(url, path)
    assert {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()} == before
    assert directory.records_edited() == [1]


def _killed_run(url: str, results: Path) -> Path:
    """Four episodes, left as a first session killed after recording them leaves its run: the manifest ``running``,
    sealed when that session opened (a chain of no receipt)."""
    request = BenchmarkRequest(
        tasks_dir=TASKS,
        base_url=url,
        model="scripted-oracle",
        results_dir=results,
        task_ids=["order-grinder-refund", "cfg-search-ramp"],
        strategies=["full_history", "last_n"],
        protection_modes=["unprotected"],
        repeats=1,
    )
    path = run_benchmark(request).path
    receipts = path / RAW_RUNS_RECEIPTS
    kept = receipts.read_bytes()
    receipts.write_bytes(b"")
    directory = RunDirectory(path)
    directory.write_manifest(directory.read_manifest().model_copy(update={"status": RunStatus.RUNNING}))
    receipts.write_bytes(kept)
    return path


@pytest.mark.slow
@pytest.mark.parametrize(
    ("damage", "expected", "diverging"),
    [
        ("receipts deleted", "raw_runs.jsonl lines 1-4 (4 records), the first", [1, 2, 3, 4]),
        ("receipts cut to one", "raw_runs.jsonl lines 2-4 (3 records), the first", [2, 3, 4]),
        ("records removed", "raw_runs.receipts.jsonl holds 4 receipts, but raw_runs.jsonl only 2 complete", []),
    ],
)
def test_a_killed_run_whose_receipts_no_kill_explains_refuses_a_resume(
    tmp_path: Path, damage: str, expected: str, diverging: list[int]
) -> None:
    """A record is appended (and flushed) before its receipt, in one process: a kill leaves at most the last record
    without one. A resume derived receipts for every record that had none, so deleting or cutting the receipts of a
    killed run and editing its lines had the edit sealed as the run's; now it refuses, naming the first record and
    what to do, changes nothing, and verify names each line without a receipt."""
    with serve_scripted("oracle", TASKS, in_process=True) as url:
        path = _killed_run(url, tmp_path)
        raw, receipts = path / RAW_RUNS, path / RAW_RUNS_RECEIPTS
        lines = raw.read_text().splitlines(keepends=True)
        record = json.loads(lines[1])
        record["verdict"]["success"] = not record["verdict"]["success"]  # the edit the receipts would have named
        lines[1] = canonical_json(record) + "\n"
        raw.write_text("".join(lines))
        if damage == "receipts deleted":
            receipts.unlink()
        elif damage == "receipts cut to one":
            receipts.write_text(receipts.read_text().splitlines(keepends=True)[0])
        else:
            raw.write_text("".join(lines[:2]))
        first = json.loads(raw.read_text().splitlines()[1 if damage == "receipts cut to one" else 0])["run_id"]
        before = {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()}
        with pytest.raises(BenchmarkError) as refused:
            _resume(url, path)
        said = str(refused.value)
        assert expected in said and "restore raw_runs" in said, said
        if diverging:
            assert f"the first {first}, have no receipt" in said
            assert f"keep only the first {diverging[0] - 1} lines of raw_runs.jsonl" in said
        assert {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()} == before
        found = verify_run(path, allow_incomplete=True).lines()
        for number in diverging:
            assert any(f"raw_runs.jsonl: line {number} has no receipt" in line for line in found), found


@pytest.mark.slow
def test_the_one_record_a_kill_leaves_without_a_receipt_is_repaired_and_verify_only_notes_it(tmp_path: Path) -> None:
    """The last record without its receipt (a kill between the two appends): verify notes it, the resume derives
    its receipt, and the finished run verifies MATCH."""
    with serve_scripted("oracle", TASKS, in_process=True) as url:
        path = _killed_run(url, tmp_path)
        receipts = path / RAW_RUNS_RECEIPTS
        kept = receipts.read_text().splitlines(keepends=True)
        receipts.write_text("".join(kept[:3]))
        checked = verify_run(path, allow_incomplete=True)
        assert not any("no receipt" in line for line in checked.lines()), checked.lines()
        assert any("line 4" in note and "has no receipt yet" in note for note in checked.notes), checked.notes
        _resume(url, path)
    assert receipts.read_text().splitlines(keepends=True) == kept
    assert verify_run(path).lines() == ["MATCH"]
