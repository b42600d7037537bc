"""run-benchmark: the matrix, the run directory, resume, refusals, budgets and secrets."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.context import STRATEGY_NAMES
from contextdelta.providers import MockProvider
from contextdelta.rundir import SeedRule
from contextdelta.rundir.layout import RAW_RUNS, TASK_RESULTS, TOOL_EVENTS, RunDirectory
from contextdelta.rundir.records import RunStatus
from contextdelta.runner import (
    BenchmarkError,
    BenchmarkRequest,
    EpisodeSpec,
    episode_seed,
    plan_episodes,
    run_benchmark,
)
from contextdelta.testing import serve_scripted
from tests.runner.conftest import SMALL, TASKS, as_killed, benchmark_request


def request(url: str, tmp_path: Path, **overrides: object) -> BenchmarkRequest:
    return benchmark_request(url, tmp_path, **overrides)


def csv_rows(path: Path) -> list[dict[str, str]]:
    with (path / TASK_RESULTS).open(newline="") as handle:
        return list(csv.DictReader(handle))


# ---- the plan ------------------------------------------------------------------------------------------------


def test_plan_is_the_full_matrix_in_a_seeded_shuffled_order() -> None:
    plan = plan_episodes(["a", "b"], ["full_history", "last_n"], ["unprotected", "freshness_contract"], 3, 7)
    assert len(plan) == len(set(plan)) == 24
    assert plan == plan_episodes(["a", "b"], ["full_history", "last_n"], ["unprotected", "freshness_contract"], 3, 7)
    assert plan != sorted(plan)
    assert plan != plan_episodes(["a", "b"], ["full_history", "last_n"], ["unprotected", "freshness_contract"], 3, 8)


def test_both_episodes_of_a_pair_share_their_seed_and_tasks_and_repeats_do_not() -> None:
    """Common random numbers: the seed depends on (run seed, task, repeat) only, so every paired comparison
    (same task and repeat, another strategy or mode) compares episodes sampled with the same seed."""
    specs = [EpisodeSpec(t, s, m, r) for t in ("t", "u") for s in ("a", "b") for m in ("x", "y") for r in (1, 2)]
    by_cell: dict[tuple[str, int], set[int]] = {}
    for spec in specs:
        by_cell.setdefault((spec.task_id, spec.repeat), set()).add(episode_seed(0, spec))
    assert all(len(seeds) == 1 for seeds in by_cell.values())
    assert len({next(iter(seeds)) for seeds in by_cell.values()}) == 4
    assert episode_seed(0, specs[0]) != episode_seed(1, specs[0])
    # the rule of older run directories: one seed per condition
    assert len({episode_seed(0, spec, SeedRule.CONDITION) for spec in specs}) == len(specs)


# ---- a run ---------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_oracle_run_writes_a_complete_directory(oracle_url: str, tmp_path: Path) -> None:
    outcome = run_benchmark(request(oracle_url, tmp_path))
    manifest = outcome.manifest
    assert manifest.status is RunStatus.COMPLETE
    planned = len(SMALL) * len(STRATEGY_NAMES) * 2  # every built-in strategy and mode by default
    assert (manifest.counts.planned, manifest.counts.finished, manifest.counts.failed) == (planned, planned, 0)
    assert manifest.counts.succeeded == planned
    rows = csv_rows(outcome.path)
    assert len(rows) == planned and {r["success"] for r in rows} == {"true"}
    assert {r["conflict_recovery"] for r in rows} == {""}  # N/A: nothing was blocked
    raw = [json.loads(line) for line in (outcome.path / RAW_RUNS).read_text().splitlines()]
    assert sorted(r["run_id"] for r in raw) == sorted(r["run_id"] for r in rows)
    events = (outcome.path / TOOL_EVENTS).read_text().splitlines()
    assert len(events) == sum(int(r["steps"]) - 1 for r in rows)  # one call per step but the final answer
    snapshot = sorted(p.relative_to(outcome.path).as_posix() for p in (outcome.path / "tasks").rglob("*.yaml"))
    assert snapshot == [
        "tasks/calendar/cal-design-review.yaml",
        "tasks/config/cfg-search-ramp.yaml",
        "tasks/order/order-grinder-refund.yaml",
    ]
    assert manifest.provider.model == "scripted-oracle"
    assert len(manifest.hashes.suite_sha256) == 64


@pytest.mark.slow
def test_context_trusting_differs_between_full_history_and_last_n(trusting_url: str, tmp_path: Path) -> None:
    hidden = ["cal-design-review", "cal-retro-slot"]
    outcome = run_benchmark(
        request(
            trusting_url,
            tmp_path,
            model="scripted-context_trusting",
            task_ids=hidden,
            strategies=["full_history", "last_n"],
            protection_modes=["unprotected"],
        )
    )
    stale = {
        s: sum(r.verdict.stale_action_count for r in outcome.records if r.strategy == s)
        for s in ("full_history", "last_n")
    }
    assert stale["full_history"] > stale["last_n"]


def test_clearing_and_trimming_drop_the_earlier_read_that_full_history_keeps(trusting_url: str, tmp_path: Path) -> None:
    """context_trusting skips a read whose resource its context still shows. Under full_history the stale first
    read of the hidden-mutation tasks stays visible (a stale write follows); tool_result_clearing (window 2/1)
    and token_budget_trim drop it, so the policy reads again and writes fresh: the drop is visible in the calls."""
    hidden = ["cal-design-review", "order-desk-cancel"]
    strategies = ["full_history", "tool_result_clearing", "token_budget_trim"]
    outcome = run_benchmark(
        request(
            trusting_url,
            tmp_path,
            model="scripted-context_trusting",
            task_ids=hidden,
            strategies=strategies,
            protection_modes=["unprotected"],
            summary_trigger=2,
            summary_keep=1,
        )
    )
    by = {(r.task_id, r.strategy): r for r in outcome.records}
    for task in hidden:
        full = by[(task, "full_history")]
        assert full.verdict.stale_action_count >= 1, task
        for strategy in strategies[1:]:
            reduced = by[(task, strategy)]
            assert reduced.verdict.stale_action_count == 0 and reduced.verdict.success, (task, strategy)
            assert reduced.trace.totals.tool_calls > full.trace.totals.tool_calls, (task, strategy)
            assert any(step.context.removed for step in reduced.trace.steps), (task, strategy)
    assert outcome.manifest.strategy_params.token_budget == 1200


@pytest.mark.slow
def test_resume_with_a_changed_model_or_task_set_is_refused(oracle_url: str, tmp_path: Path) -> None:
    first = run_benchmark(request(oracle_url, tmp_path, task_ids=SMALL[:1], strategies=["last_n"]))
    run_id = first.path.name
    with pytest.raises(BenchmarkError, match="model: run has 'scripted-oracle', now 'scripted-unsafe'") as err:
        run_benchmark(request(oracle_url, tmp_path, resume=run_id, task_ids=None, model="scripted-unsafe"))
    assert err.value.exit_code == 2
    edited = tmp_path / "tasks"
    subprocess.run(["cp", "-r", str(TASKS), str(edited)], check=True)
    task_file = edited / "order" / f"{SMALL[0]}.yaml"
    text = task_file.read_text()
    assert "\nversion: 1\n" in text
    task_file.write_text(text.replace("\nversion: 1\n", "\nversion: 2\n", 1))
    # the preflight refuses the stale lock first; a task author's --allow-unlocked then meets resume's comparison
    with pytest.raises(BenchmarkError, match="is not locked"):
        run_benchmark(request(oracle_url, tmp_path, resume=run_id, task_ids=None, tasks_dir=edited))
    with pytest.raises(BenchmarkError, match="task set"):
        run_benchmark(
            request(oracle_url, tmp_path, resume=run_id, task_ids=None, tasks_dir=edited, allow_unlocked=True)
        )
    with pytest.raises(BenchmarkError, match="--repeats: run has 1, now 2"):
        run_benchmark(request(oracle_url, tmp_path, resume=run_id, task_ids=None, repeats=2))
    task_file.unlink()  # a suite without the run's task: the refusal names the suites, not the other one's task ids
    with pytest.raises(BenchmarkError) as err:
        run_benchmark(
            request(oracle_url, tmp_path, resume=run_id, task_ids=None, tasks_dir=edited, allow_unlocked=True)
        )
    assert err.value.exit_code == 2
    assert err.value.message.startswith(f"cannot resume {run_id}: --tasks: run has suite ")
    said = f"/{edited.parent.name}/tasks', which lacks 1 of the run's 1 tasks ({SMALL[0]}); leave --tasks out"
    assert said in err.value.message
    assert "known:" not in err.value.message


@pytest.mark.slow
def test_resume_recovers_a_torn_line_and_runs_only_missing_episodes(oracle_url: str, tmp_path: Path) -> None:
    first = run_benchmark(request(oracle_url, tmp_path, task_ids=SMALL[:2], strategies=["full_history"]))
    raw = first.path / RAW_RUNS
    lines = raw.read_bytes().splitlines(keepends=True)
    assert len(lines) == 4
    raw.write_bytes(b"".join(lines[:2]) + lines[2][: len(lines[2]) // 2])  # one kept, one torn, one lost
    as_killed(first.path)
    kept = {json.loads(line)["run_id"] for line in lines[:2]}
    second = run_benchmark(request(oracle_url, tmp_path, resume=first.path.name, task_ids=None))
    assert second.manifest.status is RunStatus.COMPLETE
    final = [json.loads(line) for line in raw.read_text().splitlines()]
    assert len(final) == 4 and len({r["run_id"] for r in final}) == 4
    assert [r["run_id"] for r in final[:2]] == [json.loads(line)["run_id"] for line in lines[:2]]
    assert kept <= {r["run_id"] for r in final}
    assert len(csv_rows(first.path)) == 4
    assert [s["resumed"] for s in second.manifest.sessions] == [False, True]


def test_the_in_process_mock_provider_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkError, match="refusing the in-process mock provider") as err:
        run_benchmark(request("http://127.0.0.1:9/v1", tmp_path), provider=MockProvider([]))
    assert err.value.exit_code == 2
    with pytest.raises(BenchmarkError, match="refusing the in-process mock provider"):
        run_benchmark(request("http://127.0.0.1:9/v1", tmp_path, provider="mock"))
    assert list(tmp_path.iterdir()) == []


def test_budget_stop_marks_the_run_incomplete(oracle_url: str, tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"scripted-oracle": {"input_per_mtok": 1000.0, "output_per_mtok": 1000.0}}))
    outcome = run_benchmark(
        request(oracle_url, tmp_path / "results", price_table=prices, max_cost_usd=0.5, concurrency=1)
    )
    manifest = outcome.manifest
    assert manifest.status is RunStatus.INCOMPLETE
    assert manifest.stop_reason is not None and manifest.stop_reason.startswith("budget exhausted")
    assert 0 < manifest.counts.finished < manifest.counts.planned
    assert all(r.cost_usd is not None and r.cost_usd > 0 for r in outcome.records)


@pytest.mark.parametrize("field", ["max_cost_usd", "max_episode_cost_usd"])
@pytest.mark.parametrize("value", [0, -1])
def test_a_zero_or_negative_budget_is_refused(field: str, value: float) -> None:
    """A budget of 0 failed every episode (budget_exceeded before its first call): a budget must be > 0, and no
    flag means no budget."""
    with pytest.raises(ValidationError):
        BenchmarkRequest.model_validate({field: value})


def test_a_budget_without_a_known_price_is_refused(oracle_url: str, tmp_path: Path) -> None:
    with pytest.raises(BenchmarkError, match="needs a known price"):
        run_benchmark(request(oracle_url, tmp_path, model="some-unpriced-model", max_cost_usd=1.0))


def test_unknown_price_gives_empty_cost_never_zero(oracle_url: str, tmp_path: Path) -> None:
    outcome = run_benchmark(
        request(
            oracle_url,
            tmp_path,
            model="unpriced-model",
            task_ids=SMALL[:1],
            strategies=["last_n"],
            protection_modes=["unprotected"],
        )
    )
    assert [r.cost_usd for r in outcome.records] == [None]
    assert csv_rows(outcome.path)[0]["cost_usd"] == ""


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("strategies", ["full_history", "everything"], "--strategies: unknown"),
        ("protection_modes", ["paranoid"], "--protection-modes: unknown"),
        ("summary_trigger", 2, "--summary-keep must not exceed --summary-trigger"),
    ],
)
def test_bad_flags_are_clear_errors(tmp_path: Path, flag: str, value: object, message: str) -> None:
    with pytest.raises(BenchmarkError, match=message):
        run_benchmark(request("http://127.0.0.1:9/v1", tmp_path, **{flag: value}))


def test_unknown_task_ids_are_refused_before_the_endpoint_check(tmp_path: Path) -> None:
    # the task files are checked before the endpoint is contacted: no endpoint answers here, and the ids are named
    with pytest.raises(BenchmarkError, match="--task-ids: unknown task ids"):
        run_benchmark(request("http://127.0.0.1:9/v1", tmp_path, task_ids=["no-such-task"]))
    assert list(tmp_path.iterdir()) == []


# ---- the command line ----------------------------------------------------------------------------------------


def _cli(*args: str, env: dict[str, str] | None = None, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "contextdelta", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        **kwargs,
    )


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_gives_one_row_per_planned_episode(tmp_path: Path) -> None:
    with serve_scripted("oracle", TASKS, latency_ms=40) as url:
        args = [
            "run-benchmark",
            "--tasks",
            str(TASKS),
            "--base-url",
            url,
            "--model",
            "scripted-oracle",
            "--results-dir",
            str(tmp_path),
            "--task-ids",
            ",".join(SMALL),
            "--repeats",
            "2",
            "--strategies",
            "full_history,last_n",
            "--concurrency",
            "2",
            "--quiet",
        ]
        process = _cli(*args)
        deadline = time.monotonic() + 60
        raw: Path | None = None
        while time.monotonic() < deadline:
            found = list(tmp_path.glob(f"*/{RAW_RUNS}"))
            if found and len(found[0].read_bytes().splitlines()) >= 3:
                raw = found[0]
                break
            time.sleep(0.05)
        assert raw is not None, "the run never wrote three episodes"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        run_id = raw.parent.name
        assert RunDirectory(raw.parent).read_manifest().status is RunStatus.RUNNING
        resumed = _cli(
            "run-benchmark",
            "--tasks",
            str(TASKS),
            "--base-url",
            url,
            "--model",
            "scripted-oracle",
            "--results-dir",
            str(tmp_path),
            "--resume",
            run_id,
            "--quiet",
        )
        out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert out.strip().splitlines()[-1] == str(raw.parent)
    rows = csv_rows(raw.parent)
    assert len(rows) == len({r["run_id"] for r in rows}) == 24
    manifest = RunDirectory(raw.parent).read_manifest()
    assert manifest.status is RunStatus.COMPLETE and manifest.counts.finished == 24


SECRET = "sk-test-CONTEXTDELTA-SECRET-9f8e7d"


@pytest.mark.parametrize(
    ("credentials", "fragment"),
    [
        ("http://operator:hunter2-PASSWORD@{host}", "credentials in the URL"),
        ("http://hunter2-PASSWORD@{host}", "credentials in the URL"),
        ("http://{host}?key=hunter2-PASSWORD", "query string"),
        ("http://{host}#hunter2-PASSWORD", "query string or fragment"),
    ],
    ids=["user-password", "user-only", "query", "fragment"],
)
@pytest.mark.parametrize("via", ["flag", "env"])
def test_credentials_in_the_base_url_are_refused(tmp_path: Path, credentials: str, fragment: str, via: str) -> None:
    url = credentials.format(host="127.0.0.1:9/v1")
    flag = ["--base-url", url] if via == "flag" else []
    env = {"CONTEXTDELTA_BASE_URL": url} if via == "env" else {}
    # in process: the refusal is the command's own logic (a subprocess per case costs seconds of imports each);
    # test_cli_refuses_the_mock_provider_with_exit_2 covers the real process boundary
    args = ["run-benchmark", "--tasks", str(TASKS), *flag, "--model", "m", "--results-dir", str(tmp_path / "r")]
    result = CliRunner().invoke(app, [*args, "--quiet"], env=env)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert fragment in result.stderr and "CONTEXTDELTA_BASE_URL" in result.stderr
    assert "hunter2" not in result.output and "Traceback" not in result.output
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_echoed_credentials_are_redacted_everywhere(tmp_path: Path) -> None:
    """An endpoint that quotes the Authorization header back in every reply and in 500 errors: the key (and the
    header) appear in no file of the run directory, the trace store, the reports or the output."""
    database = tmp_path / "store.db"
    with serve_scripted("oracle", TASKS, echo_credentials="all", fail_500="at:3") as url:
        process = _cli(
            "run-benchmark",
            "--tasks",
            str(TASKS),
            "--base-url",
            url,
            "--model",
            "scripted-oracle",
            "--results-dir",
            str(tmp_path / "results"),
            "--database-url",
            f"sqlite:///{database}",
            "--task-ids",
            SMALL[0],
            "--strategies",
            "full_history,semantic_summary",
            "--repeats",
            "1",
            "--quiet",
            env={"CONTEXTDELTA_API_KEY": SECRET},
        )
        out, err = process.communicate(timeout=180)
    assert process.returncode == 0, err
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert database in written and len(written) >= 9
    for path in written:
        data = path.read_bytes()
        assert SECRET.encode() not in data, path
        assert b"Bearer sk-" not in data, path
    raw = next(tmp_path.rglob(RAW_RUNS)).read_text()
    assert "Bearer [REDACTED])" in raw and "(received " in raw
    assert SECRET not in out + err


@pytest.mark.slow
def test_cli_refuses_the_mock_provider_with_exit_2(tmp_path: Path) -> None:
    process = _cli("run-benchmark", "--provider", "mock", "--model", "m", "--results-dir", str(tmp_path), "--quiet")
    _, err = process.communicate(timeout=60)
    assert process.returncode == 2
    assert "refusing the in-process mock provider" in err


def test_an_unreachable_endpoint_is_refused_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkError, match=r"cannot reach http://127\.0\.0\.1:9/v1") as err:
        run_benchmark(request("http://127.0.0.1:9/v1", tmp_path / "results"))
    assert err.value.exit_code == 2
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--strategy-param", "last_n=5"], "--strategy-param 'last_n=5': write NAME.KEY=VALUE"),
        (["--strategy-param", "last_n.size=5"], "strategy 'last_n' has no parameter 'size' (it takes: n)"),
        (["--strategy-param", "keep_all.n=5"], "'keep_all' is not a strategy of this run"),
        (["--strategy-param", "last_n.n=-2"], "strategy 'last_n' rejected its parameters"),
        (["--strategies", "full_history,nothing_like_it"], "unknown strategy 'nothing_like_it'"),
        (["--strategies", "no.such.module:Factory"], "cannot import no.such.module"),
        (["--strategies", "last_n,last_n"], "listed twice"),
    ],
)
def test_bad_strategies_and_parameters_are_refused_before_anything_is_written(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = CliRunner().invoke(
        app,
        [
            "run-benchmark",
            "--tasks", str(TASKS),
            "--strategies", "full_history,last_n",
            "--base-url", "http://127.0.0.1:9/v1",
            "--model", "scripted-oracle",
            "--results-dir", str(tmp_path),
            "--no-store",
            *args,
        ],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_strategy_params_are_recorded_and_resume_refuses_other_ones(oracle_url: str, tmp_path: Path) -> None:
    first = run_benchmark(
        request(
            oracle_url,
            tmp_path,
            task_ids=SMALL[:1],
            strategies=["last_n", "token_budget_trim"],
            protection_modes=["unprotected"],
            strategy_params={"last_n": {"n": 2}, "token_budget_trim": {"budget": 700}},
        )
    )
    manifest = first.manifest
    assert manifest.strategy_params.overrides == {"last_n": {"n": 2}, "token_budget_trim": {"budget": 700}}
    configs = {c.name: c for c in manifest.strategy_configs}
    assert configs["last_n"].factory_params == {"n": 2} and configs["token_budget_trim"].params["budget"] == 700
    assert {r.trace.strategy.params.get("n") for r in first.records if r.strategy == "last_n"} == {2}
    with pytest.raises(BenchmarkError, match="--strategy-param: run has") as err:
        run_benchmark(request(oracle_url, tmp_path, resume=first.path.name, strategy_params={"last_n": {"n": 3}}))
    assert err.value.exit_code == 2


def tool_call_reply(**extra: Any) -> bytes:
    """A chat completion whose one choice calls the tool ``look``, with ``extra`` top-level fields (e.g. usage)."""
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "look", "arguments": "{}"}}],
    }
    return json.dumps({"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}], **extra}).encode()


NO_USAGE_CALL = tool_call_reply()
"""A tool call with no ``usage``: the endpoint does not say what the call cost."""


@pytest.mark.parametrize("budget", ["max_cost_usd", "max_episode_cost_usd"])
def test_a_cost_budget_an_endpoint_without_usage_defeats_is_not_silently_ignored(tmp_path: Path, budget: str) -> None:
    """Without usage every cost is unknown and no budget could ever fire: the run went on as if there were none."""
    from tests.providers.conftest import RawEndpoint

    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"raw": {"input_per_mtok": 1.0, "output_per_mtok": 1.0}}))
    with RawEndpoint([NO_USAGE_CALL]) as endpoint:
        fields: dict[str, Any] = {"model": "raw", "price_table": prices, "concurrency": 1, "workers": 1, "max_steps": 3}
        fields[budget] = 100.0
        outcome = run_benchmark(request(endpoint.base_url, tmp_path / "results", **fields))
    if budget == "max_cost_usd":  # the run stops after the first episode whose cost is unknown
        assert outcome.manifest.status is RunStatus.INCOMPLETE
        assert outcome.manifest.counts.finished == 1
        reason = outcome.manifest.stop_reason or ""
        assert reason.startswith(
            f"--max-cost-usd $100.0 cannot be enforced: {endpoint.base_url} reported no token usage"
        )
    else:  # each episode stops at the first call that reported no usage, as a failed trial
        assert {r.trace.termination.value for r in outcome.records} == {"budget_exceeded"}
        assert all("cannot be enforced" in (r.trace.error or "") for r in outcome.records)


HUGE_USAGE_CALL = tool_call_reply(usage={"prompt_tokens": 2**53, "completion_tokens": 2**53})
"""A tool call whose reported usage alone is far past any budget."""


@pytest.mark.parametrize("workers", [1, 2])
def test_the_run_budget_stops_episodes_already_running(tmp_path: Path, workers: int) -> None:
    """--max-cost-usd was checked only when an episode started: three episodes in flight each went on to their step
    cap at 2.7e10 USD a call and the run ended complete. Now none makes a call once the run's spend reached it."""
    from tests.providers.conftest import RawEndpoint

    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"raw": {"input_per_mtok": 1.0, "output_per_mtok": 1.0}}))
    fields: dict[str, Any] = {"model": "raw", "price_table": prices, "concurrency": 3, "workers": workers}
    with RawEndpoint([HUGE_USAGE_CALL]) as endpoint:
        outcome = run_benchmark(
            request(endpoint.base_url, tmp_path / "results", max_steps=4, max_cost_usd=0.0001, **fields)
        )
    manifest = outcome.manifest
    assert manifest.status is RunStatus.INCOMPLETE
    assert (manifest.stop_reason or "").startswith("budget exhausted")
    assert 0 < len(outcome.records) <= 3 < manifest.counts.planned
    # each episode made at most its first call (none once another's spend was seen), then stopped before its next
    for record in outcome.records:
        assert record.trace.totals.agent_calls <= 1, record.trace.totals
        assert record.trace.termination.value == "budget_exceeded" and record.failed and not record.verdict.success
        assert "reached --max-cost-usd $0.0001" in (record.trace.error or "")
    assert endpoint.requests == sum(r.trace.totals.agent_calls for r in outcome.records) >= 1
