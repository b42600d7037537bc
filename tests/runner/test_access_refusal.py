"""An endpoint that refuses the key, the model or the account mid-run (after earlier calls succeeded), over real HTTP
with the scripted server's ``refuse_from``: no retry and no further episode can get another answer, so the run
stops at once as the cost budget stops it (the episodes in flight finish as failed trials, the manifest says why,
exit 3) and resumes once the key is put right."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.rundir import RAW_RUNS, RunDirectory, RunStatus
from contextdelta.runner import EXIT_INCOMPLETE, run_benchmark
from contextdelta.testing import FaultPlan, ScriptedServer, serve_scripted
from contextdelta.verify import verify_run
from tests.runner.conftest import SMALL, TASKS, benchmark_request

runner = CliRunner()
TWO = {"strategies": ["full_history", "last_n"], "protection_modes": ["unprotected", "freshness_contract"]}
"""12 episodes over SMALL: enough that a run that does not stop at the refusal burns through many of them."""

REFUSED = {
    401: ("refused the API key (HTTP 401)", "set the endpoint's key in CONTEXTDELTA_API_KEY"),
    402: ("refused the call for lack of quota or credit (HTTP 402)", "add credit or raise the quota"),
    403: ("denied the API key permission (HTTP 403)", "use a key that may call model 'scripted-oracle'"),
    404: ("does not serve the model (HTTP 404)", "check --model / --summary-model 'scripted-oracle'"),
    429: ("refused the call for lack of quota or credit (HTTP 429)", "add credit or raise the quota"),
}


@pytest.mark.parametrize("status", sorted(REFUSED))
def test_a_refusal_mid_run_stops_the_run_at_once_and_it_resumes(tmp_path: Path, status: int) -> None:
    what, fix = REFUSED[status]
    with ScriptedServer("oracle", TASKS, faults=FaultPlan(refuse_from=3, refuse_status=status)) as server:
        # retries allowed: a refusal is not retried, a 429 insufficient_quota included
        first = run_benchmark(benchmark_request(server.base_url, tmp_path, max_retries=3, concurrency=1, **TWO))
        manifest = first.manifest
        assert manifest.status is RunStatus.INCOMPLETE
        assert (manifest.counts.finished, manifest.counts.failed, manifest.counts.planned) == (1, 1, 12)
        (failed,) = first.records
        assert failed.trace.termination.value == "provider_error"
        step = failed.trace.steps[-1]
        assert step.step == 3 and step.failed_call is not None
        assert (step.failed_call.status_code, step.failed_call.attempts) == (status, 1)
        assert manifest.stop_reason is not None
        assert manifest.stop_reason.startswith(f"{server.base_url} {what} at step 3 of episode {failed.run_id}")
        assert f"{fix}" in manifest.stop_reason and manifest.stop_reason.endswith("then continue the run with --resume")
        assert server.stats()["requests"] == 3  # two answered calls and the refused one: nothing more was tried

        server.faults = FaultPlan()  # the key is put right
        second = run_benchmark(benchmark_request(server.base_url, tmp_path, resume=str(first.path), retry_failed=True))
    assert second.manifest.status is RunStatus.COMPLETE
    assert (second.manifest.counts.finished, second.manifest.counts.failed) == (12, 0)
    assert verify_run(second.path).ok


def test_episodes_in_flight_finish_as_failed_trials_and_nothing_is_lost(tmp_path: Path) -> None:
    with serve_scripted("oracle", TASKS, in_process=True, refuse_from=5, refuse_status=401) as url:
        outcome = run_benchmark(benchmark_request(url, tmp_path, max_retries=3, concurrency=4, **TWO))
    manifest = outcome.manifest
    assert manifest.status is RunStatus.INCOMPLETE and manifest.stop_reason is not None
    assert "refused the API key (HTTP 401)" in manifest.stop_reason
    # the four started before the refusal came back all finish, each a failed trial of the refusal, and recorded
    assert manifest.counts.finished == manifest.counts.failed == 4 < manifest.counts.planned
    lines = (outcome.path / RAW_RUNS).read_text().splitlines()
    assert len(lines) == 4
    for record in outcome.records:
        failed = record.trace.steps[-1].failed_call
        assert failed is not None and (failed.status_code, failed.refusal) == (401, "key")


def test_the_command_says_the_refusal_on_one_line_and_exits_3(tmp_path: Path) -> None:
    key = "sk-revoked-1234567890abcdef"
    with serve_scripted("oracle", TASKS, in_process=True, refuse_from=2, refuse_status=401) as url:
        args = ["run-benchmark", "--tasks", str(TASKS), "--base-url", url, "--model", "scripted-oracle"]
        args += ["--results-dir", str(tmp_path), "--task-ids", ",".join(SMALL), "--repeats", "1", "--quiet"]
        args += ["--no-store", "--concurrency", "1", "--strategies", "full_history"]
        result = runner.invoke(app, args, env={"CONTEXTDELTA_API_KEY": key})
    assert result.exit_code == EXIT_INCOMPLETE == 3, result.output
    path = result.stdout.strip().splitlines()[-1]
    (line,) = [text for text in result.stderr.splitlines() if "is incomplete:" in text]
    run_id = RunDirectory(Path(path)).read_manifest().run_group_id
    assert line.startswith(f"run {run_id} is incomplete: {url} refused the API key (HTTP 401) at step 2 of episode ")
    assert "set the endpoint's key in CONTEXTDELTA_API_KEY" in line and "then continue the run with --resume" in line
    assert f"Resume it with: contextdelta run-benchmark --resume {path}" in " ".join(result.stderr.split())
    assert key not in result.output
    assert key not in (Path(path) / RAW_RUNS).read_text()
