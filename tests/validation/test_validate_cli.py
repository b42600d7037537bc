"""``contextdelta validate-tasks``: every malformed case is reported with file, field and value, exit 1."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from contextdelta.cli import app
from tests.tasks.helpers import BASE_ID, edited, suite_file, task_data, write_task

runner = CliRunner()


def validate(root: Path, *extra: str) -> Result:
    return runner.invoke(app, ["validate-tasks", "--tasks", str(root), *extra])


def assert_fails(result: Result, *fragments: str) -> None:
    """Exit 1, no traceback, and one output line holding every fragment."""
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if all(f in line for f in fragments)]
    assert lines, f"no line with {fragments} in:\n{result.output}"


def test_a_valid_copy_passes(tmp_path: Path) -> None:
    write_task(tmp_path, task_data())
    result = validate(tmp_path)
    assert result.exit_code == 0, result.output
    assert BASE_ID in result.output and "1/1 tasks pass" in result.output
    assert "suite hash: " in result.output


def test_bad_yaml_names_the_line(tmp_path: Path) -> None:
    text = suite_file(BASE_ID).read_text(encoding="utf-8").replace("  max_steps: 22", "  max_steps: [22", 1)
    path = tmp_path / "order" / f"{BASE_ID}.yaml"
    path.parent.mkdir()
    path.write_text(text, encoding="utf-8")
    line = text.splitlines().index("  max_steps: [22") + 1
    result = validate(tmp_path)
    assert_fails(result, f"{path}:", "invalid YAML")
    assert any(f"{path}:{n}:" in result.output for n in (line, line + 1))


def test_duplicate_yaml_keys_are_an_error(tmp_path: Path) -> None:
    text = suite_file(BASE_ID).read_text(encoding="utf-8").replace("version: 1\n", "version: 1\nversion: 2\n", 1)
    path = tmp_path / "order" / f"{BASE_ID}.yaml"
    path.parent.mkdir()
    path.write_text(text, encoding="utf-8")
    assert_fails(validate(tmp_path), f"{path}:", "duplicate key 'version'")


CASES: dict[str, tuple[Callable[[dict[str, Any]], None], tuple[str, ...]]] = {
    "unknown field": (
        lambda d: d["evaluator"].update(colour="teal"),
        ("evaluator.colour", "unknown field", "'teal'"),
    ),
    "wrong type": (
        lambda d: d["evaluator"].update(max_steps="many"),
        ("evaluator.max_steps", "valid integer", "'many'"),
    ),
    "unknown world": (lambda d: d.update(world="warehouse"), ("world", "'warehouse'")),
    "unknown trigger tool": (
        lambda d: d["evaluator"]["hidden_mutations"][0]["trigger"]["after_tool_call"].update(tool="get_ordr"),
        ("evaluator.hidden_mutations.0.trigger.after_tool_call.tool", "unknown tool", "'get_ordr'"),
    ),
    "unknown trigger argument": (
        lambda d: d["evaluator"]["hidden_mutations"][0]["trigger"]["after_tool_call"].update(args={"order": "A-1017"}),
        ("evaluator.hidden_mutations.0.trigger.after_tool_call.args.order", "no such argument"),
    ),
    "unknown observed resource": (
        lambda d: d["evaluator"]["hidden_mutations"][0].update(
            trigger={"after_observation": {"resource": "order/order/Z-9999"}}
        ),
        ("evaluator.hidden_mutations.0.trigger.after_observation.resource", "unknown resource", "'order/order/Z-9999'"),
    ),
    "mutation tool is a read": (
        lambda d: d["evaluator"]["hidden_mutations"][0]["tool"].update(name="get_order"),
        ("evaluator.hidden_mutations.0.tool.name", "not a write tool", "'get_order'"),
    ),
    "predicate unknown resource": (
        lambda d: d["evaluator"]["expected_end_state"][0].update(resource="order/order/A-9999"),
        ("evaluator.expected_end_state.0.resource", "unknown resource", "'order/order/A-9999'"),
    ),
    "predicate unknown field": (
        lambda d: d["evaluator"]["expected_end_state"][0].update(field="shipping_address.zipcode"),
        ("evaluator.expected_end_state.0.field", "has no field 'zipcode'", "'shipping_address.zipcode'"),
    ),
    "unknown unchanged resource": (
        lambda d: d["evaluator"]["unchanged"].append("order/order/A-0000"),
        ("evaluator.unchanged.3", "unknown resource", "'order/order/A-0000'"),
    ),
    "prohibited unknown tool": (
        lambda d: d["evaluator"].update(prohibited_actions=[{"tool": "refund_all", "reason": "no"}]),
        ("evaluator.prohibited_actions.0.tool", "unknown tool", "'refund_all'"),
    ),
    "trajectory unknown tool": (
        lambda d: d["evaluator"]["reference_solution"][0].update(tool="search_orders"),
        ("evaluator.reference_solution.0.tool", "unknown tool", "'search_orders'"),
    ),
    "trajectory bad arguments": (
        lambda d: d["evaluator"]["unsafe_trajectory"][6]["args"].update(amount_cents="lots"),
        ("evaluator.unsafe_trajectory.6.args", "not valid for issue_refund", "amount_cents"),
    ),
    "as_of_call not earlier": (
        lambda d: d["evaluator"]["unsafe_trajectory"][6].update(expected_version={"as_of_call": 6}),
        ("evaluator.unsafe_trajectory.6.expected_version.as_of_call", "earlier call", "6"),
    ),
    "expected_version on a read": (
        lambda d: d["evaluator"]["reference_solution"][1].update(expected_version=3),
        ("evaluator.reference_solution.1.expected_version", "only write calls", "3"),
    ),
    "initial state does not fit the model": (
        lambda d: d["evaluator"]["initial_state"]["order"]["A-1042"].update(status="teleported"),
        ("evaluator.initial_state.order.A-1042", "not a valid order: status", "'teleported'"),
    ),
    "initial state value of the wrong JSON type": (
        lambda d: d["evaluator"]["initial_state"]["order"]["A-1042"].update(total_cents=True),
        ("evaluator.initial_state.order.A-1042", "not a valid order: total_cents", "valid integer", "(got True)"),
    ),
    "initial state number written as text": (
        lambda d: d["evaluator"]["initial_state"]["order"]["A-1042"].update(total_cents="16000"),
        ("evaluator.initial_state.order.A-1042", "total_cents", "(got '16000')"),
    ),
    "trajectory boolean for an integer": (
        lambda d: d["evaluator"]["unsafe_trajectory"][6]["args"].update(amount_cents=True),
        ("evaluator.unsafe_trajectory.6.args", "not valid for issue_refund", "amount_cents", "(got True)"),
    ),
    "trajectory float for an integer": (
        lambda d: d["evaluator"]["unsafe_trajectory"][6]["args"].update(amount_cents=8900.0),
        ("evaluator.unsafe_trajectory.6.args", "not valid for issue_refund", "amount_cents", "(got 8900.0)"),
    ),
    "mutation tool argument of the wrong type": (
        lambda d: d["evaluator"]["hidden_mutations"][0]["tool"]["args"].update(amount_cents="8900"),
        ("evaluator.hidden_mutations.0.tool.args", "not valid for issue_refund", "amount_cents", "(got '8900')"),
    ),
    "short reference": (
        lambda d: d["evaluator"].update(reference_solution=d["evaluator"]["reference_solution"][:5]),
        ("evaluator.reference_solution", "at least 6 tool calls", "5"),
    ),
    "no step headroom": (
        lambda d: d["evaluator"].update(max_steps=8),
        ("evaluator.max_steps", "headroom", "8"),
    ),
    "mutation never executes": (
        lambda d: d["evaluator"]["hidden_mutations"][0]["trigger"]["after_tool_call"].update(n=3),
        ("evaluator.hidden_mutations.0", "did not execute during the reference run", "'colleague-refunds-grinder'"),
    ),
    "reference fails a grader": (
        lambda d: d["evaluator"]["expected_end_state"][0].update(value=17800),
        ("evaluator.reference_solution", "unprotected: fails end_state", "refunded_cents eq 17800"),
    ),
    "unsafe does not fail its grader": (
        lambda d: d["evaluator"].update(unsafe_trajectory=d["evaluator"]["reference_solution"]),
        ("evaluator.unsafe_trajectory", "passes no_stale_action"),
    ),
    "unsafe not blocked under the contract": (
        lambda d: d["evaluator"].update(unsafe_trajectory=d["evaluator"]["reference_solution"]),
        ("evaluator.unsafe_trajectory", "freshness_contract: no write is blocked"),
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_each_malformed_case_is_named(tmp_path: Path, case: str) -> None:
    edit, fragments = CASES[case]
    path = write_task(tmp_path, edited(edit), name=BASE_ID, world="order")
    assert_fails(validate(tmp_path), str(path), *fragments)


def test_unversioned_version_reference_cannot_be_resolved(tmp_path: Path) -> None:
    def drop_first_read(d: dict[str, Any]) -> None:
        d["evaluator"]["unsafe_trajectory"] = [
            {"tool": "issue_refund", "args": {"order_id": "A-1042", "amount_cents": 100, "reason": "x"}},
            *d["evaluator"]["unsafe_trajectory"],
        ]

    path = write_task(tmp_path, edited(drop_first_read))
    assert_fails(validate(tmp_path), str(path), "evaluator.unsafe_trajectory.0.expected_version", "no earlier result")


def test_an_id_that_does_not_match_its_file_name(tmp_path: Path) -> None:
    path = write_task(tmp_path, task_data(), name="refund-for-priya")
    assert_fails(validate(tmp_path), str(path), "id: does not match the file name", f"'{BASE_ID}'")


def test_a_world_that_does_not_match_its_folder(tmp_path: Path) -> None:
    path = write_task(tmp_path, task_data(), world="calendar")
    assert_fails(validate(tmp_path), str(path), "world: does not match the folder 'calendar'", "'order'")


def test_duplicate_ids(tmp_path: Path) -> None:
    write_task(tmp_path, task_data())
    twin = task_data("cal-design-review")
    twin["id"] = BASE_ID
    path = write_task(tmp_path, twin)
    assert_fails(validate(tmp_path), str(path), "id: duplicate id, also defined in", f"'{BASE_ID}'")


def test_a_file_outside_a_world_folder(tmp_path: Path) -> None:
    (tmp_path / "stray.yaml").write_text("id: x\n", encoding="utf-8")
    assert_fails(validate(tmp_path), "stray.yaml", "<world>/<id>.yaml")


def test_a_missing_folder_is_an_error(tmp_path: Path) -> None:
    assert_fails(validate(tmp_path / "nope"), "not a folder of task files")


def test_non_utf8_and_non_json_values_are_problems_not_crashes(tmp_path: Path) -> None:
    folder = tmp_path / "order"
    folder.mkdir()
    (folder / "binary.yaml").write_bytes(b"id: \xff\xfe\n")
    data = task_data()
    data["evaluator"]["expected_end_state"][0]["value"] = float("nan")
    write_task(tmp_path, data)
    result = validate(tmp_path)
    assert_fails(result, "binary.yaml", "not UTF-8")
    assert_fails(result, f"{BASE_ID}.yaml", "evaluator.expected_end_state.0.value", "not a finite number", "nan")


# ---- SUITE.lock --------------------------------------------------------------------------------------------


@pytest.fixture
def locked(tmp_path: Path) -> Path:
    """A folder with two valid tasks and a freshly written lock."""
    for task_id in (BASE_ID, "cfg-change-request"):
        target = tmp_path / suite_file(task_id).parent.name
        target.mkdir(exist_ok=True)
        shutil.copy(suite_file(task_id), target)
    result = validate(tmp_path, "--write-lock")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "SUITE.lock").is_file()
    return tmp_path


def test_write_lock_then_validate_passes(locked: Path) -> None:
    lines = (locked / "SUITE.lock").read_text(encoding="utf-8").splitlines()
    assert any(line.startswith(f"{BASE_ID}@1:") for line in lines)
    assert any(line.startswith("suite_hash: ") for line in lines)
    result = validate(locked)
    assert result.exit_code == 0, result.output
    suite = next(line for line in lines if line.startswith("suite_hash: ")).split()[1]
    assert f"suite hash: {suite}" in result.output


def test_editing_a_task_without_bumping_its_version_is_an_error(locked: Path) -> None:
    path = locked / "order" / f"{BASE_ID}.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("make sure she", "please make sure she"), encoding="utf-8")
    result = validate(locked)
    assert_fails(result, str(path), "version: content hash changed since SUITE.lock", "bump it", "(value: 1)")
    assert_fails(validate(locked, "--write-lock"), str(path), "version: content hash changed")


def test_a_bumped_version_needs_a_new_lock(locked: Path) -> None:
    path = locked / "order" / f"{BASE_ID}.yaml"
    text = path.read_text(encoding="utf-8").replace("make sure she", "please make sure she")
    path.write_text(text.replace("\nversion: 1\n", "\nversion: 2\n", 1), encoding="utf-8")
    assert_fails(validate(locked), "SUITE.lock", f"{BASE_ID} is at version 2, the lock at 1", "--write-lock")
    assert validate(locked, "--write-lock").exit_code == 0
    assert validate(locked).exit_code == 0
    assert f"{BASE_ID}@2:" in (locked / "SUITE.lock").read_text(encoding="utf-8")


def test_a_lower_version_than_the_lock_is_an_error(locked: Path) -> None:
    lock = locked / "SUITE.lock"
    lock.write_text(lock.read_text(encoding="utf-8").replace(f"{BASE_ID}@1:", f"{BASE_ID}@3:"), encoding="utf-8")
    result = validate(locked)
    assert_fails(result, f"{BASE_ID}.yaml", "version: is lower than the locked version 3")
    assert_fails(result, "SUITE.lock", "suite_hash", "does not match the lines of the lock")


def test_new_and_removed_tasks_must_be_locked(locked: Path) -> None:
    (locked / "config" / "cfg-change-request.yaml").unlink()
    shutil.copy(suite_file("cfg-launch-limits"), locked / "config")
    result = validate(locked)
    assert_fails(result, "SUITE.lock", "cfg-launch-limits is not in the lock")
    assert_fails(result, "SUITE.lock", "lists a task that does not exist", "'cfg-change-request'")
    assert validate(locked, "--write-lock").exit_code == 0
    assert validate(locked).exit_code == 0


def test_a_locked_task_whose_file_did_not_load_is_named_as_such(locked: Path) -> None:
    path = locked / "config" / "cfg-change-request.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("  max_steps:", "  max_steps: [", 1), encoding="utf-8")
    result = validate(locked)
    assert_fails(result, "SUITE.lock", "lists a task whose file did not load", "invalid YAML", "'cfg-change-request'")
    assert "lists a task that does not exist" not in result.output


def test_a_symlinked_task_file_is_named_by_its_path_in_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not by the file the link resolves to (inside the folder, so it is read); paths below the working directory
    are shown relative to it."""
    monkeypatch.chdir(tmp_path)
    root = Path("suite")
    write_task(root, edited(lambda d: d["evaluator"].update(max_steps="many")), world="order")
    (root / "spare").mkdir()
    link = root / "order" / f"{BASE_ID}.yaml"
    os.replace(link, root / "spare" / "target.txt")
    os.symlink((root / "spare" / "target.txt").resolve(), link)
    result = validate(root)
    assert_fails(result, f"{link}:", "evaluator.max_steps")
    assert "target.txt" not in result.output


def test_a_fifo_as_a_task_file_is_refused_without_opening_it(tmp_path: Path) -> None:
    write_task(tmp_path, task_data())
    os.mkfifo(tmp_path / "order" / "fifo-task.yaml")
    result = validate(tmp_path)  # opening the FIFO would wait for a writer forever
    assert_fails(result, "fifo-task.yaml", "not a regular file")


def test_a_failing_suite_does_not_write_the_lock(tmp_path: Path) -> None:
    write_task(tmp_path, edited(lambda d: d["evaluator"].update(max_steps=8)))
    assert validate(tmp_path, "--write-lock").exit_code == 1
    assert not (tmp_path / "SUITE.lock").exists()


def test_a_problem_in_a_resource_of_the_initial_state_names_its_line(tmp_path: Path) -> None:
    """Problems found after the schema (a resource of the initial state, a trigger, a predicate) gave no line,
    unlike schema problems: an unquoted postal code in one of three orders sent the author searching."""
    original = suite_file(BASE_ID).read_text(encoding="utf-8")
    text = original.replace('postal_code: "02139"', "postal_code: 2139", 1)
    assert text != original
    path = tmp_path / "order" / f"{BASE_ID}.yaml"
    path.parent.mkdir()
    path.write_text(text, encoding="utf-8")
    lines = text.splitlines()
    edited_at = next(i for i, line in enumerate(lines) if "postal_code: 2139" in line)
    # the resource's own key: the nearest line above the edit that opens an order ("  A-0988:")
    resource_at = next(
        i for i in range(edited_at, -1, -1) if lines[i].strip().startswith("A-") and lines[i].rstrip().endswith(":")
    )
    assert_fails(validate(tmp_path), f"{path}:{resource_at + 1}:", "evaluator.initial_state.order.", "quote the text")
