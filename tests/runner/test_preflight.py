"""run-benchmark (and --resume, run-external, serve-world) runs every validate-tasks check of the suite before it
creates anything: a suite validate-tasks rejects is refused with exit 2, each problem listed, nothing written; the
endpoint is still checked first. ``--allow-unlocked`` lets a task author run a suite whose SUITE.lock is missing or
stale, and says so in the manifest and at the top of the report."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.rundir import RunDirectory
from contextdelta.tasks import LOCK_NAME, load_directory, render_lock
from contextdelta.validation import validate_suite
from tests.runner.conftest import TASKS

runner = CliRunner()
TASK = "order-grinder-refund"
SOURCE = TASKS / "order" / f"{TASK}.yaml"


def suite(root: Path, edit: Callable[[str], str] = lambda text: text, *, lock: str = "edited") -> Path:
    """A one-task suite under ``root``: the grinder task with ``edit`` applied, with a SUITE.lock of the task as
    edited (``lock="edited"``), of the task before the edit (``"original"``), or none (``"none"``)."""
    folder = root / "suite"
    (folder / "order").mkdir(parents=True)
    (folder / "order" / f"{TASK}.yaml").write_text(edit(SOURCE.read_text()))
    if lock != "none":
        loaded, _ = load_directory(folder if lock == "edited" else TASKS)
        (folder / LOCK_NAME).write_text(render_lock([t.task for t in loaded if t.task.id == TASK]))
    return folder


def _first(old: str, new: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)

    return edit


def _null_agent(text: str) -> str:
    """Nothing asked of the agent: the one predicate holds at the start and nothing must stay untouched."""
    start, end = text.index("  expected_end_state:\n"), text.index("  unchanged:")
    kept = "  expected_end_state:\n    - {resource: order/order/A-1017, field: status, op: eq, value: shipped}\n"
    text = text[:start] + kept + text[end:]
    return _first("  unchanged: [order/order/A-0988, order/order/A-1055, order/order/A-1049]", "  unchanged: []")(text)


BROKEN: dict[str, tuple[Callable[[str], str], str]] = {
    "a hidden mutation through a tool that does not exist": (
        _first("      tool:\n        name: issue_refund\n", "      tool:\n        name: refund_everything\n"),
        "edited",
    ),
    "a predicate on a resource that does not exist": (
        _first("{resource: order/order/A-1017, field: status", "{resource: order/order/Z-9999, field: status"),
        "edited",
    ),
    "a reference solution that fails its own task": (
        _first(
            'args: {order_id: A-1042, text: "Cracked grinder hopper',
            'args: {order_id: A-1017, text: "Cracked grinder hopper',
        ),
        "edited",
    ),
    "a null agent that passes": (_null_agent, "edited"),
    "a quoted number": (_first("max_steps: 22", 'max_steps: "22"'), "none"),
    "an edit without a version bump": (_first("title: Damaged grinder", "title: Broken grinder"), "original"),
}


def run_args(url: str, tasks: Path, results: Path, *extra: str) -> list[str]:
    return [
        "run-benchmark",
        "--tasks",
        str(tasks),
        "--base-url",
        url,
        "--model",
        "scripted-oracle",
        "--results-dir",
        str(results),
        "--strategies",
        "full_history",
        "--protection-modes",
        "unprotected",
        "--repeats",
        "1",
        "--quiet",
        *extra,
    ]


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_suite_validate_tasks_rejects_is_refused_before_anything_is_written(
    case: str, oracle_url: str, tmp_path: Path
) -> None:
    edit, lock = BROKEN[case]
    tasks = suite(tmp_path, edit, lock=lock)
    report = validate_suite(tasks)
    assert not report.ok and report.problems, case
    validated = runner.invoke(app, ["validate-tasks", "--tasks", str(tasks)])
    assert validated.exit_code == 1
    results = tmp_path / "results"
    result = runner.invoke(app, run_args(oracle_url, tasks, results))
    assert result.exit_code == 2, (case, result.output)
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert not results.exists()  # no run directory, no trace store
    for problem in report.problems:  # each problem validate-tasks found (a lock's with its file in the suite)
        assert " ".join(problem.message.split()) in result.stderr, (case, problem.render(), result.stderr)
        assert Path(problem.file).name in result.stderr


def test_an_empty_suite_is_refused(oracle_url: str, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = runner.invoke(app, run_args(oracle_url, tmp_path / "empty", tmp_path / "results"))
    assert result.exit_code == 2 and "no task files" in result.stderr
    assert not (tmp_path / "results").exists()


def test_the_suite_flags_and_results_folder_are_checked_before_the_endpoint_in_one_message(tmp_path: Path) -> None:
    """With a broken task folder and no endpoint running, the endpoint's error came first (and alone): now everything
    that needs no network is checked first, and one refusal names every problem it found."""
    edit, lock = BROKEN["a predicate on a resource that does not exist"]
    tasks = suite(tmp_path, edit, lock=lock)
    results = tmp_path / "results"
    results.write_text("a file where the results folder belongs")
    args = run_args("http://127.0.0.1:9/v1", tasks, results, "--controls", "no_such_control", "--executor", "nope")
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and result.stdout == ""
    message = " ".join(result.stderr.split())
    assert "error: 4 problems; nothing was run:" in message
    assert "- --controls: unknown control condition 'no_such_control'" in message
    assert f"- --results-dir {results} is not a folder" in message
    assert "does not pass validate-tasks (1 problem)" in message and "Z-9999" in message
    assert "- --executor 'nope': choose from local, ray" in message
    assert "cannot reach" not in message and "check --base-url" not in message
    assert results.read_text() == "a file where the results folder belongs"


def test_a_broken_suite_alone_is_named_before_the_endpoint(tmp_path: Path) -> None:
    edit, lock = BROKEN["a predicate on a resource that does not exist"]
    tasks = suite(tmp_path, edit, lock=lock)
    result = runner.invoke(app, run_args("http://127.0.0.1:9/v1", tasks, tmp_path / "results"))
    assert result.exit_code == 2
    assert "does not pass validate-tasks (1 problem)" in result.stderr and "Z-9999" in result.stderr
    assert "cannot reach" not in result.stderr and "problems; nothing was run" not in result.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_an_unlocked_suite_needs_allow_unlocked_which_the_manifest_and_report_record(
    oracle_url: str, tmp_path: Path
) -> None:
    tasks = suite(tmp_path, lock="none")
    results = tmp_path / "results"
    refused = runner.invoke(app, run_args(oracle_url, tasks, results, "--no-store"))
    assert refused.exit_code == 2 and "is not locked" in refused.stderr and "--allow-unlocked" in refused.stderr
    assert f"{LOCK_NAME}: missing" in refused.stderr
    assert not results.exists()
    ran = runner.invoke(app, run_args(oracle_url, tasks, results, "--no-store", "--allow-unlocked"))
    assert ran.exit_code == 0, ran.output
    path = Path(ran.stdout.strip().splitlines()[-1])
    manifest = RunDirectory(path).read_manifest()
    assert manifest.unlocked is not None and manifest.unlocked.problems == [
        f"{LOCK_NAME}: missing (the suite's tasks are not locked)"
    ]
    report = (path / "benchmark_report.md").read_text().splitlines()
    assert report[2].startswith("**Unlocked suite** (`--allow-unlocked`)"), report[:4]
    assert runner.invoke(app, ["verify", str(path)]).stdout == "MATCH\n"
    # a resume keeps the recorded escape hatch; a locked suite's run records none
    again = runner.invoke(
        app,
        [
            "run-benchmark",
            "--resume",
            str(path),
            "--base-url",
            oracle_url,
            "--model",
            "scripted-oracle",
            "--quiet",
            "--no-store",
        ],
    )
    assert again.exit_code == 0, again.output
    locked = runner.invoke(app, run_args(oracle_url, TASKS, results, "--no-store", "--task-ids", TASK))
    assert locked.exit_code == 0
    assert RunDirectory(Path(locked.stdout.strip().splitlines()[-1])).read_manifest().unlocked is None


def test_a_stale_lock_with_allow_unlocked_records_what_was_accepted(oracle_url: str, tmp_path: Path) -> None:
    edit, lock = BROKEN["an edit without a version bump"]
    tasks = suite(tmp_path, edit, lock=lock)
    ran = runner.invoke(app, run_args(oracle_url, tasks, tmp_path / "results", "--no-store", "--allow-unlocked"))
    assert ran.exit_code == 0, ran.output
    manifest = json.loads((Path(ran.stdout.strip().splitlines()[-1]) / "run_manifest.json").read_text())
    [problem] = manifest["unlocked"]["problems"]
    assert problem.startswith(f"order/{TASK}.yaml: version: content hash changed since SUITE.lock")
    assert str(tmp_path) not in problem  # no absolute path enters the run directory


@pytest.mark.slow
def test_resume_runs_the_suite_checks_again(oracle_url: str, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    shutil.copytree(TASKS, tasks, ignore=shutil.ignore_patterns("horizon"))
    results = tmp_path / "results"
    first = runner.invoke(app, run_args(oracle_url, tasks, results, "--no-store", "--task-ids", TASK, "--limit", "1"))
    assert first.exit_code == 0, first.output
    path = Path(first.stdout.strip().splitlines()[-1])
    broken = tasks / "config" / "cfg-search-ramp.yaml"  # a task the run does not even run
    broken.write_text(broken.read_text().replace("max_steps:", "max_steps: 1\n  max_steps_again:", 1))
    again = runner.invoke(
        app,
        [
            "run-benchmark",
            "--resume",
            str(path),
            "--base-url",
            oracle_url,
            "--model",
            "scripted-oracle",
            "--quiet",
            "--no-store",
        ],
    )
    assert again.exit_code == 2, again.output
    assert "does not pass validate-tasks" in again.stderr and "cfg-search-ramp.yaml" in again.stderr


def test_run_external_and_serve_world_run_the_same_checks(tmp_path: Path) -> None:
    edit, lock = BROKEN["a predicate on a resource that does not exist"]
    tasks = suite(tmp_path, edit, lock=lock)
    results = tmp_path / "results"
    for args in (
        ["run-external", "--agent-cmd", "true", "--tasks", str(tasks), "--results-dir", str(results), "--no-store"],
        ["serve-world", "--task", TASK, "--mode", "unprotected", "--tasks", str(tasks), "--results-dir", str(results)],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args[0], result.output)
        assert "does not pass validate-tasks" in result.stderr and "Z-9999" in result.stderr
    assert not results.exists()


def test_a_summary_model_the_endpoint_does_not_serve_is_refused_before_anything_runs(tmp_path: Path) -> None:
    """The endpoint check asks for the agent's model only: without this, every semantic_summary episode ran up to its
    first summary (agent calls and their cost spent) and ended there as a failed trial."""
    from tests.providers.conftest import RawEndpoint

    refusal = json.dumps({"error": {"message": "The model `nosuch` does not exist", "code": "model_not_found"}})
    results = tmp_path / "results"
    with RawEndpoint([refusal.encode()], status=404) as endpoint:
        result = runner.invoke(
            app,
            [
                "run-benchmark", "--tasks", str(TASKS), "--task-ids", TASK, "--strategies", "semantic_summary",
                "--protection-modes", "unprotected", "--repeats", "1", "--base-url", endpoint.base_url,
                "--model", "raw", "--summary-model", "nosuch", "--results-dir", str(results),
            ],
        )  # fmt: skip
        assert endpoint.requests == 1  # the summary model's check, and no episode
    assert result.exit_code == 2, result.output
    assert "refused a chat completion for summary model 'nosuch' (HTTP 404" in result.stderr
    assert "check --summary-model / CONTEXTDELTA_SUMMARY_MODEL" in result.stderr
    assert not results.exists() or not any(p.is_dir() for p in results.iterdir())


def test_a_summary_model_apart_from_the_agents_passes_the_check_on_the_scripted_server(tmp_path: Path) -> None:
    """The scripted server (the smoke-test endpoint) answers the summary model's check, as any real endpoint."""
    from contextdelta.providers import OpenAIProvider
    from contextdelta.testing import serve_scripted

    with serve_scripted("oracle", TASKS, in_process=True) as url:
        provider = OpenAIProvider(base_url=url, model="scripted-oracle", timeout_s=5)

        async def check() -> str | None:
            async with provider:
                return await provider.check_summary_model("another-summary-model")

        assert anyio.run(check) is None


def _damaged(lines: list[str]) -> list[str]:
    """The first task line cut in half: what a truncated file or a half-copied one leaves."""
    at = next(i for i, line in enumerate(lines) if "@" in line and not line.startswith("#"))
    return [*lines[:at], lines[at][: len(lines[at]) // 2] + "\n", *lines[at + 1 :]]


DAMAGED_LOCKS: dict[str, tuple[Callable[[list[str]], list[str]], str]] = {
    "a task line cut in half": (_damaged, "not an 'id@version:sha256' line"),
    "a file cut short": (lambda lines: ["".join(lines)[:-20]], "the last line has no newline: the file was cut short"),
    "a generator record that is not JSON": (
        lambda lines: ["generator: {not json}\n", *lines],
        "generator: not JSON",
    ),
    "a generator record of the wrong type": (
        lambda lines: ["generator: [1, 2]\n", *lines],
        "generator: not a JSON object (a list)",
    ),
    "a YAML document instead of the lock": (
        lambda lines: ["tasks:\n", "  - order-grinder-refund\n"],
        "not an 'id@version:sha256' line",
    ),
}


@pytest.mark.parametrize("case", sorted(DAMAGED_LOCKS))
def test_a_damaged_lock_is_refused_even_with_allow_unlocked(case: str, oracle_url: str, tmp_path: Path) -> None:
    """--allow-unlocked runs tasks that do not match their lock; a lock that cannot be read as one (cut short,
    garbled, a generator record of the wrong type) is refused by run-benchmark, validate-tasks and --write-lock
    alike, naming the file, the line and what is wrong, and nothing is written."""
    damage, why = DAMAGED_LOCKS[case]
    tasks = suite(tmp_path)
    lock = tasks / LOCK_NAME
    lock.write_text("".join(damage(lock.read_text().splitlines(keepends=True))))
    before = lock.read_bytes()
    results = tmp_path / "results"
    result = runner.invoke(app, run_args(oracle_url, tasks, results, "--no-store", "--allow-unlocked"))
    assert result.exit_code == 2, (case, result.output)
    said = " ".join(result.stderr.split())
    assert f"has a {LOCK_NAME} that cannot be read as a lock" in said, said
    assert "--allow-unlocked runs tasks that do not match a lock, never a lock that cannot be read" in said
    assert f"{LOCK_NAME}:" in said and why in said, said
    assert not results.exists()
    for args in ([], ["--write-lock"]):
        validated = runner.invoke(app, ["validate-tasks", "--tasks", str(tasks), *args])
        assert validated.exit_code == 1, (case, args, validated.output)
        shown = " ".join(validated.output.split())
        assert why in shown and "cannot be read as a lock" in shown, shown
    assert lock.read_bytes() == before  # --write-lock did not regenerate over it
