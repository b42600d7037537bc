"""The scripted server loads its tasks as run-benchmark does (one function, ``validation.runnable_suite``): a task
file that loads but fails a ``validate-tasks`` semantic check (a predicate on a resource that does not exist, a
reference solution that fails its own task) is refused, with the problems run-benchmark lists, so no test runs
against a task a run would refuse; a suite without a SUITE.lock is served (as ``--allow-unlocked`` runs it), a
damaged lock is not."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from contextdelta.runner import BenchmarkError
from contextdelta.runner.prepare import preflight_suite
from contextdelta.tasks import LOCK_NAME, resolve_suite
from contextdelta.testing import ScriptedServer, load_task_files
from tests.testing.episode_loop import FIXTURES

EDITS = {
    "a predicate on a resource that does not exist": (
        "{resource: order/order/A-1001, field: refunded_cents",
        "{resource: order/order/Z-9999, field: refunded_cents",
    ),
    "a reference solution that fails its own task": (
        'text: "Mug refund of 1500 cents was already issued by billing."}}',
        'text: "Mug refund of 1500 cents was already issued by billing."}}\n'
        "    - {tool: add_order_note, args: {order_id: A-1001, text: a second note}}",
    ),
}


def _suite(tmp_path: Path, old: str, new: str) -> Path:
    folder = tmp_path / "tasks"
    shutil.copytree(FIXTURES, folder)
    path = folder / "order" / "fixture-mug-refund.yaml"
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return folder


@pytest.mark.parametrize("case", sorted(EDITS))
def test_the_server_refuses_a_task_validate_tasks_rejects_with_run_benchmarks_problems(
    tmp_path: Path, case: str
) -> None:
    folder = _suite(tmp_path, *EDITS[case])
    with pytest.raises(BenchmarkError) as refused_by_a_run:
        preflight_suite(resolve_suite(str(folder)), allow_unlocked=True)
    problems = [line.strip() for line in str(refused_by_a_run.value).splitlines()[1:]]
    assert problems and all("fixture-mug-refund.yaml" in p for p in problems), problems
    with pytest.raises(ValueError) as refused:
        load_task_files(folder)
    assert "does not pass validate-tasks" in str(refused.value)
    assert all(p in str(refused.value) for p in problems), (problems, str(refused.value))
    with pytest.raises(ValueError, match="does not pass validate-tasks"):
        ScriptedServer("oracle", folder)
    result = subprocess.run(
        [sys.executable, "-m", "contextdelta.testing.server", "--policy", "oracle", "--tasks", str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "ready" not in result.stdout, result.stderr
    assert "does not pass validate-tasks" in result.stderr and problems[0] in " ".join(result.stderr.split())


def test_the_server_serves_an_unlocked_suite_and_refuses_a_damaged_lock(tmp_path: Path) -> None:
    folder = tmp_path / "tasks"
    shutil.copytree(FIXTURES, folder)
    assert not (folder / LOCK_NAME).exists()
    assert [t.id for t in load_task_files(folder)] == ["fixture-mug-refund", "fixture-retry-limit"]
    (folder / LOCK_NAME).write_text("suite_hash: 0\n")
    with pytest.raises(ValueError, match=f"has a {LOCK_NAME} that cannot be read as a lock"):
        load_task_files(folder)
