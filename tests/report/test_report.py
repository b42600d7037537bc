"""benchmark_report.md, failure_atlas.md, and the `report` and `compare` commands."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.canonical import canonical_json
from contextdelta.cli import app
from contextdelta.report import build_report, compare_runs
from contextdelta.rundir.io import SessionLock
from contextdelta.rundir.layout import (
    AGGREGATE_METRICS,
    BENCHMARK_REPORT,
    FAILURE_ATLAS,
    MANIFEST,
    RAW_RUNS,
    RAW_RUNS_RECEIPTS,
    REQUIRED_FILES,
    RunDirectory,
)
from contextdelta.rundir.records import EpisodeRecord, RunStatus, SeedRule
from tests.report import runs

cli = CliRunner()
STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")


def invoke(*args: str) -> tuple[int, str]:
    result = cli.invoke(app, [*args, "--results-dir", str(runs.results_dir())])
    return result.exit_code, result.stdout


def invoke_err(*args: str) -> tuple[int, str, str]:
    result = cli.invoke(app, [*args, "--results-dir", str(runs.results_dir())])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def trusting() -> Path:
    return runs.trusting_run()


def test_the_runner_writes_every_derived_file(trusting: Path) -> None:
    assert all((trusting / name).is_file() for name in REQUIRED_FILES)


def test_report_sections_numbers_and_statements(trusting: Path) -> None:
    text = (trusting / BENCHMARK_REPORT).read_text()
    manifest = RunDirectory(trusting).read_manifest()
    for heading in (
        "## Setup",
        "## Methods and definitions",
        "## Results per condition",
        "## Breakdowns per hazard and per world",
        "## RQ1:",
        "## RQ2:",
        "## RQ3:",
        "## Tokens and cost",
        "## Failure modes",
        "## Failed trials",
        "## Limitations",
        "## Receipts",
    ):
        assert heading in text
    assert f"| suite hash | `{manifest.hashes.suite_sha256}` |" in text
    assert "| model | `scripted-context_trusting` (openai) |" in text
    assert "| episodes | 48 finished of 48 planned; 16 succeeded; 0 failed trials |" in text
    # full_history / unprotected: nothing succeeds (an exact bound over 3 tasks, never "certainly 0%"), and 4 of 6
    # episodes with a verdict are stale (2 tasks x 2 repeats)
    assert "| full_history / unprotected | 3 | 6 | 0.0% [0.0%, 70.8%] exact |" in text
    assert "| full_history / unprotected | 3 | 6 | 0 | 66.7% [" in text
    assert "count as failures in the success rate" in text and "never counted as safe" in text
    # RQ1: no task differs, so nothing is tested and the family is empty; RQ3: 4 testable comparisons
    assert "p (Holm, m=0)" in text and "p (Holm, m=4)" in text
    assert "not testable" in text and "leaves its Holm family" in text
    assert "Sign-flip test over tasks: 2 of 3 tasks discordant (0 higher under a, 2 under b), p = 0.5" in text
    assert "not significant at the 5% family-wise level" in text
    # a paired difference counts the episodes of both conditions (3 tasks x 2 repeats in each), never as pairs
    metrics = json.loads((trusting / AGGREGATE_METRICS).read_text())
    tested = [
        c for q in metrics["research_questions"] for c in q["comparisons"] if c["test"]["method"] != "not_testable"
    ]
    assert tested and all(c["difference"]["n_episodes"] == 2 * c["episodes"]["n_pairs"] == 12 for c in tested)
    assert "mean over 3 tasks of the per-task difference, from 12 episodes of the two conditions together;" in text
    assert "the data do not show a difference" not in text
    assert "Holm family (4 testable comparisons): freshness_contract vs unprotected (full_history);" in text
    assert "not a language model" in text  # the scripted server is named for what it is
    assert "nan" not in text.lower()


def test_report_times_are_measurement_times_and_rebuilds_are_identical(trusting: Path) -> None:
    directory = RunDirectory(trusting)
    manifest, records = directory.read_manifest(), directory.read_episodes()
    allowed = {manifest.created_at, manifest.updated_at, manifest.finished_at}
    allowed |= {r.started_at for r in records} | {r.finished_at for r in records}
    text = (trusting / BENCHMARK_REPORT).read_text()
    assert set(STAMP.findall(text)) <= allowed
    assert manifest.created_at in text
    rebuilt = build_report(manifest, list(reversed(records)))
    assert rebuilt.markdown == text
    assert rebuilt.atlas == (trusting / FAILURE_ATLAS).read_text()


def test_failure_atlas_groups_failures_with_their_cause_chain(trusting: Path) -> None:
    text = (trusting / FAILURE_ATLAS).read_text()
    assert "32 failed episodes of 48 finished" in text
    assert "## never_refreshed (16)" in text and "## end_state_miss (16)" in text
    assert "| `never_refreshed` | 4 | 0 | 4 | 0 | 4 | 0 | 4 | 0 | 16 |" in text
    entry = text.split("### order-desk-cancel.full_history.unprotected.r1", 1)[1].split("### ", 1)[0]
    assert (
        "- harmful/decisive action: step 4, call 3 `add_order_note` on `order/order/B-2210`, executed at "
        "version 2; counts as: refresh_before_write, stale" in entry
    )
    assert "- relied-on observation: order/order/B-2210 version 1, entered at step 1, call 0 (list_orders)" in entry
    assert (
        "- hidden mutation that made it stale: `warehouse-ships-desk` by warehouse-leipzig (step 2, after "
        "call 1, after_tool_call): order/order/B-2210 version 1 -> 2" in entry
    )
    assert "Context the model saw at step 4:" in entry and "```text" in entry


@pytest.mark.slow
def test_report_command_prints_the_report_from_the_directory(trusting: Path) -> None:
    code, out = invoke("report", trusting.name)
    assert code == 0 and out == (trusting / BENCHMARK_REPORT).read_text()
    code, out = invoke("report", trusting.name, "--format", "json")
    assert code == 0 and json.loads(out) == json.loads((trusting / AGGREGATE_METRICS).read_text())


def test_report_command_on_an_incomplete_run_says_so() -> None:
    path = runs.incomplete_run()
    code, out = invoke("report", path.name)
    assert code == 0
    assert "**Incomplete run** (status `incomplete`: budget exhausted" in out
    assert "1 of 3 episodes finished" in out and f"--resume {path.name}" in out


def test_report_write_rebuilds_deleted_files(tmp_path: Path) -> None:
    path = runs.copy_run(runs.oracle_pair_run(), tmp_path)
    original = (path / BENCHMARK_REPORT).read_text()
    for name in (BENCHMARK_REPORT, FAILURE_ATLAS, AGGREGATE_METRICS):
        (path / name).unlink()
    result = cli.invoke(app, ["report", path.name, "--write", "--results-dir", str(tmp_path)])
    assert result.exit_code == 0
    assert (path / BENCHMARK_REPORT).read_text() == original
    assert (path / FAILURE_ATLAS).is_file() and (path / AGGREGATE_METRICS).is_file()


def test_report_write_is_refused_while_a_session_writes_the_run(tmp_path: Path) -> None:
    """A session still running (or resuming) rewrites the reports and the manifest itself: report --write meanwhile
    would write files from the episodes so far and reseal a manifest the session replaces (or put an old one back).
    It waits for the run's writer lock instead: refused while a session holds it, nothing written."""
    path = runs.copy_run(runs.oracle_pair_run(), tmp_path)
    before = {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()}
    (path / BENCHMARK_REPORT).unlink()  # something for --write to rebuild
    del before[BENCHMARK_REPORT]
    session = SessionLock.acquire(path)  # what open_run holds until the run is finalised
    assert session is not None
    try:
        for args in (["--write"], ["--resamples", "300"]):
            result = cli.invoke(app, ["report", path.name, *args, "--results-dir", str(tmp_path)])
            assert result.exit_code == 2, result.output
            message = " ".join(result.stderr.split())
            assert f"report would rewrite and reseal the files of {path.name}, which a session is writing" in message
            assert result.stdout == ""
            assert {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()} == before  # nothing written
    finally:
        session.release()
    result = cli.invoke(app, ["report", path.name, "--write", "--results-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (path / BENCHMARK_REPORT).is_file()
    assert SessionLock.acquire(path) is not None  # released again


@pytest.mark.parametrize("run_id", ["../etc", "a/b", "nope-not-a-run"])
def test_report_refuses_bad_or_unknown_run_ids(run_id: str) -> None:
    code, _ = invoke("report", run_id)
    assert code == 2


def test_report_on_a_malformed_directory_exits_2(tmp_path: Path) -> None:
    path = runs.copy_run(runs.oracle_pair_run(), tmp_path)
    (path / MANIFEST).write_text("{}")
    result = cli.invoke(app, ["report", path.name, "--results-dir", str(tmp_path)])
    assert result.exit_code == 2


# ---- compare --------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_compare_pairs_shared_conditions(trusting: Path) -> None:
    oracle = runs.oracle_pair_run()
    code, out = invoke("compare", oracle.name, trusting.name)
    assert code == 0
    assert f"# Comparison: {oracle.name} (a) vs {trusting.name} (b)" in out
    assert "exact sign-flip test over tasks" in out
    # success of full_history / unprotected: the oracle passes its 6 episodes, context_trusting none of its 6
    assert "| full_history / unprotected | 6/6 = 100" in out and "exact | 0/6 = 0.0% [0.0%, 70.8%] exact |" in out
    code, out = invoke("compare", oracle.name, trusting.name, "--format", "json")
    report = json.loads(out)
    assert [c["strategy"] for c in report["shared_conditions"]] == ["full_history", "last_n"]
    assert len(report["only_in_b"]) == 6 and report["only_in_a"] == []
    success = next(f for f in report["families"] if f["metric"] == "success")
    full = next(c for c in success["comparisons"] if c["condition"]["strategy"] == "full_history")["comparison"]
    # oracle passes all 6 pairs; context_trusting fails every one: all 3 tasks discordant in a's favour
    assert (full["episodes"]["only_a"], full["episodes"]["only_b"], full["episodes"]["n_pairs"]) == (6, 0, 6)
    assert (full["test"]["n_tasks"], full["test"]["n_positive"], full["test"]["n_negative"]) == (3, 3, 0)
    assert full["difference"]["estimate"] == pytest.approx(1.0)
    assert full["test"]["pvalue"] == pytest.approx(2 / 2**3)  # the task is the unit: 3 tasks, not 6 pairs
    assert success["family_size"] == 2


def test_compare_refuses_a_different_task_set(trusting: Path) -> None:
    code, out, err = invoke_err("compare", runs.unsafe_run().name, trusting.name)
    assert code == 2 and out == "" and err.startswith("NOT COMPARABLE: task set differs")


def _edit_run(path: Path, manifest_hashes: dict[str, str], tools_sha256: str | None = None) -> None:
    data = json.loads((path / MANIFEST).read_text())
    data["hashes"].update(manifest_hashes)
    (path / MANIFEST).write_text(json.dumps(data))
    if tools_sha256 is not None:
        lines = []
        for line in (path / RAW_RUNS).read_text().splitlines():
            record = EpisodeRecord.model_validate_json(line)
            record.trace.tools_sha256 = tools_sha256
            lines.append(record.model_dump_json())
        (path / RAW_RUNS).write_text("\n".join(lines) + "\n")


def test_compare_names_a_different_system_prompt_or_tool_schemas(tmp_path: Path, trusting: Path) -> None:
    base = runs.copy_run(trusting, tmp_path)
    prompt = runs.copy_run(runs.oracle_pair_run(), tmp_path / "p")
    shutil.move(prompt, tmp_path / "prompt")
    _edit_run(tmp_path / "prompt", {"system_prompt_sha256": "0" * 64, "system_prompt_version": "2"})
    result = cli.invoke(app, ["compare", "prompt", base.name, "--results-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr.startswith("NOT COMPARABLE: system prompt differs (version 2 000000000000 vs version 1")
    tools = runs.copy_run(runs.oracle_pair_run(), tmp_path / "t")
    shutil.move(tools, tmp_path / "tools")
    _edit_run(tmp_path / "tools", {"tool_schemas_sha256": "1" * 64}, tools_sha256="1" * 64)
    result = cli.invoke(app, ["compare", "tools", base.name, "--results-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "NOT COMPARABLE: tool schemas differ (config world in unprotected, order world in unprotected)"
    )


def test_compare_is_symmetric_in_its_counts(trusting: Path) -> None:
    a, b = RunDirectory(runs.oracle_pair_run()), RunDirectory(trusting)
    ab = compare_runs(a.read_manifest(), a.read_episodes(), b.read_manifest(), b.read_episodes())
    ba = compare_runs(b.read_manifest(), b.read_episodes(), a.read_manifest(), a.read_episodes())
    for fa, fb in zip(ab.families, ba.families, strict=True):
        for x, y in zip(fa.comparisons, fb.comparisons, strict=True):
            cx, cy = x.comparison, y.comparison
            assert (cx.episodes.only_a, cx.episodes.only_b) == (cy.episodes.only_b, cy.episodes.only_a)
            assert (cx.test.n_positive, cx.test.n_negative) == (cy.test.n_negative, cy.test.n_positive)
            assert cx.test.pvalue == cy.test.pvalue
            assert cx.difference.estimate == pytest.approx(-(cy.difference.estimate or 0.0))


def test_a_new_run_records_the_seed_rule_and_pairs_share_their_seeds(trusting: Path) -> None:
    directory = RunDirectory(trusting)
    assert directory.read_manifest().seed_rule is SeedRule.TASK_REPEAT
    seeds: dict[tuple[str, int], set[int]] = {}
    for record in directory.read_episodes():
        seeds.setdefault((record.task_id, record.repeat), set()).add(record.episode_seed)
    assert len(seeds) == 3 * 2 and all(len(found) == 1 for found in seeds.values())
    assert (
        "| episode seed rule | from (run seed, task, repeat): both episodes of every pair share"
        in (trusting / BENCHMARK_REPORT).read_text()
    )


def test_report_of_a_run_whose_last_record_was_overwritten_names_the_line_and_writes_nothing(tmp_path: Path) -> None:
    """A complete run whose last record was overwritten with bytes that do not parse, newline kept: the line was
    dropped as torn, so the report covered one episode fewer. No kill leaves a newline after a torn line, so it is a
    malformed line, named (exit 2), and nothing is written."""
    path = runs.copy_run(runs.oracle_pair_run(), tmp_path)
    raw = path / RAW_RUNS
    lines = raw.read_bytes().splitlines(keepends=True)
    raw.write_bytes(b"".join(lines[:-1]) + b"\xff\xfe\x00\x01\n")
    before = {name: (path / name).read_bytes() for name in (BENCHMARK_REPORT, AGGREGATE_METRICS, MANIFEST)}
    for write in ([], ["--write"]):
        result = cli.invoke(app, ["report", path.name, *write, "--results-dir", str(tmp_path)])
        assert result.exit_code == 2, result.output
        assert f"raw_runs.jsonl: line {len(lines)} is not valid JSON" in " ".join(result.stderr.split())
    assert {name: (path / name).read_bytes() for name in before} == before


def test_report_of_a_complete_run_edited_to_say_running_still_warns_and_will_not_reseal_it(tmp_path: Path) -> None:
    """The status flipped back to running (a note instead of the seal's warning) with a verdict edited as well."""
    path = runs.copy_run(runs.oracle_pair_run(), tmp_path)
    raw = path / RAW_RUNS
    lines = raw.read_text().splitlines(keepends=True)
    record = json.loads(lines[0])
    record["verdict"]["success"] = not record["verdict"]["success"]
    lines[0] = json.dumps(record, separators=(",", ":"), sort_keys=True) + "\n"
    raw.write_text("".join(lines))
    manifest = json.loads((path / MANIFEST).read_text())
    manifest["status"] = "running"
    (path / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    result = cli.invoke(app, ["report", path.name, "--results-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    message = " ".join(result.stderr.split())
    assert f"run {path.name} was changed after its run" in message, message
    before = {name: (path / name).read_bytes() for name in (BENCHMARK_REPORT, AGGREGATE_METRICS, MANIFEST)}
    result = cli.invoke(app, ["report", path.name, "--write", "--results-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert {name: (path / name).read_bytes() for name in before} == before


def test_compare_warns_when_a_run_was_changed_after_its_run(tmp_path: Path, trusting: Path) -> None:
    base = runs.copy_run(trusting, tmp_path)
    edited = runs.copy_run(runs.oracle_pair_run(), tmp_path)
    raw = edited / RAW_RUNS
    lines = raw.read_text().splitlines(keepends=True)
    raw.write_text("".join(lines[:-1]))  # the last episode cut away
    result = cli.invoke(app, ["compare", edited.name, base.name, "--results-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    message = " ".join(result.stderr.split())
    assert f"warning: run {edited.name} was changed after its run" in message
    assert "the comparison comes from the changed files" in message and f"run {base.name} was" not in message


def test_compare_prints_percentages_at_the_precision_its_resampling_justifies(trusting: Path) -> None:
    from contextdelta.report._compare import comparison_table
    from contextdelta.stats import printed_decimals

    a, b = RunDirectory(runs.oracle_pair_run()), RunDirectory(trusting)
    report = compare_runs(a.read_manifest(), a.read_episodes(), b.read_manifest(), b.read_episodes())
    errors = [
        e.mc_se
        for f in report.families
        for r in f.comparisons
        for e in (r.rate_a, r.rate_b, r.comparison.difference)
        if e.mc_se is not None
    ]
    assert report.rate_decimals == printed_decimals(max(errors) if errors else None)
    _, cells = comparison_table(report.families[0], report.rate_decimals)
    for cell, row in zip(cells, report.families[0].comparisons, strict=True):
        # each rate with its counts: k of the n episodes with a value, then the percentage
        for text, rate in ((cell[1], row.rate_a), (cell[2], row.rate_b)):
            assert rate.estimate is not None
            k = round(rate.estimate * rate.n_episodes)
            assert text.startswith(f"{k}/{rate.n_episodes} = ") and k == pytest.approx(rate.estimate * rate.n_episodes)
        numbers = re.findall(r"[-+]?\d+(?:\.\d+)?", cell[1].split(" = ")[1] + cell[3])
        assert all(
            len(n.split(".")[1]) == report.rate_decimals if "." in n else report.rate_decimals == 0 for n in numbers
        )


def test_report_export_and_replay_of_a_killed_run_edited_since_warn(tmp_path: Path) -> None:
    """A run killed mid-way (status running, never resumed) whose recorded verdict was then flipped: report, export
    and replay showed the edited numbers without a word (only a complete run's seal was checked), while verify named
    the edit. Now they warn as for a complete run; the same killed run unedited gets no warning."""
    path = runs.copy_run(runs.oracle_pair_run(), tmp_path)
    directory = RunDirectory(path)
    for name in (RAW_RUNS, RAW_RUNS_RECEIPTS):  # the last episode not recorded yet
        lines = (path / name).read_bytes().splitlines(keepends=True)
        (path / name).write_bytes(b"".join(lines[:-1]))
    directory.write_manifest(directory.read_manifest().model_copy(update={"status": RunStatus.RUNNING}))
    commands = [
        ["report", path.name],
        ["export", path.name, "--format", "inspect", "--out", str(tmp_path / "log.json"), "--overwrite"],
        ["replay", path.name],
    ]
    for command in commands:
        result = cli.invoke(app, [*command, "--results-dir", str(tmp_path)])
        assert result.exit_code == 0, result.output
        assert "was changed after its run" not in result.stderr, (command, result.stderr)
    raw = path / RAW_RUNS
    lines = raw.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[0])
    record["verdict"]["success"] = not record["verdict"]["success"]
    raw.write_bytes(canonical_json(record).encode() + b"\n" + b"".join(lines[1:]))
    for command in commands:
        result = cli.invoke(app, [*command, "--results-dir", str(tmp_path)])
        assert result.exit_code == 0, result.output
        said = " ".join(result.stderr.split())
        assert f"run {record['run_group_id']} was changed after its run" in said, (command, said)
        assert "verdict.success" in said, (command, said)


@pytest.mark.parametrize("fails", ["report", "seal"])
def test_report_write_on_a_full_disk_is_a_named_error_and_a_second_try_restores_the_seal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: str
) -> None:
    """The disk fills while `report --write --resamples N` rewrites the reports (or reseals the manifest after
    them): a traceback before. Now exit 1, one line naming the file and saying that the seal will not match the
    rewritten files until the same command succeeds; once there is room it does, and the run verifies MATCH."""
    import errno

    from contextdelta.rundir import RunDirectory
    from contextdelta.verify import verify_run

    path = runs.copy_run(runs.oracle_pair_run(), tmp_path)
    target = path / (BENCHMARK_REPORT if fails == "report" else MANIFEST)
    real = RunDirectory.reseal_files

    def full(self: RunDirectory) -> bool:
        raise OSError(errno.ENOSPC, "No space left on device", str(target))

    args = ["report", path.name, "--write", "--resamples", "300", "--results-dir", str(tmp_path)]
    with monkeypatch.context() as patch:
        if fails == "report":
            import contextdelta.report as report_package

            patch.setattr(report_package, "write_report_files", lambda directory, report: full(directory))
        else:
            patch.setattr(RunDirectory, "reseal_files", full)
        result = cli.invoke(app, args)
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    message = " ".join(result.stderr.split())
    assert message.startswith(
        f"error: cannot write the reports of run {path.name}: No space left on device: {target};"
    ), message
    assert f"run `contextdelta report {path.name} --write --resamples 300` again once there is room" in message
    assert RunDirectory.reseal_files is real
    again = cli.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert verify_run(path).lines() == ["MATCH"]
