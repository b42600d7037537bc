"""A whole run against an endpoint that misbehaves (over real HTTP): what it sent is recorded as a failed trial or
as an invalid call the world answered, the run directory is written and sealed, and ``verify`` re-derives it."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.rundir import RunDirectory, RunStatus
from contextdelta.runner import run_benchmark
from contextdelta.verify import verify_run
from tests.providers.conftest import RawEndpoint, completion, tool_call
from tests.runner.conftest import SMALL, TASKS, benchmark_request

ONE = {"task_ids": [SMALL[0]], "strategies": ["full_history"], "protection_modes": ["unprotected"]}


def test_lone_surrogates_and_arguments_that_are_not_an_object_are_recorded_and_verify(tmp_path: Path) -> None:
    bodies = [tool_call("[]", name="get_order"), completion({"content": "Done \ud800, refunded \udfff."})]
    with RawEndpoint(bodies) as endpoint:
        outcome = run_benchmark(benchmark_request(endpoint.base_url, tmp_path, concurrency=1, **ONE))
    assert outcome.manifest.status is RunStatus.COMPLETE
    (record,) = RunDirectory(outcome.path).read_episodes()
    assert not record.failed and record.trace.final_answer == "Done \ufffd, refunded \ufffd."
    (event,) = record.trace.tool_events()
    assert (event.outcome.value, event.error_code, event.arguments) == ("invalid", "malformed_arguments", "[]")
    assert "must be a JSON object, not an array" in json.loads(event.result)["error"]["message"]
    assert not record.verdict.success  # nothing was refunded
    assert verify_run(outcome.path).ok


def test_a_tool_call_of_the_wrong_shape_is_a_recorded_failed_trial_that_verifies(tmp_path: Path) -> None:
    body = completion({"content": None, "tool_calls": [{"id": "c", "type": "function", "function": ["get_order"]}]})
    with RawEndpoint([body]) as endpoint:
        outcome = run_benchmark(benchmark_request(endpoint.base_url, tmp_path, concurrency=1, max_retries=0, **ONE))
    (record,) = RunDirectory(outcome.path).read_episodes()
    assert record.failed and not record.verdict.success
    assert record.trace.termination.value == "provider_error"
    assert record.trace.error == "the endpoint returned tool_calls[0].function that is an array, not an object"
    assert outcome.all_failed() is not None and verify_run(outcome.path).ok


@pytest.mark.slow
def test_the_usage_of_a_reply_of_the_wrong_shape_is_counted_in_the_failed_trial(tmp_path: Path) -> None:
    # the endpoint answered (and billed) 300 tool calls in one reply: not acted on, but its tokens were spent
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "get_order", "arguments": "{}"}} for i in range(300)
    ]
    body = completion({"content": None, "tool_calls": calls}, usage={"prompt_tokens": 1234, "completion_tokens": 4321})
    with RawEndpoint([body]) as endpoint:
        outcome = run_benchmark(benchmark_request(endpoint.base_url, tmp_path, concurrency=1, max_retries=0, **ONE))
    (record,) = RunDirectory(outcome.path).read_episodes()
    assert record.failed and record.trace.termination.value == "provider_error"
    assert "300 tool calls in one reply" in (record.trace.error or "")
    usage = record.trace.totals.agent_usage
    assert (usage.prompt_tokens, usage.completion_tokens, record.trace.totals.usage_complete) == (1234, 4321, True)
    (row,) = csv.DictReader((outcome.path / "task_results.csv").open(encoding="utf-8"))
    assert (row["agent_prompt_tokens"], row["agent_completion_tokens"]) == ("1234", "4321")
    assert verify_run(outcome.path).ok


@pytest.mark.slow
@pytest.mark.parametrize(
    ("named", "note"),
    [
        ("raw-mini", "2 of 2 model replies named another model than 'scripted-oracle' (--model): 'raw-mini' (2)"),
        ("scripted-oracle-2024-08-06", None),  # a version added: the same model
        ("vendor/Scripted-Oracle:latest", None),  # a vendor prefix and a tag
        ("scripted-oracle-mini", "named another model than 'scripted-oracle' (--model): 'scripted-oracle-mini' (2)"),
        ("scripted-oraclex", "named another model than 'scripted-oracle' (--model): 'scripted-oraclex' (2)"),
    ],
)
def test_replies_that_name_another_model_are_noted(tmp_path: Path, named: str, note: str | None) -> None:
    # a router that falls back to another model measures that model, whatever the manifest says
    calls = tool_call("{}", name="get_order").replace(b'"model": "raw"', f'"model": "{named}"'.encode())
    bodies = [calls, completion({"content": "Done."}, model=named)]
    with RawEndpoint(bodies) as endpoint:
        outcome = run_benchmark(benchmark_request(endpoint.base_url, tmp_path, concurrency=1, **ONE))
    said = outcome.other_models()
    assert (said is None) if note is None else (said is not None and note in said)


@pytest.mark.slow
def test_run_benchmark_prints_the_other_model_as_a_note(tmp_path: Path) -> None:
    bodies = [completion({"content": "Done."}, model="scripted-oracle-mini")]
    args = ["run-benchmark", "--tasks", str(TASKS), "--model", "scripted-oracle", "--task-ids", SMALL[0]]
    args += ["--strategies", "full_history", "--protection-modes", "unprotected", "--repeats", "1", "--quiet"]
    with RawEndpoint(bodies) as endpoint:
        result = CliRunner().invoke(app, [*args, "--base-url", endpoint.base_url, "--results-dir", str(tmp_path)])
    assert result.exit_code == 0, result.stderr
    assert (
        "note: 1 of 1 model reply named another model than 'scripted-oracle' (--model): 'scripted-oracle-mini' (1)"
        in " ".join(result.stderr.split())
    )
