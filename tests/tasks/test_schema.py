"""Task schema: content and suite hashes, YAML loading rules, and the public/evaluator split."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from contextdelta.canonical import sha256_hex
from contextdelta.tasks import EvaluatorSpec, PublicTask, Task, load_task, load_task_text, suite_hash
from contextdelta.tasks.loader import parse_yaml
from tests.tasks.helpers import BASE_ID, SUITE, dump, suite_file, task_data


def _reversed(value: Any) -> Any:
    """The same data with every mapping's key order reversed."""
    if isinstance(value, dict):
        return {k: _reversed(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed(v) for v in value]
    return value


def test_hash_is_stable_across_key_order_and_yaml_formatting(tmp_path: Path) -> None:
    original = load_task(suite_file(BASE_ID))
    data = task_data()
    flow = yaml.safe_dump(_reversed(data), sort_keys=False, default_flow_style=True, width=100000)
    block = "# reformatted copy\n" + yaml.safe_dump(data, sort_keys=True, indent=4, default_flow_style=False)
    for text in (flow, block):
        assert text != suite_file(BASE_ID).read_text(encoding="utf-8")
        task, problems = load_task_text("copy.yaml", text)
        assert problems == [] and task is not None
        assert task.content_hash == original.content_hash
        assert task.lock_line == original.lock_line


def test_equivalent_spellings_of_a_time_hash_the_same() -> None:
    data = task_data("cal-design-review")
    base, _ = load_task_text("a.yaml", dump(data))
    data["evaluator"]["clock"] = "2026-03-09T08:30"
    respelled, _ = load_task_text("b.yaml", dump(data))
    assert base is not None and respelled is not None
    assert base.content_hash == respelled.content_hash


def test_any_content_change_changes_the_hash() -> None:
    original = load_task(suite_file(BASE_ID))
    data = task_data()
    data["public"]["instruction"] += " Thanks!"
    changed, _ = load_task_text("x.yaml", dump(data))
    assert changed is not None
    assert changed.content_hash != original.content_hash
    assert changed.lock_line.startswith(f"{BASE_ID}@1:")


def test_suite_hash_is_sha256_of_the_sorted_lock_lines() -> None:
    tasks = [load_task(suite_file(i)) for i in (BASE_ID, "cal-retro-slot", "cfg-change-request")]
    expected = sha256_hex("\n".join(sorted(t.lock_line for t in tasks)))
    assert suite_hash(tasks) == expected
    assert suite_hash(list(reversed(tasks))) == expected


def test_yaml_times_stay_strings_and_duplicate_keys_are_refused() -> None:
    assert parse_yaml("start: 2026-03-11T14:00\nday: 2026-03-11\n") == {
        "start": "2026-03-11T14:00",
        "day": "2026-03-11",
    }
    with pytest.raises(yaml.YAMLError, match="duplicate key 'id'"):
        parse_yaml("id: a\nid: b\n")


def test_hidden_mutation_ids_must_be_unique() -> None:
    data = task_data()
    mutation = data["evaluator"]["hidden_mutations"][0]
    data["evaluator"]["hidden_mutations"].append(dict(mutation))
    task, problems = load_task_text("dup.yaml", dump(data))
    assert task is None
    assert any("hidden mutation ids must be unique" in p.message for p in problems)


def test_public_and_evaluator_parts_share_no_field() -> None:
    assert set(PublicTask.model_fields) == {"id", "world", "instruction", "principal"}
    assert not set(PublicTask.model_fields) & set(EvaluatorSpec.model_fields)
    task = load_task(suite_file(BASE_ID))
    public = task.public_task
    assert isinstance(public, PublicTask) and not isinstance(public, Task)
    assert public.instruction == task.public.instruction


def test_non_string_keys_are_refused_with_their_line() -> None:
    text = dump(task_data()).replace("  max_steps: 22\n", "  max_steps: 22\n  on: yes\n", 1)
    task, problems = load_task_text("keys.yaml", text)
    assert task is None
    (problem,) = problems
    assert problem.field == "evaluator.True"
    assert "mapping keys must be strings" in problem.message
    assert problem.line == text.splitlines().index("  on: yes") + 1


def test_schema_version_true_is_not_read_as_1() -> None:
    """A Literal compares by ==, and True == 1: ``schema_version: true`` loaded as schema version 1."""
    data = task_data()
    data["schema_version"] = True
    task, problems = load_task_text("bool.yaml", dump(data))
    assert task is None
    (problem,) = problems
    assert problem.field == "schema_version" and problem.line == 1
    assert problem.message == "true is a boolean; write schema_version: 1"


@pytest.mark.parametrize("path", [("version",), ("evaluator", "max_steps")])
def test_a_boolean_is_not_taken_for_another_number(path: tuple[str, ...]) -> None:
    data = task_data()
    node: Any = data
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = True
    task, problems = load_task_text("bool.yaml", dump(data))
    assert task is None and [p.field for p in problems] == [".".join(path)]


@pytest.mark.parametrize("pinned", [0, -4])
def test_a_pinned_expected_version_below_1_is_not_a_version(pinned: int) -> None:
    """Versions start at 1: a write pinned to 0 is blocked under the contract whatever the trajectory observed."""
    data = task_data()
    data["evaluator"]["unsafe_trajectory"][6]["expected_version"] = pinned
    task, problems = load_task_text("pinned.yaml", dump(data))
    assert task is None
    (problem,) = problems
    assert problem.field == "evaluator.unsafe_trajectory.6.expected_version" and problem.value == pinned
    assert f"{pinned} is not a version (versions start at 1)" in problem.message and "use latest" in problem.message


def test_a_pinned_expected_version_of_1_loads() -> None:
    data = task_data()
    data["evaluator"]["unsafe_trajectory"][6]["expected_version"] = 1
    task, problems = load_task_text("pinned.yaml", dump(data))
    assert problems == [] and task is not None


@pytest.mark.parametrize(
    ("path", "field"),
    [
        (("public", "instruction"), "public.instruction"),
        (("title",), "title"),
        (("public", "principal", "name"), "public.principal.name"),
        (("public", "principal", "role"), "public.principal.role"),
        (("evaluator", "final_answer_facts"), "evaluator.final_answer_facts"),
        (("evaluator", "prohibited_actions"), "evaluator.prohibited_actions.0.reason"),
    ],
)
def test_text_that_is_only_whitespace_is_refused_naming_its_field(path: tuple[str, ...], field: str) -> None:
    """A blank instruction reaches the model as no task, a blank fact is contained in every final answer."""
    data = task_data()
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    blank = {
        "final_answer_facts": ["A-1042", "  "],
        "prohibited_actions": [{"tool": "issue_refund", "args": {"order_id": "A-1042"}, "reason": " \t"}],
    }
    parent[path[-1]] = blank.get(path[-1], "   ")
    task, problems = load_task_text("t.yaml", dump(data))
    assert task is None
    (problem,) = problems
    assert problem.field == field and "blank (only whitespace)" in problem.render(), problem.render()
    # text is kept as written: surrounding whitespace of a real text is not a problem, and not stripped
    parent[path[-1]] = (
        {"final_answer_facts": [" A-1042 "]}.get(path[-1], " x ")
        if path[-1] != "prohibited_actions"
        else [{"tool": "issue_refund", "args": {"order_id": "A-1042"}, "reason": " x "}]
    )
    task, problems = load_task_text("t.yaml", dump(data))
    assert task is not None and problems == [], problems


@pytest.mark.parametrize("resource_id", ["A/1", "", "A\u200b1", "\u0410-1042", "A 1", "-A1"])
def test_a_resource_id_a_model_cannot_type_back_is_refused(resource_id: str) -> None:
    """An empty id, one with a slash (the key separator), a space, an invisible or a look-alike character: the
    reference replay types it exactly, a model reading the result cannot."""
    data = task_data()
    orders = data["evaluator"]["initial_state"]["order"]
    orders[resource_id] = dict(next(iter(orders.values())))
    task, problems = load_task_text("t.yaml", dump(data))
    assert task is None
    (problem,) = problems
    assert problem.field == "evaluator.initial_state" and problem.line is not None
    assert f"order id {resource_id!a} is not a resource id: use ASCII letters" in problem.render()


def test_every_shipped_resource_id_is_one() -> None:
    for path in sorted(SUITE.glob("**/*.yaml")):
        load_task(path)  # raises on any problem
