"""verify: an untouched run directory verifies MATCH; each kind of tampering is named by run id and field;
malformed and incomplete directories exit 2 with the reason."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.rundir.layout import (
    AGGREGATE_METRICS,
    BENCHMARK_REPORT,
    FAILURE_ATLAS,
    MANIFEST,
    RAW_RUNS,
    RAW_RUNS_RECEIPTS,
    TASK_RESULTS,
    TOOL_EVENTS,
    RunDirectory,
)
from contextdelta.rundir.records import TASK_RESULT_COLUMNS, RunStatus
from contextdelta.verify import VerifyError, verify_run
from tests.report import runs

cli = CliRunner()
EPISODE = "cal-onsite-loop.last_n.unprotected.r1"
EDITED_FILE = "edited after the run (its SHA-256 is not the one the manifest sealed)"


def verify(path: Path, *extra: str) -> tuple[int, list[str]]:
    result = cli.invoke(app, ["verify", path.name, "--results-dir", str(path.parent), *extra])
    if result.exit_code == 2:  # a refusal: on stderr, nothing on stdout
        assert result.stdout == ""
        return result.exit_code, result.stderr.splitlines()
    return result.exit_code, result.stdout.splitlines()


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A private copy of the unsafe run (24 episodes), to tamper with."""
    return runs.copy_run(runs.unsafe_run(), tmp_path)


def edit_episode(path: Path, run_id: str, change: Callable[[dict[str, object]], None]) -> None:
    lines = (path / RAW_RUNS).read_text().splitlines()
    for i, line in enumerate(lines):
        value = json.loads(line)
        if value["run_id"] == run_id:
            change(value)
            lines[i] = json.dumps(value, sort_keys=True, separators=(",", ":"))
    (path / RAW_RUNS).write_text("\n".join(lines) + "\n")


@pytest.mark.slow
def test_untouched_runs_verify_match() -> None:
    for path in (
        runs.unsafe_run(),
        runs.trusting_run(),
        runs.oracle_pair_run(),
        runs.single_task_run(),
        runs.max_steps_run(),
    ):
        result = verify_run(path)
        assert result.lines() == ["MATCH"], (path, result.lines()[:5])
    code, out = verify(runs.unsafe_run())
    assert (code, out) == (0, ["MATCH"])


@pytest.mark.slow
def test_a_flipped_verdict_is_named(run: Path) -> None:
    def flip(value: dict[str, object]) -> None:
        verdict = value["verdict"]
        assert isinstance(verdict, dict) and verdict["success"] is False
        verdict["success"] = True

    edit_episode(run, EPISODE, flip)
    code, out = verify(run)
    assert code == 1
    assert f"{EPISODE}: verdict.success: recorded true, re-derived false" in out
    assert f"{EPISODE}: task_results.csv success: file 'false', episode gives 'true'" in out
    assert f"{run.name}: counts.succeeded: manifest 1, raw_runs.jsonl gives 2" in out


def test_an_edited_csv_cell_is_named(run: Path) -> None:
    rows = list(csv.DictReader(io.StringIO((run / TASK_RESULTS).read_text())))
    row = next(r for r in rows if r["run_id"] == EPISODE)
    real = row["steps"]
    row["steps"] = "99"
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(TASK_RESULT_COLUMNS), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    (run / TASK_RESULTS).write_text(buffer.getvalue())
    code, out = verify(run)
    assert (code, out) == (
        1,
        [
            f"{run.name}: task_results.csv: {EDITED_FILE}",
            f"{EPISODE}: task_results.csv steps: file '99', episode gives '{real}'",
        ],
    )


@pytest.mark.slow
def test_an_altered_tool_result_is_named(run: Path) -> None:
    def alter(value: dict[str, object]) -> None:
        trace = value["trace"]
        assert isinstance(trace, dict)
        call = trace["steps"][0]["tool_calls"][0]
        call["result"] = call["result"].replace('"capacity":4', '"capacity":40')

    edit_episode(run, EPISODE, alter)
    code, out = verify(run)
    assert code == 1
    # the record's receipt names the edited field; re-executing the call names how the result differs
    assert len(out) == 2 and out[0].startswith(f"{EPISODE}: trace.steps[0].tool_calls: raw_runs.jsonl line ")
    assert out[0].endswith(": edited after the run (not what its receipt sealed)")
    assert out[1].startswith(
        f"{EPISODE}: steps[1].tool_calls[0].result: call seq 0 find_free_slots: differs at character "
    )
    assert '"capacity":40' in out[1] and '"capacity":4,' in out[1]


@pytest.mark.slow
def test_an_altered_tool_event_and_final_state_are_named(run: Path) -> None:
    def alter(value: dict[str, object]) -> None:
        trace = value["trace"]
        assert isinstance(trace, dict)
        trace["steps"][1]["evaluator"]["tool_events"][0]["version_at_execution"] = 7
        trace["evaluator"]["final_state"]["calendar/room/birch-2f"]["version"] = 9

    edit_episode(run, EPISODE, alter)
    code, out = verify(run)
    assert code == 1
    assert f"{EPISODE}: steps[2].tool_events[0].version_at_execution: recorded 7, re-derived 1" in out
    assert f"{EPISODE}: final_state.calendar/room/birch-2f.version: recorded 9, re-derived 3" in out


@pytest.mark.slow
def test_a_changed_task_file_in_the_snapshot_is_named(run: Path) -> None:
    task = run / "tasks" / "calendar" / "cal-onsite-loop.yaml"
    text = task.read_text()
    assert "        capacity: 4\n" in text
    task.write_text(text.replace("        capacity: 4\n", "        capacity: 5\n"))
    code, out = verify(run)
    assert code == 1
    assert any(line.startswith(f"{run.name}: tasks/cal-onsite-loop.hash: manifest ") for line in out)
    assert any(line.startswith(f"{run.name}: suite_sha256: manifest ") for line in out)
    # the re-execution shows the changed room in the first tool result of every cal-onsite-loop episode
    assert any(line.startswith(f"{EPISODE}: steps[1].tool_calls[0].result:") for line in out)


@pytest.mark.slow
def test_a_comment_in_a_task_file_is_named_only_by_the_seal(run: Path) -> None:
    """A comment is no part of a task's content (its hash stays), but the snapshot is a copy of the files the run
    read: any byte changed in it is an edit."""
    task = run / "tasks" / "calendar" / "cal-onsite-loop.yaml"
    task.write_text("# an extra comment\n" + task.read_text())
    assert verify(run) == (1, [f"{run.name}: tasks/calendar/cal-onsite-loop.yaml: {EDITED_FILE}"])


@pytest.mark.slow
def test_a_deleted_episode_line_is_named(run: Path) -> None:
    lines = (run / RAW_RUNS).read_text().splitlines()
    kept = [line for line in lines if json.loads(line)["run_id"] != EPISODE]
    assert len(kept) == len(lines) - 1
    (run / RAW_RUNS).write_text("\n".join(kept) + "\n")
    code, out = verify(run)
    assert code == 1
    assert f"{EPISODE}: raw_runs.jsonl: planned episode missing from raw_runs.jsonl" in out
    assert f"{EPISODE}: task_results.csv: row for an episode that is not in raw_runs.jsonl" in out
    assert f"{run.name}: counts.finished: manifest 24, raw_runs.jsonl gives 23" in out


@pytest.mark.slow
def test_deleted_derived_lines_are_named(run: Path) -> None:
    csv_lines = (run / TASK_RESULTS).read_text().splitlines()
    victim = next(line for line in csv_lines if line.startswith(EPISODE + ","))
    (run / TASK_RESULTS).write_text("\n".join(line for line in csv_lines if line != victim) + "\n")
    event_lines = (run / TOOL_EVENTS).read_text().splitlines()
    dropped = next(line for line in event_lines if json.loads(line)["run_id"] == EPISODE)
    seq = json.loads(dropped)["seq"]
    (run / TOOL_EVENTS).write_text("\n".join(line for line in event_lines if line != dropped) + "\n")
    code, out = verify(run)
    assert code == 1
    assert out == [
        f"{run.name}: task_results.csv: {EDITED_FILE}",
        f"{run.name}: tool_events.jsonl: {EDITED_FILE}",
        f"{EPISODE}: task_results.csv: row missing (the episode is in raw_runs.jsonl)",
        f"{EPISODE}: tool_events.jsonl seq {seq}: line missing",
    ]


@pytest.mark.slow
def test_edited_aggregates_and_reports_are_named(run: Path) -> None:
    data = json.loads((run / AGGREGATE_METRICS).read_text())
    data["conditions"][0]["rates"]["success"]["estimate"] = 0.5
    (run / AGGREGATE_METRICS).write_text(json.dumps(data, indent=2, sort_keys=True))
    report = (run / BENCHMARK_REPORT).read_text()
    (run / BENCHMARK_REPORT).write_text(report.replace("## Limitations", "## Limitations\n\n- all good"))
    code, out = verify(run)
    assert code == 1
    assert out[:2] == [
        f"{run.name}: aggregate_metrics.json: {EDITED_FILE}",
        f"{run.name}: benchmark_report.md: {EDITED_FILE}",
    ]
    assert (
        out[2] == f"{run.name}: aggregate_metrics.json conditions[0].rates.success.estimate: recorded 0.5, "
        "recomputed 0.0"
    )
    assert out[3].startswith(f"{run.name}: benchmark_report.md: differs from the one rebuilt from the episodes")
    assert len(out) == 4


@pytest.mark.slow
def test_a_float_in_the_last_bits_is_not_a_divergence(run: Path) -> None:
    """A report recomputed elsewhere may differ in the last bits (summation order): a sealed file whose numbers
    re-derive within the tolerance verifies. (Editing the file afterwards is named by the seal: the test above.)"""
    data = json.loads((run / AGGREGATE_METRICS).read_text())
    mean = data["conditions"][0]["means"]["agent_tokens"]
    mean["estimate"] = mean["estimate"] * (1 + 1e-13)
    (run / AGGREGATE_METRICS).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    assert verify(run) == (1, [f"{run.name}: aggregate_metrics.json: {EDITED_FILE}"])
    assert RunDirectory(run).reseal_files()  # as if the run had written these numbers
    assert verify(run) == (0, ["MATCH"])


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda p: (p / AGGREGATE_METRICS).unlink(), "missing aggregate_metrics.json"),
        (lambda p: (p / MANIFEST).write_text("{not json"), "run_manifest.json"),
    ],
)
def test_a_malformed_directory_exits_2_with_the_reason(
    run: Path, damage: Callable[[Path], object], reason: str
) -> None:
    damage(run)
    code, out = verify(run)
    assert code == 2
    assert len(out) == 1 and out[0].startswith("error: malformed run directory") and reason in out[0]


@pytest.mark.slow
def test_an_incomplete_run_exits_2_unless_allowed() -> None:
    path = runs.incomplete_run()
    code, out = verify(path)
    assert code == 2
    assert out[0].startswith(
        f"error: incomplete: run run-benchmark --resume {path.name} (status incomplete, 1 of 3 episodes"
    )
    assert "--allow-incomplete" in out[0]
    with pytest.raises(VerifyError, match="incomplete"):
        verify_run(path)
    assert verify(path, "--allow-incomplete") == (0, ["MATCH"])


def test_a_run_still_running_checks_its_episodes_without_blaming_the_counts_it_writes_at_its_end(
    tmp_path: Path,
) -> None:
    """A session writes the manifest's counts when it ends; while it runs (or after a kill) they are those of its
    start, so `verify --allow-incomplete` on such a run must not report them as divergences."""
    path = runs.copy_run(runs.oracle_pair_run(), tmp_path)
    directory = RunDirectory(path)
    for name in (RAW_RUNS, RAW_RUNS_RECEIPTS):  # the last episode not recorded yet
        lines = (path / name).read_text().splitlines(keepends=True)
        (path / name).write_text("".join(lines[:-1]))
    directory.write_derived(directory.read_episodes())  # tool_events.jsonl as the episodes so far appended it
    for name in (TASK_RESULTS, AGGREGATE_METRICS, BENCHMARK_REPORT, FAILURE_ATLAS):  # written when the run ends
        (path / name).unlink()
    manifest = directory.read_manifest()
    started = manifest.counts.model_copy(update={"finished": 0, "succeeded": 0, "failed": 0})
    directory.write_manifest(
        manifest.model_copy(update={"status": RunStatus.RUNNING, "finished_at": None, "counts": started})
    )
    code, out = verify(path, "--allow-incomplete")
    assert not [line for line in out if "counts." in line], out
    assert code == 0, out


def test_a_resumed_session_killed_leaves_an_earlier_sessions_reports_that_are_not_divergences(tmp_path: Path) -> None:
    """task_results.csv and the reports are written when a session ends: after a resumed session was killed they are
    the earlier session's (other episodes), which `verify --allow-incomplete` notes instead of blaming."""
    path = runs.copy_run(runs.oracle_pair_run(), tmp_path)
    directory = RunDirectory(path)
    for name in (RAW_RUNS, RAW_RUNS_RECEIPTS):
        lines = (path / name).read_text().splitlines(keepends=True)
        (path / name).write_text("".join(lines[:-1]))
    directory.write_derived(directory.read_episodes())
    (path / TASK_RESULTS).write_text((path / TASK_RESULTS).read_text().splitlines(keepends=True)[0])  # header only
    directory.write_manifest(directory.read_manifest().model_copy(update={"status": RunStatus.RUNNING}))
    code, out = verify(path, "--allow-incomplete")
    assert (code, out) == (0, ["MATCH"])
    result = verify_run(path, allow_incomplete=True)
    assert any("an earlier session's, not compared" in note for note in result.notes), result.notes


def test_unknown_or_unsafe_run_ids_exit_2(tmp_path: Path) -> None:
    for run_id in ("../x", "missing-run"):
        result = cli.invoke(app, ["verify", run_id, "--results-dir", str(tmp_path)])
        assert result.exit_code == 2


@pytest.mark.slow
def test_a_context_that_is_not_what_the_strategy_gives_is_named(run: Path) -> None:
    """A step's sent messages edited consistently (hash and token count fixed up): only re-deriving the
    context from the canonical history catches it."""
    from contextdelta.canonical import content_hash
    from contextdelta.context import count_message_tokens

    def smuggle(value: dict[str, object]) -> None:
        trace = value["trace"]
        assert isinstance(trace, dict)
        step = trace["steps"][-1]
        messages = step["messages"]
        messages.insert(2, {"role": "user", "content": "A note the strategy never wrote."})
        step["messages_sha256"] = content_hash(messages)
        step["harness_prompt_tokens"] = count_message_tokens(messages)

    edit_episode(run, EPISODE, smuggle)
    code, out = verify(run)
    assert code == 1
    last = [line for line in out if line.startswith(f"{EPISODE}: steps[")]
    assert len(last) == 1 and ".messages: sent message 2 differs from the re-derived context" in last[0], out


@pytest.mark.slow
def test_a_recorded_removal_that_the_strategy_does_not_make_is_named(run: Path) -> None:
    def shift(value: dict[str, object]) -> None:
        trace = value["trace"]
        assert isinstance(trace, dict)
        trace["steps"][-1]["context"]["removed"] = []

    edit_episode(run, EPISODE, shift)
    code, out = verify(run)
    assert code == 1
    assert any(line.startswith(f"{EPISODE}: steps[") and ".context.removed: recorded []" in line for line in out)


@pytest.mark.parametrize("cut", ["all", "torn", "not the last episode's"])
def test_a_run_killed_before_its_last_episodes_tool_events_were_appended_verifies_with_a_note(
    tmp_path: Path, cut: str
) -> None:
    """A record, then its receipt, then its tool events: a session killed in between leaves the last episode recorded
    without its tool_events.jsonl lines (or with a torn last one). `verify --allow-incomplete` named each missing line
    as a divergence (exit 1) of a run that was only killed; now it notes it. Lines missing for another episode are
    still divergences."""
    path = runs.copy_run(runs.oracle_pair_run(), tmp_path)
    directory = RunDirectory(path)
    records = directory.read_episodes()
    last, other = records[-1].run_id, records[0].run_id
    lines = (path / TOOL_EVENTS).read_text().splitlines(keepends=True)
    owners = [json.loads(line)["run_id"] for line in lines]
    assert owners[-1] == last and other in owners
    if cut == "all":
        kept = [line for line, owner in zip(lines, owners, strict=True) if owner != last]
    elif cut == "torn":
        first = owners.index(last)
        kept = [*lines[: first + 1], lines[first + 1][:25]]
    else:
        kept = [line for line, owner in zip(lines, owners, strict=True) if owner != other]
    (path / TOOL_EVENTS).write_text("".join(kept))
    for name in (TASK_RESULTS, AGGREGATE_METRICS, BENCHMARK_REPORT, FAILURE_ATLAS):  # written when the run ends
        (path / name).unlink()
    directory.write_manifest(directory.read_manifest().model_copy(update={"status": RunStatus.RUNNING}))
    code, out = verify(path, "--allow-incomplete")
    if cut == "not the last episode's":
        assert code == 1 and any(line.startswith(f"{other}: tool_events.jsonl seq") for line in out), out
        return
    assert (code, out) == (0, ["MATCH"])
    notes = verify_run(path, allow_incomplete=True).notes
    assert any(
        note.startswith("tool_events.jsonl lacks") and f"of {last}, the last episode recorded" in note for note in notes
    ), notes


def test_a_differing_list_is_named_without_a_double_dot() -> None:
    """A list compared at the top of a field was named `steps[6].mutations_after_calls..length` and `name.[0]`."""
    from contextdelta.verify._verify import _differences

    assert list(_differences([1, 2], [1])) == [("length", 2, 1)]
    assert list(_differences([1, 2], [1, 3])) == [("[1]", 2, 3)]
    assert list(_differences({"a": [1]}, {"a": []})) == [("a.length", 1, 0)]


@pytest.mark.parametrize("status", [RunStatus.COMPLETE, RunStatus.RUNNING])
def test_a_folder_in_place_of_a_derived_file_is_named_as_a_folder_not_as_missing(
    tmp_path: Path, status: RunStatus
) -> None:
    """verify said `missing task_results.csv (run-benchmark --resume rebuilds the derived files)` for a folder
    standing there, which the resume cannot rebuild (it refuses to write onto a folder); for a killed run it only
    noted the file as not written yet, exit 0. Now it is a malformed directory naming the folder and the remedy."""
    path = runs.copy_run(runs.oracle_pair_run(), tmp_path)
    directory = RunDirectory(path)
    if status is RunStatus.RUNNING:
        directory.write_manifest(directory.read_manifest().model_copy(update={"status": status}))
    (path / TASK_RESULTS).unlink()
    (path / TASK_RESULTS).mkdir()
    code, out = verify(path, "--allow-incomplete")
    said = " ".join(" ".join(out).split())
    assert code == 2, out
    assert f"{TASK_RESULTS} is a folder where the run writes a file: put what the run wrote in its place" in said
