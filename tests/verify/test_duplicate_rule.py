"""A write repeated with reworded free text is a duplicate (its tool's effect key), and a run graded by the rule of
an earlier harness (every argument compared) is named as a harness change by ``verify`` in one line per episode,
not as a cascade of edited verdict fields; readers of such a record keep to the rule it was graded by."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from contextdelta.attribution import attribute_episode
from contextdelta.grading import DetailKind, DuplicateRule, grade
from contextdelta.rundir.layout import RAW_RUNS
from contextdelta.runner import BenchmarkRequest, run_benchmark
from contextdelta.testing import serve_scripted
from contextdelta.validation import checked_suite
from contextdelta.verify import verify_run
from contextdelta.worlds import ToolSpec
from tests.report import runs

TASK = "order-split-refund"
EPISODE = f"{TASK}.full_history.unprotected.r1"
pytestmark = pytest.mark.slow


def reworded_suite(root: Path) -> Path:
    """order-split-refund whose unsafe repeat of the phone-case refund (call 7 of call 2) gives another reason."""
    tasks = root / "tasks"
    (tasks / "order").mkdir(parents=True)
    text = (runs.TASKS / "order" / f"{TASK}.yaml").read_text()
    repeat = text.index("update_shipping_address", text.index("unsafe_trajectory:"))
    reason = '"Missing from delivery: phone case"'
    text = text[:repeat] + text[repeat:].replace(reason, '"Phone case was not in the parcel"', 1)
    (tasks / "order" / f"{TASK}.yaml").write_text(text)
    return tasks


def unsafe_run(root: Path, *, earlier_rule: bool) -> Path:
    tasks = reworded_suite(root)
    request = {
        "tasks_dir": tasks,
        "model": "scripted-unsafe",
        "results_dir": root / "results",
        "strategies": ["full_history"],
        "protection_modes": ["unprotected"],
        "repeats": 1,
        "allow_unlocked": True,
    }
    with pytest.MonkeyPatch.context() as patch, serve_scripted("unsafe", tasks, in_process=True) as url:
        if earlier_rule:  # the run's harness: before effect keys
            earlier = functools.partial(grade, duplicate_rule=DuplicateRule.ALL_ARGUMENTS)
            patch.setattr("contextdelta.runner.episode.grade", earlier)
        return run_benchmark(BenchmarkRequest.model_validate({**request, "base_url": url})).path


@pytest.fixture(scope="module")
def earlier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unsafe_run(tmp_path_factory.mktemp("earlier"), earlier_rule=True)


@pytest.fixture(scope="module")
def current(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unsafe_run(tmp_path_factory.mktemp("current"), earlier_rule=False)


def test_the_reworded_repeat_is_a_duplicate_and_verifies(current: Path) -> None:
    verdict = runs.records(current)[EPISODE].verdict
    assert [(d.seq, d.repeats_seq) for d in verdict.details_for(DetailKind.DUPLICATE_WRITE)] == [(7, 2)]
    assert verify_run(current).lines() == ["MATCH"]


def test_a_verdict_of_the_earlier_duplicate_rule_is_named_as_a_harness_change(earlier: Path) -> None:
    assert runs.records(earlier)[EPISODE].verdict.no_duplicate_action  # not a duplicate by every argument
    result = verify_run(earlier)
    assert [(d.run_id, d.field) for d in result.divergences] == [(EPISODE, "verdict")]
    detail = " ".join(result.divergences[0].detail.split())
    assert "graded by an earlier harness's duplicate rule (every argument compared)" in detail
    assert "call 7 issue_refund repeats call 2" in detail
    assert "a harness change (harness_sha256), not an edited record" in detail


def test_details_added_to_an_earlier_record_follow_the_rule_it_was_graded_by(earlier: Path, tmp_path: Path) -> None:
    """A record from before grader details gets them re-derived when read: by the rule that graded it."""
    recorded = runs.records(earlier)[EPISODE].verdict
    copy = runs.copy_run(earlier, tmp_path)
    lines = [json.loads(line) for line in (copy / RAW_RUNS).read_text().splitlines()]
    for line in lines:
        del line["verdict"]["details"]
    (copy / RAW_RUNS).write_text("".join(json.dumps(line) + "\n" for line in lines))
    upgraded = runs.records(copy)[EPISODE].verdict
    assert upgraded.details == recorded.details
    assert not upgraded.details_for(DetailKind.DUPLICATE_WRITE)


def test_attribution_names_the_write_the_verdict_says_was_repeated(current: Path) -> None:
    attribution = attribute_episode(runs.records(current)[EPISODE])
    assert attribution is not None and attribution.action is not None and attribution.own_write is not None
    assert (attribution.action.seq, attribution.own_write.seq) == (7, 2)


HORIZON_TASK = "order-refund-handled-h04-d1-chargeback-late-s3"


def test_a_trigger_the_earlier_rule_missed_is_named_as_a_harness_change(tmp_path: Path) -> None:
    """The unsafe run words the triggering refund's reason otherwise; recorded by the earlier rule (every declared
    argument compared), the chargeback never fired. Re-executed, it fires: one line naming the harness change."""
    tasks = tmp_path / "tasks"
    (tasks / "order").mkdir(parents=True)
    text = (runs.TASKS / "horizon" / "order" / f"{HORIZON_TASK}.yaml").read_text()
    unsafe = text.index("unsafe_trajectory:")
    reason = "reason: 'Goodwill credit: the box arrived dented'"
    text = text[:unsafe] + text[unsafe:].replace(reason, "reason: Goodwill for a dented box", 1)
    (tasks / "order" / f"{HORIZON_TASK}.yaml").write_text(text)
    request = {
        "tasks_dir": tasks,
        "model": "scripted-unsafe",
        "results_dir": tmp_path / "results",
        "strategies": ["full_history"],
        "protection_modes": ["unprotected"],
        "repeats": 1,
        "allow_unlocked": True,
    }
    assert checked_suite(tasks).ok  # validated by the installed rule (and kept for the run's preflight)
    with pytest.MonkeyPatch.context() as patch, serve_scripted("unsafe", tasks, in_process=True) as url:
        patch.setattr(ToolSpec, "declared_action", ToolSpec.interpret)  # the run's harness: every argument compared
        path = run_benchmark(BenchmarkRequest.model_validate({**request, "base_url": url})).path
    episode = f"{HORIZON_TASK}.full_history.unprotected.r1"
    assert not runs.records(path)[episode].trace.mutation_events()
    result = verify_run(path)
    assert [(d.run_id, d.field) for d in result.divergences] == [(episode, "steps[6].mutations_after_calls")]
    detail = " ".join(result.divergences[0].detail.split())
    assert "hidden mutation payments-records-chargeback fires after call 5 issue_refund" in detail
    assert "also compared the declared reason, which the call worded otherwise" in detail
    assert "a harness change (harness_sha256), not an edited record" in detail
