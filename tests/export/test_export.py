"""contextdelta export: the inspect_ai log of a scripted-server run reads back with inspect_ai (one sample per
episode, the verdicts, metadata and the context of every step intact; failed trials as errors; an external
agent's context unknown, never invented), and the parquet tables load in DuckDB with the documented columns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from inspect_ai.log import read_eval_log
from typer.testing import CliRunner

from contextdelta.agent import TerminationReason, external_strategy
from contextdelta.attribution import attribute_run
from contextdelta.cli import app
from contextdelta.export import TABLES, ExportError, eval_log, export_run
from contextdelta.grading import GraderName
from contextdelta.mcp import WorldEpisode
from contextdelta.rundir import EpisodeRecord, RunDirectory, RunStatus, task_result_values
from contextdelta.runner import EpisodeJob, EpisodeSpec, episode_record
from contextdelta.tasks import load_directory
from contextdelta.tasks.trajectory import resolve_call
from contextdelta.worlds import ProtectionMode, get_world
from tests.report import runs


def records_of(path: Path) -> list[EpisodeRecord]:
    return sorted(RunDirectory(path).read_episodes(), key=lambda r: r.run_id)


@pytest.fixture(scope="module")
def unsafe_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    out = tmp_path_factory.mktemp("inspect") / "unsafe.json"
    export_run(runs.unsafe_run(), "inspect", out)
    return out, read_eval_log(str(out))


@pytest.mark.slow
def test_the_inspect_log_reads_back_with_one_sample_per_episode(unsafe_log: tuple[Path, Any]) -> None:
    _, log = unsafe_log
    records = records_of(runs.unsafe_run())
    assert log.status == "success" and log.version == 2 and log.eval.task == "contextdelta"
    assert log.eval.model == "scripted-unsafe" and log.eval.run_id == runs.unsafe_run().name
    assert len(log.samples) == len(records) == 24
    assert len({(s.id, s.epoch) for s in log.samples}) == 24
    assert [s.metadata["run_id"] for s in log.samples] == [r.run_id for r in records]


def test_the_verdicts_metadata_and_failure_modes_are_intact(unsafe_log: tuple[Path, Any]) -> None:
    _, log = unsafe_log
    records = records_of(runs.unsafe_run())
    modes = {a.run_id: a.mode.value for a in attribute_run(records)}
    for sample, record in zip(log.samples, records, strict=True):
        v = record.verdict
        assert sample.scores["success"].value == (1.0 if v.success and not record.failed else 0.0)
        for grader in GraderName:
            passed = getattr(v, grader.value)
            if passed is None:
                assert grader.value not in sample.scores
            else:
                assert sample.scores[grader.value].value == (1.0 if passed else 0.0)
        failing = [d for d in v.details or [] if d.grader is GraderName.NO_DUPLICATE_ACTION]
        assert len(sample.scores["no_duplicate_action"].metadata["details"]) == len(failing)
        meta = sample.metadata
        assert (meta["strategy"], meta["protection_mode"], meta["hazard"], meta["world"]) == (
            record.strategy,
            record.protection_mode,
            record.hazard,
            record.world,
        )
        assert meta["failure_mode"] == modes.get(record.run_id) and meta["context"] == "recorded"
        assert sample.id == f"{record.task_id}.{record.strategy}.{record.protection_mode}"
        assert sample.epoch == record.repeat
    assert any(s.metadata["failure_mode"] for s in log.samples) and any(
        not s.metadata["failure_mode"] for s in log.samples
    )
    success = next(s for s in log.results.scores if s.name == "success")
    assert success.metrics["mean"].value == pytest.approx(
        sum(r.verdict.success and not r.failed for r in records) / len(records)
    )


def test_each_step_is_a_model_event_whose_input_is_the_context_sent(unsafe_log: tuple[Path, Any]) -> None:
    _, log = unsafe_log
    records = records_of(runs.unsafe_run())
    for sample, record in zip(log.samples, records, strict=True):
        model_events = [e for e in sample.events if e.event == "model" and e.role is None]
        assert [len(e.input) for e in model_events] == [len(s.messages) for s in record.trace.steps]
        for event, step in zip(model_events, record.trace.steps, strict=True):
            assert [m.role for m in event.input] == [m["role"] for m in step.messages]
            for i in step.context.inserted:
                assert "written by the context strategy" in event.input[i].metadata["contextdelta"]
        tools = [e for e in sample.events if e.event == "tool"]
        assert [t.function for t in tools] == [c.name for s in record.trace.steps for c in s.tool_calls]
        mutations = [e for e in sample.events if e.event == "info" and "hidden mutation" in (e.source or "")]
        assert len(mutations) == len(record.trace.mutation_events())
        assert len(sample.messages) == len(record.trace.canonical_history())
    reduced = next(
        s for s, r in zip(log.samples, records, strict=True) if any(st.context.removed for st in r.trace.steps)
    )
    sent = [len(e.input) for e in reduced.events if e.event == "model"]
    assert max(sent) < len(reduced.messages)  # the context sent is not the full history


@pytest.mark.slow
def test_failed_trials_are_errored_samples(tmp_path: Path) -> None:
    path = runs.faulted_run()
    records = records_of(path)
    out = tmp_path / "faulted.json"
    export_run(path, "inspect", out)
    log: Any = read_eval_log(str(out))
    failed = {r.run_id for r in records if r.failed}
    assert failed
    for sample in log.samples:
        if sample.metadata["run_id"] in failed:
            assert sample.error is not None and sample.scores["success"].value == 0.0
            assert sample.metadata["failed_trial"] is True
        else:
            assert sample.error is None


def external_record(tmp_path: Path) -> EpisodeRecord:
    loaded, _ = load_directory(runs.TASKS)
    task = next(t.task for t in loaded if t.task.id == "order-grinder-refund")
    world = task.build_world(ProtectionMode.UNPROTECTED)
    initial = world.state()
    ep = WorldEpisode(task, world, "tester", "streamable-http", 30)
    results: list[str] = []
    for index, call in enumerate(task.evaluator.reference_solution):
        resolved = resolve_call(get_world(task.world), call, results, world.mode, index)
        results.append(ep.call(resolved.tool, resolved.arguments)[0])
    ep.finish("done")
    spec = EpisodeSpec(task.id, external_strategy("tester"), "unprotected", 1)
    job = EpisodeJob("external-run", spec, task, 1, 30)
    return episode_record(job, ep.trace(), initial, world, "2026-01-01T00:00:00Z", 1.0, None)


@pytest.mark.slow
def test_an_external_agents_context_is_unknown_never_invented(tmp_path: Path) -> None:
    record = external_record(tmp_path)
    manifest = RunDirectory(runs.cached_run()).read_manifest()
    out = tmp_path / "external.json"
    out.write_text(json.dumps(eval_log(manifest, [record])))
    log: Any = read_eval_log(str(out))
    (sample,) = log.samples
    assert sample.metadata["context"] == "unknown" and sample.messages == []
    assert not [e for e in sample.events if e.event == "model"]
    assert len([e for e in sample.events if e.event == "tool"]) == len(record.trace.tool_events())
    assert sample.scores["success"].value == 1.0
    rows = list(TABLES[0].rows(manifest, [record]))
    assert rows[0]["context"] == "unknown"
    assert list(next(t for t in TABLES if t.name == "messages").rows(manifest, [record])) == []


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("parquet") / "tables"
    export_run(runs.cached_run(), "parquet", out)
    return out


def test_the_parquet_tables_load_in_duckdb_with_the_documented_columns(tables: Path) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "run-directory.md").read_text()
    db = duckdb.connect()
    for spec in TABLES:
        path = tables / f"{spec.name}.parquet"
        described = db.execute(f"DESCRIBE SELECT * FROM '{path}'").fetchall()
        assert [row[0] for row in described] == [c.name for c in spec.columns], spec.name
        assert f"#### `{spec.name}.parquet`" in doc
        for column in spec.columns:
            assert f"| `{column.name}` | `{column.type_name}` |" in doc
    records = records_of(runs.cached_run())
    episodes = db.execute(f"SELECT run_id, success, cost_usd, steps FROM '{tables / 'episodes.parquet'}' ORDER BY 1")
    expected = [(r.run_id, task_result_values(r)["success"], r.cost_usd, r.trace.step_count) for r in records]
    assert episodes.fetchall() == expected
    counts = {
        name: db.execute(f"SELECT count(*) FROM '{tables / name}.parquet'").fetchall()[0][0]
        for name in ("steps", "messages", "tool_events", "mutations")
    }
    assert counts == {
        "steps": sum(len(r.trace.steps) for r in records),
        "messages": sum(len(s.messages) for r in records for s in r.trace.steps),
        "tool_events": sum(len(r.trace.tool_events()) for r in records),
        "mutations": sum(len(r.trace.mutation_events()) for r in records),
    }
    cached = db.execute(f"SELECT sum(cached_tokens) FROM '{tables / 'steps.parquet'}'").fetchall()[0][0]
    assert cached == sum(r.trace.totals.agent_usage.cached_tokens or 0 for r in records) > 0


def test_export_refuses_an_existing_output_and_the_cli_says_why(tmp_path: Path) -> None:
    out = tmp_path / "log.json"
    out.write_text("keep me")
    with pytest.raises(ExportError, match="already exists"):
        export_run(runs.cached_run(), "inspect", out)
    assert out.read_text() == "keep me"
    result = CliRunner().invoke(
        app,
        ["export", str(runs.cached_run()), "--format", "inspect", "--out", str(out)],
    )
    assert result.exit_code == 2 and "--overwrite" in result.stderr
    result = CliRunner().invoke(
        app,
        ["export", str(runs.cached_run()), "--format", "parquet", "--out", str(tmp_path / "t"), "--overwrite"],
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == sorted(f"{t.name}.parquet" for t in TABLES)


def test_parquet_without_pyarrow_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "pyarrow", None)
    with pytest.raises(ExportError, match=r"contextdelta\[parquet\]"):
        export_run(runs.cached_run(), "parquet", tmp_path / "t")


def test_export_to_a_path_that_cannot_be_written_is_refused_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    out = blocker / "log.json"
    result = CliRunner().invoke(app, ["export", str(runs.cached_run()), "--format", "inspect", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert f"--out {out}:" in " ".join(result.stderr.split()) and "Traceback" not in result.output
    assert blocker.read_text() == "x"


def test_export_of_a_run_changed_after_its_run_warns_and_a_cut_run_is_an_error_log(tmp_path: Path) -> None:
    from tests.report import runs as report_runs

    path = report_runs.copy_run(report_runs.oracle_pair_run(), tmp_path)
    raw = path / "raw_runs.jsonl"
    lines = raw.read_text().splitlines(keepends=True)
    raw.write_text("".join(lines[: len(lines) // 2]))  # the second half of a complete run cut away
    out = tmp_path / "cut.json"
    result = CliRunner().invoke(
        app, ["export", path.name, "--results-dir", str(tmp_path), "--format", "inspect", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert f"warning: run {path.name} was changed after its run" in " ".join(result.stderr.split())
    assert "the export comes from the changed files" in " ".join(result.stderr.split())
    log = json.loads(out.read_text())
    assert log["status"] == "error" and len(log["samples"]) == len(lines) // 2
    assert f"holds {len(lines) // 2} of the {len(lines)} episodes" in log["error"]["message"]
    assert read_eval_log(str(out)).status == "error"  # inspect_ai's own reader takes it


@pytest.mark.parametrize(
    ("fmt", "target"),
    [("inspect", "raw_runs.jsonl"), ("inspect", "tasks/log.json"), ("parquet", "."), ("parquet", "tables")],
)
def test_export_never_writes_into_a_run_directory_even_with_overwrite(tmp_path: Path, fmt: str, target: str) -> None:
    from tests.report import runs as report_runs

    source = report_runs.copy_run(report_runs.oracle_pair_run(), tmp_path)
    other = report_runs.copy_run(report_runs.single_task_run(), tmp_path)
    before = {p: p.read_bytes() for folder in (source, other) for p in sorted(folder.rglob("*")) if p.is_file()}
    for into in (source, other):  # the run exported, and any other run directory
        out = into / target
        result = CliRunner().invoke(
            app,
            ["export", source.name, "--results-dir", str(tmp_path), "--format", fmt, "--out", str(out), "--overwrite"],
        )
        assert result.exit_code == 2, result.output
        said = " ".join(result.stderr.split())
        assert f"--out {out} is inside the run directory {into.resolve()}" in said, said
        assert "give a path outside every run directory" in said
    after = {p: p.read_bytes() for folder in (source, other) for p in sorted(folder.rglob("*")) if p.is_file()}
    assert after == before


def test_an_inspect_export_of_a_lone_surrogate_is_refused_naming_the_sample(tmp_path: Path) -> None:
    from tests.report import runs as report_runs

    path = report_runs.copy_run(report_runs.oracle_pair_run(), tmp_path / "results")
    raw = path / "raw_runs.jsonl"
    lines = raw.read_text().splitlines(keepends=True)
    record = json.loads(lines[0])
    record["trace"]["final_answer"] = "done \ud800"  # json.dumps writes it as the escape "\ud800"
    raw.write_text(json.dumps(record) + "\n" + "".join(lines[1:]))
    out = tmp_path / "log.json"
    result = CliRunner().invoke(
        app, ["export", path.name, "--results-dir", str(path.parent), "--format", "inspect", "--out", str(out)]
    )
    assert result.exit_code == 2, result.output
    said = " ".join(result.stderr.split())
    sample = f"{record['task_id']}.{record['strategy']}.{record['protection_mode']}"
    assert f"sample {sample} of run {path.name} holds a lone UTF-16 surrogate" in said, said
    assert "Traceback" not in result.output
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["results"]  # no partial file left


def test_a_parquet_export_of_a_lone_surrogate_is_refused_before_any_table_is_written(tmp_path: Path) -> None:
    from tests.report import runs as report_runs

    path = report_runs.copy_run(report_runs.oracle_pair_run(), tmp_path / "results")
    raw = path / "raw_runs.jsonl"
    lines = raw.read_text().splitlines(keepends=True)
    record = json.loads(lines[-1])
    record["trace"]["steps"][0]["error"] = "error \udc80"  # the steps table's error column
    raw.write_text("".join(lines[:-1]) + json.dumps(record) + "\n")
    out = tmp_path / "tables"
    result = CliRunner().invoke(
        app, ["export", path.name, "--results-dir", str(path.parent), "--format", "parquet", "--out", str(out)]
    )
    assert result.exit_code == 2, result.output
    said = " ".join(result.stderr.split())
    assert f"(episode {record['run_id']}) of run {path.name} holds a lone UTF-16 surrogate" in said, said
    assert "which parquet cannot hold" in said and "Traceback" not in result.output
    assert not out.exists()  # no table of the export, not even the ones before the damaged one


def test_completed_samples_leave_out_failed_trials_and_an_incomplete_run_says_why(tmp_path: Path) -> None:
    """inspect_ai's ``completed_samples`` counts the samples that finished without an error (its own
    ``recompute_metrics`` counts them so); the export counted every sample, so a run with failed trials read as all
    completed. An incomplete run's log said ``cancelled`` without the reason the run stopped."""
    directory = RunDirectory(runs.unsafe_run())
    records = records_of(runs.unsafe_run())
    trace = records[0].trace.model_copy(update={"termination": TerminationReason.PROVIDER_ERROR, "error": "HTTP 503"})
    records[0] = records[0].model_copy(update={"failed": True, "trace": trace})
    reason = "circuit breaker: 5 consecutive failed trials"
    manifest = directory.read_manifest().model_copy(update={"status": RunStatus.INCOMPLETE, "stop_reason": reason})
    out = tmp_path / "failed.json"
    out.write_text(json.dumps(eval_log(manifest, records)))
    log: Any = read_eval_log(str(out))
    assert log.results.total_samples == len(records) == 24
    assert log.results.completed_samples == sum(s.error is None for s in log.samples) == 23
    assert log.status == "cancelled" and log.eval.metadata["stop_reason"] == reason


def test_an_inspect_export_to_a_folder_is_named_as_inspect_names_its_logs(tmp_path: Path) -> None:
    """`inspect view --log-dir` and inspect_ai.analysis list only JSON logs whose name starts with a timestamp: the
    README's ``--out run.json`` was a log they never showed (evals_df gave an empty table). A folder as --out now
    gets inspect_ai's name; another .json name is written with a note saying so; any other suffix is refused (a
    .eval file held JSON that inspect_ai failed to open as a zip archive)."""
    from inspect_ai.analysis import samples_df
    from inspect_ai.log import list_eval_logs

    run = runs.unsafe_run()
    logs = tmp_path / "logs"
    logs.mkdir()
    result = CliRunner().invoke(app, ["export", str(run), "--format", "inspect", "--out", str(logs)])
    assert result.exit_code == 0, result.output
    (written,) = logs.iterdir()
    assert result.stdout.strip() == str(written)
    assert written.name.endswith(f"_contextdelta_{run.name}.json") and "note:" not in result.stderr
    assert [Path(i.name).name for i in list_eval_logs(str(logs))] == [written.name]
    assert len(samples_df(str(logs))) == 24 and read_eval_log(str(written)).eval.run_id == run.name
    again = CliRunner().invoke(app, ["export", str(run), "--format", "inspect", "--out", str(logs)])
    assert again.exit_code == 2 and "already exists" in again.stderr

    named = CliRunner().invoke(app, ["export", str(run), "--format", "inspect", "--out", str(tmp_path / "run.json")])
    assert named.exit_code == 0 and (tmp_path / "run.json").is_file()
    assert "`inspect view --log-dir`" in " ".join(named.stderr.split())

    missing = CliRunner().invoke(app, ["export", str(run), "--format", "inspect", "--out", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "no such folder" in missing.stderr and not (tmp_path / "nope").exists()
    refused = CliRunner().invoke(app, ["export", str(run), "--format", "inspect", "--out", str(tmp_path / "run.eval")])
    assert refused.exit_code == 2 and not (tmp_path / "run.eval").exists()
    assert f"--out {tmp_path / 'run.eval'}: an inspect export is a JSON log" in " ".join(refused.stderr.split())


def test_each_sample_carries_the_harmful_action_and_the_graders_counts(unsafe_log: tuple[Path, Any]) -> None:
    """The harmful-action indicator (the RQ3 outcome), the graders' counts, the final-answer check and the attempt
    were in task_results.csv and the parquet episodes table but nowhere in the inspect log."""
    _, log = unsafe_log
    records = records_of(runs.unsafe_run())
    columns = ("harmful_action", "stale_action_count", "duplicate_action_count", "prohibited_action_count")
    for sample, record in zip(log.samples, records, strict=True):
        row = task_result_values(record)
        for column in (*columns, "blocked_write_count", "final_answer_facts_ok", "attempt"):
            assert sample.metadata[column] == row[column], column
    assert any(s.metadata["harmful_action"] for s in log.samples)
    assert any(s.metadata["harmful_action"] is False for s in log.samples)


def test_superseded_attempts_are_a_table_of_their_own(tmp_path: Path) -> None:
    """A run resumed with --retry-failed keeps each superseded attempt as a line of raw_runs.jsonl (evidence,
    counted nowhere); the parquet export left them out, so its rows no longer matched the JSONL's lines."""
    from tests.runner.conftest import retried_run

    path, failed = retried_run(tmp_path)
    lines = (path / "raw_runs.jsonl").read_text(encoding="utf-8").splitlines()
    export_run(path, "parquet", tmp_path / "tables")
    con, tables = duckdb.connect(), tmp_path / "tables"
    episodes = con.sql(f"select run_id, attempt, failed from '{tables / 'episodes.parquet'}'").fetchall()
    columns = "run_id, attempt, failed, termination_reason"
    superseded = con.sql(f"select {columns} from '{tables / 'superseded_attempts.parquet'}'").fetchall()
    assert len(episodes) + len(superseded) == len(lines) == len(RunDirectory(path).read_episodes()) + 1
    assert superseded == [(failed.run_id, 1, True, "provider_error")]
    assert (failed.run_id, 2, False) in episodes


def test_the_inspect_log_lists_each_episodes_superseded_attempts(tmp_path: Path) -> None:
    """The inspect log holds the current records; an episode's earlier attempts (why its first try failed) were
    in no sample. Each sample now lists them in metadata.superseded_attempts (counted nowhere)."""
    from tests.runner.conftest import retried_run

    path, failed = retried_run(tmp_path)
    export_run(path, "inspect", tmp_path / "log.json")
    log: Any = read_eval_log(str(tmp_path / "log.json"))
    retried = next(s for s in log.samples if s.metadata["run_id"] == failed.run_id)
    (earlier,) = retried.metadata["superseded_attempts"]
    assert earlier["attempt"] == 1 and earlier["failed_trial"] is True and earlier["termination"] == "provider_error"
    assert earlier["error"] == failed.trace.error and retried.metadata["attempt"] == 2 and retried.error is None
    assert all(s.metadata["superseded_attempts"] == [] for s in log.samples if s is not retried)
    assert len(log.samples) == len(RunDirectory(path).read_episodes())


def test_the_headline_scores_leave_the_control_episodes_out(tmp_path: Path) -> None:
    """A run with --controls no_mutation pooled the control episodes (hidden mutations off, so mostly passes) into
    the log's success mean: 0.625 where the main matrix's was 0.25 in a probe run. The report and the dashboard
    leave them out; the log now does too and gives each control's success on its own."""
    records = records_of(runs.unsafe_run())
    controls = []
    for record in records[:4]:
        verdict = record.verdict.model_copy(update={"success": True})
        run_id = record.run_id.replace(".r", ".no_mutation.r")
        controls.append(record.model_copy(update={"control": "no_mutation", "run_id": run_id, "verdict": verdict}))
    manifest = RunDirectory(runs.unsafe_run()).read_manifest()
    out = tmp_path / "controls.json"
    out.write_text(json.dumps(eval_log(manifest, [*records, *controls])))
    log: Any = read_eval_log(str(out))
    assert len(log.samples) == 28
    scores = {s.name: s for s in log.results.scores}
    main = sum(r.verdict.success and not r.failed for r in records) / len(records)
    assert scores["success"].metrics["mean"].value == pytest.approx(main) and scores["success"].scored_samples == 24
    assert scores["success[no_mutation]"].metrics["mean"].value == 1.0
    assert scores["success[no_mutation]"].scored_samples == 4
    assert "control episodes (no_mutation) left out" in scores["success"].metadata["unit"]


def test_usage_an_endpoint_did_not_report_is_unknown_not_zero(tmp_path: Path) -> None:
    """An episode with a call that reported no token usage has unknown totals (task_results.csv leaves its token
    columns empty); the inspect log gave its partial sums (0 tokens for an endpoint that reports none) as the
    episode's usage and added them into the header's."""
    records = records_of(runs.unsafe_run())
    totals = records[0].trace.totals.model_copy(update={"usage_complete": False})
    records[0] = records[0].model_copy(update={"trace": records[0].trace.model_copy(update={"totals": totals})})
    assert task_result_values(records[0])["agent_prompt_tokens"] is None
    manifest = RunDirectory(runs.unsafe_run()).read_manifest()
    out = tmp_path / "usage.json"
    out.write_text(json.dumps(eval_log(manifest, records)))
    log: Any = read_eval_log(str(out))
    unknown = next(s for s in log.samples if s.metadata["run_id"] == records[0].run_id)
    assert unknown.model_usage == {} and unknown.metadata["usage_complete"] is False
    assert all(s.model_usage and s.metadata["usage_complete"] for s in log.samples if s is not unknown)
    assert log.eval.metadata["usage_unreported_episodes"] == 1
    known = sum(  # the summary model is the agent's model here
        r.trace.totals.agent_usage.prompt_tokens + (r.trace.totals.summary_usage.prompt_tokens or 0)
        for r in records[1:]
    )
    assert log.stats.model_usage[manifest.provider.model].input_tokens == known


def test_an_episode_the_step_limit_ended_is_a_sample_limit(tmp_path: Path) -> None:
    """inspect_ai marks a sample a limit ended (its viewer flags it; samples_df has limit columns); an episode
    that hit the step limit was exported as an ordinary sample, its termination in metadata only."""
    out = tmp_path / "max_steps.json"
    export_run(runs.max_steps_run(), "inspect", out)
    log: Any = read_eval_log(str(out))
    (sample,) = log.samples
    assert sample.metadata["termination"] == "max_steps" and sample.error is None
    assert sample.limit.type == "custom" and sample.limit.limit == 2
    assert sample.limit.reason == "the step limit (2) ended the episode before a final answer"


def test_an_episode_that_answered_carries_no_limit(unsafe_log: tuple[Path, Any]) -> None:
    _, log = unsafe_log
    assert all(s.limit is None for s in log.samples if s.metadata["termination"] != "max_steps")


def test_the_log_tells_inspect_view_to_show_its_content_as_plain_text(unsafe_log: tuple[Path, Any]) -> None:
    """Model replies, tool results and endpoint errors are text a model or an endpoint wrote; inspect view renders
    a log's content richly (markdown images fetched, live links, ANSI colours) unless the log says it is not
    trusted, which the dashboard never does with such text."""
    _, log = unsafe_log
    assert log.eval.viewer is not None and log.eval.viewer.trust_content is False


def test_the_dataset_counts_conditions_and_the_epochs_repeats(tmp_path: Path) -> None:
    """inspect_ai's dataset.samples is the number of dataset samples (here: conditions), each run once per epoch
    (repeat); the export gave the number of episodes, twice the sample ids it listed in a run of 2 repeats."""
    out = tmp_path / "trusting.json"
    export_run(runs.trusting_run(), "inspect", out)
    log: Any = read_eval_log(str(out))
    assert log.eval.config.epochs == 2 and len(log.samples) == 48
    assert log.eval.dataset.samples == len(log.eval.dataset.sample_ids) == 24
