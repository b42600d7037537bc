"""The loader's limits: every hostile input is a named problem (file, line where known, which limit), never a
traceback or a hang, both through ``load_task_text`` and through ``validate-tasks`` (exit 1)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from contextdelta.cli import app
from contextdelta.tasks import LOCK_NAME, MAX_STEPS
from contextdelta.tasks.loader import MAX_DEPTH, MAX_FILE_BYTES, MAX_NODES, load_directory, load_task_text
from contextdelta.tasks.lock import read_lock
from tests.tasks.helpers import BASE_ID, dump, suite_file, task_data, write_task

runner = CliRunner()


def validate(root: Path) -> Result:
    return runner.invoke(app, ["validate-tasks", "--tasks", str(root)])


def only_problem(text: str, file: str = "t.yaml") -> str:
    task, problems = load_task_text(file, text)
    assert task is None and len(problems) == 1, problems
    rendered = problems[0].render()
    assert "\n" not in rendered
    return rendered


def anchor_bomb(levels: int = 10, fan: int = 9) -> str:
    """The billion-laughs shape: each level a list of ``fan`` aliases to the previous one (about 500 bytes)."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        lines.append(f"l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * fan) + "]")
    return "\n".join(lines) + "\n"


def test_an_anchor_bomb_is_refused_before_it_expands(tmp_path: Path) -> None:
    bomb = anchor_bomb()
    assert len(bomb) < 6000
    assert f"aliases expand to more than {MAX_NODES:,} nodes" in only_problem(bomb)
    # the same bomb hidden inside an otherwise valid task, through the CLI
    text = (
        suite_file(BASE_ID).read_text(encoding="utf-8")
        + "x-bomb:\n"
        + "".join(f"  {line}\n" for line in bomb.splitlines())
    )
    path = tmp_path / "order" / f"{BASE_ID}.yaml"
    path.parent.mkdir()
    path.write_text(text, encoding="utf-8")
    result = validate(tmp_path)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "aliases expand to more than" in result.output


def test_a_small_number_of_aliases_is_fine() -> None:
    data = task_data()
    text = dump(data).replace("evaluator:\n", "x: &who Sam\nevaluator:\n", 1)
    assert "unknown field" in only_problem(text)  # the alias itself is not the problem; the extra key is


def test_a_recursive_alias_is_refused() -> None:
    assert "recursive alias" in only_problem("a: &x [1, *x]\n")


@pytest.mark.slow
@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 5000 + "]" * 5000 + "\n",
        "a: " + "{b: " * 5000 + "1" + "}" * 5000 + "\n",
        "".join("  " * i + f"k{i}:\n" for i in range(5000)),
        "".join("  " * i + "-\n" for i in range(5000)),
    ],
    ids=["flow-lists", "flow-maps", "block-maps", "block-lists"],
)
def test_deep_nesting_is_refused_with_its_line(text: str) -> None:
    problem = only_problem(text)
    assert f"nested deeper than {MAX_DEPTH} levels" in problem
    assert problem.startswith("t.yaml:")  # a line number follows the file name
    assert problem.split(":")[1].isdigit()


@pytest.mark.parametrize(("escape", "where"), [("\\ud800", "value"), ("\\udfff", "key")])
def test_a_lone_surrogate_escape_is_named_with_its_field_and_line(escape: str, where: str) -> None:
    """UTF-8 cannot encode a lone surrogate: left in, it would break every hash and record of the task."""
    data = task_data()
    title = data["title"]
    text = dump(data)
    if where == "value":
        text = text.replace(f"title: {title}", f'title: "Address {escape} change"', 1)
        line, field = next(i for i, row in enumerate(text.splitlines(), 1) if row.startswith("title:")), "title"
    else:
        text = text.replace("max_steps: 22", f'"max{escape}": 22', 1)
        line = next(i for i, row in enumerate(text.splitlines(), 1) if row.strip().startswith('"max'))
        field = f"evaluator.max{escape}"  # printed as the escape it was written as
    problem = only_problem(text)
    assert f"{field}: holds a lone UTF-16 surrogate" in problem and "UTF-8 cannot encode" in problem, problem
    assert problem.startswith(f"t.yaml:{line}:"), problem


@pytest.mark.parametrize(
    ("literal", "fragment"),
    [("9" * 5000, "out of range"), (str(2**63), "outside the 64-bit range"), (str(-(2**63) - 1), "64-bit")],
)
def test_integers_outside_the_range_are_refused(literal: str, fragment: str) -> None:
    text = dump(task_data()).replace("max_steps: 22", f"max_steps: {literal}", 1)
    problem = only_problem(text)
    assert fragment in problem
    line = text.splitlines().index(f"  max_steps: {literal}") + 1
    assert problem.startswith(f"t.yaml:{line}:")


def test_a_huge_version_in_the_lock_is_a_malformed_line(tmp_path: Path) -> None:
    lock = tmp_path / LOCK_NAME
    lock.write_text(f"suite_hash: {'0' * 64}\nsome-task@{'9' * 5000}:{'a' * 64}\n", encoding="utf-8")
    parsed = read_lock(lock)
    assert any("not an 'id@version:sha256' line" in p.render() for p in parsed.problems)


def _numbers(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], int | float]]:
    if isinstance(value, dict):
        return [found for key, child in value.items() for found in _numbers(child, (*path, key))]
    if isinstance(value, list):
        return [found for i, child in enumerate(value) for found in _numbers(child, (*path, i))]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [(path, value)]
    return []


def _set(data: Any, path: tuple[Any, ...], value: Any) -> None:
    for part in path[:-1]:
        data = data[part]
    data[path[-1]] = value


def _names(field: str, path: tuple[Any, ...]) -> bool:
    """Whether ``field`` (dotted) holds every part of ``path`` in order."""
    parts = iter(field.split("."))
    return all(str(part) in parts for part in path)


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        data = data[part] if not isinstance(data, list) else data[int(part)]
    return data


@pytest.mark.slow
@pytest.mark.parametrize("task_id", [BASE_ID, "cal-onsite-loop", "cfg-rate-limit-double"])
def test_a_quoted_number_is_never_silently_converted(task_id: str) -> None:
    """Every number of a shipped task, quoted: either a named error (a number is expected there) or the field
    takes any value and keeps the string as written; never the number it looks like."""
    numbers = _numbers(task_data(task_id))
    assert len(numbers) > 5
    typed = 0
    for path, number in numbers:
        data = task_data(task_id)
        _set(data, path, str(number))
        task, problems = load_task_text("q.yaml", dump(data))
        if task is None:
            # a union field names its member too (expected_version.VersionFromCall.as_of_call)
            assert any(_names(p.field, path) and "remove the quotes" in p.message for p in problems), (path, problems)
            typed += 1
        else:
            assert _get(task.model_dump(mode="json"), path) == str(number), path
    assert typed >= 2  # schema_version, version, max_steps at least


def test_a_file_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    path = write_task(tmp_path, task_data())
    with path.open("a", encoding="utf-8") as handle:
        handle.write("# " + "x" * MAX_FILE_BYTES + "\n")
    result = validate(tmp_path)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"larger than the {MAX_FILE_BYTES:,}-byte limit" in result.output


def test_undecodable_bytes_name_the_line_in_tasks_and_lock(tmp_path: Path) -> None:
    path = write_task(tmp_path, task_data())
    data = path.read_bytes().split(b"\n")
    data[3] = data[3] + b" \xff\xfe"
    path.write_bytes(b"\n".join(data))
    (tmp_path / LOCK_NAME).write_bytes(b"suite_hash: \xc3\x28\n")
    result = validate(tmp_path)
    assert result.exit_code == 1 and "Traceback" not in result.output
    output = result.output.replace("\n", " ")
    assert "line 4: not UTF-8 text" in output
    assert "line 1: not UTF-8 text" in output and LOCK_NAME in output


def test_an_unreadable_lock_is_never_overwritten(tmp_path: Path) -> None:
    write_task(tmp_path, task_data())
    (tmp_path / LOCK_NAME).write_bytes(b"\xff\n")
    result = runner.invoke(app, ["validate-tasks", "--tasks", str(tmp_path), "--write-lock"])
    assert result.exit_code == 1
    assert (tmp_path / LOCK_NAME).read_bytes() == b"\xff\n"


def test_symlinks_out_of_the_folder_are_refused(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    write_task(outside, task_data())
    root = tmp_path / "suite"
    (root / "order").mkdir(parents=True)
    os.symlink(outside / "order" / f"{BASE_ID}.yaml", root / "order" / f"{BASE_ID}.yaml")
    result = validate(root)
    assert result.exit_code == 1
    assert "outside the tasks folder" in result.output.replace("\n", " ")
    # a link inside the folder is an ordinary file; a linked folder is never followed
    inside = tmp_path / "inside"
    write_task(inside, task_data(), world="order")
    (inside / "spare").mkdir()
    os.replace(inside / "order" / f"{BASE_ID}.yaml", inside / "spare" / "copy.txt")
    os.symlink(inside / "spare" / "copy.txt", inside / "order" / f"{BASE_ID}.yaml")
    loaded, problems = load_directory(inside)
    assert [t.task.id for t in loaded] == [BASE_ID] and not problems
    os.symlink(outside / "order", inside / "calendar")
    loaded, problems = load_directory(inside)
    assert any("symlinked folder" in p.render() for p in problems)


def test_a_symlink_loop_is_a_named_problem_not_a_traceback(tmp_path: Path) -> None:
    root = tmp_path / "suite"
    write_task(root, task_data())
    os.symlink("self.yaml", root / "order" / "self.yaml")  # a link to itself
    os.symlink("b.yaml", root / "order" / "a.yaml")  # two links to each other
    os.symlink("a.yaml", root / "order" / "b.yaml")
    result = validate(root)
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    text = " ".join(result.output.split())
    for name in ("self.yaml", "a.yaml", "b.yaml"):
        assert f"order/{name}: a symlink loop (the link leads back to itself)" in text
    assert "1/4 tasks pass; 3 problems" in text


def test_a_lock_that_is_a_folder_is_named_not_taken_for_a_missing_lock(tmp_path: Path) -> None:
    write_task(tmp_path, task_data())
    (tmp_path / LOCK_NAME).mkdir()
    result = validate(tmp_path)
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert f"{LOCK_NAME}: a folder, not a file: put the file itself in its place" in text
    assert "version check skipped" not in text and "all tasks pass" not in text


@pytest.mark.parametrize("content", ["nothing", "yml"])
def test_a_folder_without_task_files_fails(tmp_path: Path, content: str) -> None:
    if content == "yml":
        (tmp_path / "order").mkdir()
        (tmp_path / "order" / f"{BASE_ID}.yml").write_text(dump(task_data()), encoding="utf-8")
    result = validate(tmp_path)
    assert result.exit_code == 1, result.output
    assert "all tasks pass" not in result.output
    assert "no task files" in result.output
    if content == "yml":
        assert f"rename it to {BASE_ID}.yaml" in result.output


def test_strict_types_still_read_enums_and_times_from_strings() -> None:
    task, problems = load_task_text("ok.yaml", suite_file("cal-onsite-loop").read_text(encoding="utf-8"))
    assert task is not None and not problems
    assert task.evaluator.clock is not None


def test_yaml_errors_are_problems_not_exceptions() -> None:
    for text in ("a: 1\n---\nb: 2\n", "? [1, 2]\n: 3\n", "a: !!python/object:os.system x\n", "\t- x"):
        problem = only_problem(text)
        assert "YAML" in problem


def test_the_limits_are_yaml_errors_for_direct_callers() -> None:
    from contextdelta.tasks.loader import YamlLimitError, parse_yaml

    with pytest.raises(YamlLimitError):
        parse_yaml(anchor_bomb())
    assert issubclass(YamlLimitError, yaml.YAMLError)


@pytest.mark.parametrize("name", ["x.yaml", "x.yml"])
def test_a_folder_named_like_a_task_file_is_a_named_problem(name: str, tmp_path: Path) -> None:
    """A folder ``order/x.yaml`` was skipped in silence: all tasks passed while the author meant a task there."""
    write_task(tmp_path, task_data())
    (tmp_path / "order" / name).mkdir()
    result = validate(tmp_path)
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert f"order/{name}: a folder named like a task file; task files are files: remove or rename it" in text
    _, problems = load_directory(tmp_path)
    assert [p.file.endswith(f"order/{name}") for p in problems] == [True]


@pytest.mark.parametrize("suffix", [".YAML", ".Yaml", ".YML"])
def test_a_task_file_with_an_upper_case_suffix_is_a_named_problem(suffix: str, tmp_path: Path) -> None:
    """``order/<id>.YAML`` was skipped in silence: every other task passed and ran while this one was left out."""
    write_task(tmp_path, task_data())
    twin = task_data("order-desk-cancel")
    (tmp_path / "order" / f"order-desk-cancel{suffix}").write_text(dump(twin), encoding="utf-8")
    result = validate(tmp_path)
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert f"order/order-desk-cancel{suffix}: task files end in .yaml; rename it to order-desk-cancel.yaml" in text
    assert "all tasks pass" not in text
    _, problems = load_directory(tmp_path)
    assert [p.file.endswith(f"order-desk-cancel{suffix}") for p in problems] == [True]


@pytest.mark.parametrize("name", ["x.YAML", "x.Yml"])
def test_a_folder_named_like_a_task_file_in_upper_case_is_a_named_problem(name: str, tmp_path: Path) -> None:
    write_task(tmp_path, task_data())
    (tmp_path / "order" / name).mkdir()
    _, problems = load_directory(tmp_path)
    assert [p.file.endswith(f"order/{name}") for p in problems] == [True]


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_an_empty_task_file_is_named_empty(text: str) -> None:
    """It was 'a task file must be a YAML mapping (value: NoneType)': a type the author never wrote."""
    assert only_problem(text) == "t.yaml: the file is empty: a task file is a YAML mapping (schema_version: 1, id, ...)"


@pytest.mark.parametrize("name", [f"{BASE_ID}.YAML", f"{BASE_ID}.Yaml", f"{BASE_ID}.YML"])
def test_a_task_file_with_another_spelling_of_the_suffix_is_named_not_skipped(name: str, tmp_path: Path) -> None:
    """``order/x.YAML`` was skipped in silence (the listing matched ``.yaml`` case-sensitively): a suite without a lock
    passed without the task its author wrote."""
    write_task(tmp_path, task_data("cfg-change-request"))
    (tmp_path / "order").mkdir()
    (tmp_path / "order" / name).write_text(dump(task_data()), encoding="utf-8")
    result = validate(tmp_path)
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert f"order/{name}: task files end in .yaml; rename it to {BASE_ID}.yaml" in text
    assert "all tasks pass" not in text


@pytest.mark.parametrize(
    ("char", "name"), [("\u0435", "U+0435 CYRILLIC SMALL LETTER IE"), ("\u200b", "U+200B ZERO WIDTH SPACE")]
)
@pytest.mark.parametrize("where", ["id", "file name"])
def test_a_look_alike_or_invisible_character_in_an_id_is_named_by_code_point(
    tmp_path: Path, char: str, name: str, where: str
) -> None:
    """An id or file name that differs from the intended one by a look-alike letter reads the same in the message;
    the problem names the character, its position and its code point."""
    data = task_data()
    spoofed = BASE_ID.replace("e", char, 1)  # 'ord?r-grinder-refund': position 3
    if where == "id":
        data["id"] = spoofed
        write_task(tmp_path, data, name=BASE_ID)
    else:
        write_task(tmp_path, data, name=spoofed)
    result = validate(tmp_path)
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert f"at position 3 is {name}" in text, text
    if where == "file name":
        assert f"rename the file to {BASE_ID}.yaml" in text


def test_text_that_yaml_read_as_a_boolean_or_number_says_to_quote_it(tmp_path: Path) -> None:
    data = task_data()
    data["title"] = 2026
    data["evaluator"]["prohibited_actions"] = [
        {"tool": "issue_refund", "args": {"order_id": "A-1042"}, "reason": False}
    ]
    _, problems = load_task_text("t.yaml", dump(data).replace("reason: false", "reason: no"))
    rendered = {p.field: p.render() for p in problems}
    assert 'as the number 2026; quote the text as you wrote it (title: "...")' in rendered["title"]
    assert "yes, no, on, off, true or false as the boolean false" in rendered["evaluator.prohibited_actions.0.reason"]
    # a resource of the initial state too (checked by the world's model): named with its resource and field
    data = task_data()
    first = next(iter(data["evaluator"]["initial_state"]["order"]))
    data["evaluator"]["initial_state"]["order"][first]["shipping_address"]["postal_code"] = 2139
    write_task(tmp_path, data)
    text = " ".join(validate(tmp_path).output.split())
    assert f"evaluator.initial_state.order.{first}: not a valid order: shipping_address.postal_code" in text
    assert 'quote the text as you wrote it (postal_code: "...")' in text


def test_a_step_limit_over_the_maximum_is_refused_with_its_line() -> None:
    data = task_data()
    data["evaluator"]["max_steps"] = 1_000_000_000
    rendered = only_problem(dump(data))
    assert "evaluator.max_steps: Input should be less than or equal to 1000 (value: 1000000000)" in rendered
    assert rendered.startswith("t.yaml:")  # with its line
    data["evaluator"]["max_steps"] = MAX_STEPS
    task, problems = load_task_text("t.yaml", dump(data))
    assert task is not None and problems == []
