"""A whole run against an endpoint that misbehaves (over real HTTP): what it sent is recorded as a failed trial or
as an invalid call the world answered, the run directory is written and sealed, and ``verify`` re-derives it."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from contextdelta.rundir import RunDirectory, RunStatus
from contextdelta.runner import run_benchmark
from contextdelta.verify import verify_run
from tests.providers.conftest import RawEndpoint, completion, tool_call
from tests.runner.conftest import SMALL, benchmark_request

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
