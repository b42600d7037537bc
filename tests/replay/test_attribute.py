"""``contextdelta attribute``: the failure-atlas classifier's answer per failed episode, on the labelled plumbing
fixture (one episode per failure mode) and on episodes built by hand (scripted model replies, real agent loop)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from contextdelta.agent import run_episode
from contextdelta.cli import app
from contextdelta.context import create_strategy
from contextdelta.grading import grade
from contextdelta.providers import MockProvider
from contextdelta.providers.mock import mock_response
from contextdelta.replay import attribute_records, render_attribution_report
from contextdelta.rundir import RunDirectory
from contextdelta.rundir.records import EpisodeRecord
from contextdelta.tasks.loader import load_directory
from contextdelta.worlds import ProtectionMode
from examples.smoke.mock_pipeline import Fixture, load_fixture, write_run_directory

TASKS = Path(__file__).resolve().parents[2] / "tasks"
runner = CliRunner()


@pytest.fixture(scope="module")
def fixture() -> Fixture:
    return load_fixture()


@pytest.fixture
def results(tmp_path: Path, fixture: Fixture) -> Path:
    return write_run_directory(tmp_path / "results", fixture).parent


@pytest.mark.slow
def test_every_labelled_episode_gets_its_failure_mode(results: Path, fixture: Fixture) -> None:
    modes = {e.failure_mode for e in fixture.episodes}
    assert modes - {None} == {
        "context_dropped_fresh_observation",
        "context_dropped_own_write",
        "summary_distorted_state",
        "never_refreshed",
        "ignored_visible_change",
        "unauthorized_write",
        "end_state_miss",
        "max_steps",
        "provider_error",
    }
    for labelled in fixture.episodes:
        result = runner.invoke(
            app,
            [
                "attribute",
                "mock-pipeline",
                "--run",
                labelled.record.run_id,
                "--format",
                "json",
                "--results-dir",
                str(results),
            ],
        )
        assert result.exit_code == 0, result.output
        found = [a["mode"] for a in json.loads(result.stdout)]
        assert found == ([labelled.failure_mode] if labelled.failure_mode else []), labelled.record.run_id


def test_the_cause_chain_names_the_observation_the_mutation_and_the_context(results: Path) -> None:
    result = runner.invoke(
        app, ["attribute", "mock-pipeline", "--run", "cfg-legacy-cleanup.last_n", "--results-dir", str(results)]
    )
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "failure mode          context_dropped_fresh_observation" in text
    assert (
        "decisive action       step 9 call #8 delete_config on config/setting/prod:legacy.batch_export_enabled "
        "(rejected, at execution v2; prohibited)"
    ) in text
    assert "version 2 (step 4, call #3 get_config, read, via not_sent)" in text
    assert "hidden mutation finance-claims-export-key by finance-data@lumen.dev (after call #0)" in text
    assert "fresher observation: yes · own write: no · summary contradicted it: no" in text
    assert "cause chain\n  1. " in text and "\x1b[" not in text


def test_summary_distortion_names_the_claimed_and_the_observed_version(fixture: Fixture) -> None:
    (attribution,) = attribute_records([fixture.episode("summary_distorted_state")])
    assert attribution.summary_contradicted and attribution.context is not None
    assert attribution.context.summary_claim_version == 1
    assert attribution.latest_observation is not None and attribution.latest_observation.version == 2


def test_the_report_counts_modes_and_skips_successes(fixture: Fixture) -> None:
    text = render_attribution_report([e.record for e in fixture.episodes]).plain
    assert "10 episodes: 1 without a failure, 9 failed" in text
    assert "order-desk-cancel" not in text  # the success has nothing to attribute


# ---- episodes built by hand: scripted replies through the real agent loop, world and graders ----------------------


def _hand_built(
    calls: list[tuple[str, dict[str, object]]],
    strategy: str = "full_history",
    last_n: int = 3,
    mode: ProtectionMode = ProtectionMode.UNPROTECTED,
) -> EpisodeRecord:
    loaded, _ = load_directory(TASKS)
    task = next(t.task for t in loaded if t.task.id == "order-grinder-refund")
    world = task.build_world(mode)
    initial = world.state()
    provider = MockProvider([*(mock_response(tool_calls=[call]) for call in calls), "Done."])
    trace = anyio.run(
        lambda: run_episode(
            task.public_task, world, provider, create_strategy(strategy, last_n=last_n), max_steps=20, seed=0
        )
    )
    verdict = grade(task, trace.tool_events(), trace.mutation_events(), initial, world.state(), trace.final_answer)
    return EpisodeRecord(
        run_group_id="hand-built",
        run_id=f"order-grinder-refund.{strategy}.{mode.value}.r1",
        task_id=task.id,
        task_version=task.version,
        task_hash=task.content_hash,
        world=task.world,
        hazard=task.evaluator.hazard.value,
        strategy=strategy,
        protection_mode=mode.value,
        repeat=1,
        episode_seed=0,
        started_at="2026-01-01T00:00:00Z",
        finished_at="2026-01-01T00:00:01Z",
        wall_s=1.0,
        failed=False,
        cost_usd=None,
        verdict=verdict,
        trace=trace,
    )


READ_A1042 = ("get_order", {"order_id": "A-1042"})
READ_A1017 = ("get_order", {"order_id": "A-1017"})  # the colleague's refund of A-1042 fires after this read
REFUND = ("issue_refund", {"order_id": "A-1042", "amount_cents": 8900, "reason": "Cracked hopper"})


@pytest.mark.slow
@pytest.mark.parametrize(
    ("calls", "strategy", "expected"),
    [
        ([READ_A1042, READ_A1017, REFUND], "full_history", "never_refreshed"),
        ([READ_A1042, READ_A1017, READ_A1042, REFUND], "full_history", "ignored_visible_change"),
        ([READ_A1042, READ_A1017, READ_A1042, READ_A1017, REFUND], "last_n", "context_dropped_fresh_observation"),
        (
            [READ_A1042, READ_A1017, ("add_order_note", {"order_id": "A-1017", "text": "Courier delay reported."})],
            "full_history",
            "end_state_miss",
        ),
    ],
)
def test_hand_built_episodes_are_classified(
    calls: list[tuple[str, dict[str, object]]], strategy: str, expected: str
) -> None:
    record = _hand_built(calls, strategy=strategy, last_n=1)
    (attribution,) = attribute_records([record])
    assert attribution.mode.value == expected, attribution.chain
    if expected != "end_state_miss":
        assert attribution.action is not None and attribution.action.tool == "issue_refund"
        assert attribution.mutation is not None and attribution.mutation.version_after == 2


def test_one_episode_and_one_step_are_singular() -> None:
    """`attribute RUN --run X` ended "1 episodes: ..." and `replay` said "· 1 steps" for an episode that failed at
    its first step."""
    from tests.report.test_power_no_data import all_failed_run

    run = all_failed_run()
    episode = sorted(p.run_id for p in RunDirectory(run).read_episodes())[0]
    attribute = CliRunner().invoke(app, ["attribute", str(run), "--run", episode])
    assert attribute.exit_code == 0, attribute.output
    assert "1 episode: 0 without a failure, 1 failed" in attribute.stdout
    replay = CliRunner().invoke(app, ["replay", str(run), "--run", episode])
    assert replay.exit_code == 0, replay.output
    assert " · 1 step · " in replay.stdout and "1 steps" not in replay.stdout


def test_an_endpoint_error_in_the_cause_chain_is_shown_escaped(results: Path, fixture: Fixture) -> None:
    """The cause chain of a failed trial quotes its error, which an endpoint wrote: a terminal escape there set the
    terminal's title and cleared it, and a lone surrogate (an edited file) crashed the command."""
    raw = results / "mock-pipeline" / "raw_runs.jsonl"
    lines = raw.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    record["failed"] = True
    record["trace"]["termination"] = "provider_error"
    record["trace"]["error"] = "HTTP 500 \x1b]0;TITLE\x07\x1b[2J \u202eevil \ud800"
    lines[0] = json.dumps(record)
    raw.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = runner.invoke(app, ["attribute", "mock-pipeline", "--run", record["run_id"], "--results-dir", str(results)])
    assert done.exit_code == 0, done.output
    assert "provider_error: HTTP 500 \\x1b]0;TITLE\\x07\\x1b[2J \\u202eevil \\ud800" in done.stdout
    assert not any(c in done.stdout for c in "\u202e\x1b\x07")
