"""``contextdelta generate-tasks``: byte-identical output and lock, the generator record, refusals, the
checked-in ``tasks/horizon`` suite, and nested suites beside the hand-written one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.tasks import families, load_directory
from contextdelta.tasks.families import FAMILIES, cell_params
from contextdelta.tasks.lock import read_lock
from contextdelta.validation import check_replays, validate_suite

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[3]
HORIZON = ROOT / "tasks" / "horizon"


def _generate(out: Path, *extra: str, exit_code: int = 0) -> str:
    """``generate-tasks`` of two families at horizons 1 and 3, 2 a cell, seed 4, into ``out``; its output."""
    result = runner.invoke(
        app,
        [
            "generate-tasks",
            "--family",
            "order-address-shipped,calendar-invite-twice",
            "--horizons",
            "1,3",
            "--per-cell",
            "2",
            "--seed",
            "4",
            "--out",
            str(out),
            *extra,
        ],
    )
    assert result.exit_code == exit_code, result.output
    return result.output


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_two_calls_with_the_same_arguments_write_identical_files_and_lock(tmp_path: Path) -> None:
    output = _generate(tmp_path / "a")
    _generate(tmp_path / "b")
    first, second = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert first == second
    assert len(first) == 2 * 2 * 2 + 1 and "SUITE.lock" in first
    assert "wrote 8 tasks" in output and "all pass validate-tasks" in output


@pytest.mark.slow
def test_the_order_the_families_and_horizons_are_listed_in_does_not_change_the_suite(tmp_path: Path) -> None:
    """`--horizons 3,1` and `--horizons 1,3` wrote the same task files but locks that differed in their generator
    line, so two copies of one suite did not compare equal."""
    _generate(tmp_path / "a")
    args = ["generate-tasks", "--family", "calendar-invite-twice,order-address-shipped", "--horizons", "3,1"]
    result = runner.invoke(app, [*args, "--per-cell", "2", "--seed", "4", "--out", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    assert _files(tmp_path / "a") == _files(tmp_path / "b")


@pytest.mark.slow
def test_the_lock_records_the_generator_version_and_arguments(tmp_path: Path) -> None:
    _generate(tmp_path)
    lock = read_lock(tmp_path / "SUITE.lock")
    assert lock.problems == []
    assert lock.generator == {
        "version": 1,
        "arguments": {
            "families": ["calendar-invite-twice", "order-address-shipped"],  # sorted, as given or not
            "horizons": [1, 3],
            "per_cell": 2,
            "seed": 4,
        },
    }
    assert validate_suite(tmp_path).ok
    result = runner.invoke(app, ["validate-tasks", "--tasks", str(tmp_path), "--write-lock"])
    assert result.exit_code == 0, result.output
    assert read_lock(tmp_path / "SUITE.lock").generator == lock.generator  # regenerating the lock keeps it


@pytest.mark.slow
@pytest.mark.parametrize(
    ("old", "new", "fragment"),
    [
        ('"seed":4', '"seed":7', "do not generate 8 of the 8 tasks"),
        ('"per_cell":2', '"per_cell":3', "generate 4 tasks the folder lacks"),
        ('"horizons":[1,3]', '"horizons":[1,2]', "do not generate 4 of the 8 tasks"),
        ('"calendar-invite-twice"', '"calendar-meeting-moved"', "do not generate 4 of the 8 tasks"),
        ('"version":1', '"version":2', "says generator version 2, but"),
        ('"per_cell":2', '"per_cell":0', "arguments: per_cell: Input should be greater than or equal to 1"),
    ],
)
def test_an_edit_of_the_locks_generator_line_is_named(tmp_path: Path, old: str, new: str, fragment: str) -> None:
    # the line claims that these arguments regenerate the files; an edit of it went unnoticed (suite hash and task
    # lines unchanged)
    _generate(tmp_path)
    lock = tmp_path / "SUITE.lock"
    text = lock.read_text()
    assert old in text
    lock.write_text(text.replace(old, new, 1))
    report = validate_suite(tmp_path)
    found = [p.render() for p in report.problems]
    assert not report.ok and len(found) == 1, found
    assert "SUITE.lock: generator: " in found[0] and fragment in found[0], found[0]


@pytest.mark.slow
def test_a_task_file_that_does_not_load_is_not_also_a_generator_problem(tmp_path: Path) -> None:
    _generate(tmp_path)
    broken = next((tmp_path / "order").glob("*.yaml"))
    broken.write_text(broken.read_text() + "garbage: [\n")
    found = [p.render() for p in validate_suite(tmp_path).problems]
    assert any("invalid YAML" in p for p in found) and not any("generator:" in p for p in found), found


@pytest.mark.slow
def test_write_lock_drops_a_generator_line_the_tasks_no_longer_match(tmp_path: Path) -> None:
    _generate(tmp_path)
    for path in sorted((tmp_path / "order").glob("*-h03-*.yaml")):
        path.unlink()
    result = runner.invoke(app, ["validate-tasks", "--tasks", str(tmp_path), "--write-lock"])
    assert result.exit_code == 0, result.output
    assert "dropped its generator line" in result.output
    assert read_lock(tmp_path / "SUITE.lock").generator is None and validate_suite(tmp_path).ok


@pytest.mark.slow
def test_a_horizon_a_family_cannot_stretch_to_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    # horizons up to 64 are accepted, but the order families' distractor work repeats a write from h=23 on: the
    # suite was written (lock included) and then failed validate-tasks with hundreds of problems, exit 1
    out = tmp_path / "x"
    result = runner.invoke(
        app,
        [
            "generate-tasks",
            "--family",
            "order-refund-handled",
            "--horizons",
            "1,23",
            "--per-cell",
            "1",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 2, result.output
    text = result.output.replace("\n", " ")
    assert "--horizons: these family cells make tasks that do not validate, so nothing was written" in text
    assert "nothing was written: order-refund-handled at h=23. Family" in text and "no_duplicate_action" in text
    assert not out.exists()


@pytest.mark.slow
def test_regenerating_over_an_edited_task_is_refused_and_keeps_the_edit(tmp_path: Path) -> None:
    # regenerating rewrote the edited file and the lock from scratch: the edit was lost and its bumped version went
    # back to 1 in the lock, which validate-tasks forbids (a version may never go down)
    _generate(tmp_path)
    task = next((tmp_path / "order").glob("*-h03-*.yaml"))
    edited = task.read_text().replace("\nversion: 1\n", "\nversion: 2\n").replace("max_steps: ", "max_steps: 9", 1)
    task.write_text(edited)
    assert runner.invoke(app, ["validate-tasks", "--tasks", str(tmp_path), "--write-lock"]).exit_code == 0
    before = _files(tmp_path)
    output = _generate(tmp_path, exit_code=2)
    assert task.name in output.replace("\n", "") and "is not the task this suite generates" in output
    assert _files(tmp_path) == before
    # the same files with other line endings are the same tasks: regenerating over them is allowed
    task.unlink()
    _generate(tmp_path)
    crlf = next((tmp_path / "calendar").glob("*.yaml"))
    crlf.write_bytes(crlf.read_bytes().replace(b"\n", b"\r\n"))
    _generate(tmp_path)


@pytest.mark.slow
def test_regenerating_into_the_same_folder_is_allowed_but_foreign_task_files_are_refused(tmp_path: Path) -> None:
    _generate(tmp_path)
    _generate(tmp_path)
    stray = tmp_path / "order" / "stray-task.yaml"
    shutil.copy(next((tmp_path / "order").glob("*.yaml")), stray)
    result = runner.invoke(
        app,
        [
            "generate-tasks",
            "--family",
            "order-address-shipped",
            "--horizons",
            "1",
            "--per-cell",
            "1",
            "--out",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 2
    assert "--out:" in result.output and "does not generate" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    "entry", ["order/notes.yml", "calendar/meeting.YAML", "order/x.yaml/", "config", "SUITE.lock/"]
)
def test_a_folder_validate_tasks_would_refuse_is_refused_before_anything_is_written(tmp_path: Path, entry: str) -> None:
    # a stray .yml (or a world folder that is a file) was found only after every task file and the lock were written
    target = tmp_path / entry
    target.parent.mkdir(parents=True, exist_ok=True)
    if entry.endswith("/"):
        target.mkdir()
    else:
        target.write_text("kept: true\n")
    before = _files(tmp_path)
    result = runner.invoke(
        app,
        ["generate-tasks", "--family", "all", "--horizons", "1", "--per-cell", "1", "--out", str(tmp_path)],
    )
    assert result.exit_code == 2, result.output
    assert "--out:" in result.output and "remove" in result.output and "Traceback" not in result.output
    assert str(target.relative_to(tmp_path)).rstrip("/") in result.output.replace("\n", "")
    assert _files(tmp_path) == before


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--family", "nope"], "--family: unknown family 'nope'"),
        (["--family", "all", "--horizons", "0,2"], "horizons must be between 1 and 64"),
        (["--family", "all", "--horizons", "2,2"], "horizons must not repeat"),
        (["--family", "all", "--horizons", "a"], "--horizons: 'a' is not a whole number"),
        (["--family", "all", "--horizons", "1,\u00b2"], "--horizons: '\u00b2' is not a whole number"),
        (["--family", "all", "--per-cell", "0"], "allowed: from 1 to 1000"),
        (["--horizons", "1"], "give --family and --out"),
    ],
)
def test_bad_arguments_are_one_line_refusals(tmp_path: Path, flags: list[str], message: str) -> None:
    extra = [] if "give --family" in message else ["--out", str(tmp_path / "x")]
    result = runner.invoke(app, ["generate-tasks", *flags, *extra])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "x").exists()


def test_list_shows_every_family_with_its_parameters() -> None:
    result = runner.invoke(app, ["generate-tasks", "--list"])
    assert result.exit_code == 0
    for family in FAMILIES.values():
        assert family.name in result.output
        for mutation in family.mutations:
            assert mutation in result.output
    assert "horizon" in result.output and "distractors" in result.output


def test_a_wrong_horizon_claim_is_a_validation_problem() -> None:
    family = FAMILIES["config-limit-retuned"]
    task = family.build(cell_params(family, 4, 0, 0))
    assert task.evaluator.family is not None
    info = task.evaluator.family.model_copy(update={"horizon": 5})
    wrong = task.model_copy(update={"evaluator": task.evaluator.model_copy(update={"family": info})})
    checked = check_replays("t", wrong)
    assert not checked.unsafe_ok
    assert any(p.field == "evaluator.family.horizon" for p in checked.problems)
    early = task.evaluator.family.model_copy(
        update={"observation_call": task.evaluator.family.observation_call - 1, "horizon": 5}
    )
    shifted = task.model_copy(update={"evaluator": task.evaluator.model_copy(update={"family": early})})
    assert any(p.field == "evaluator.family.observation_call" for p in check_replays("t", shifted).problems)


def test_a_nested_suite_is_not_part_of_the_folder_above_it(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "tasks" / "order", tmp_path / "order")
    _generate(tmp_path / "horizon")
    loaded, problems = load_directory(tmp_path)
    assert problems == []
    assert {t.task.world for t in loaded} == {"order"} and len(loaded) == 8
    nested, _ = load_directory(tmp_path / "horizon")
    assert len(nested) == 8


@pytest.mark.slow
def test_the_checked_in_horizon_suite_is_what_its_lock_says_generated_it(tmp_path: Path) -> None:
    lock = read_lock(HORIZON / "SUITE.lock")
    assert lock.generator is not None
    arguments = lock.generator["arguments"]
    result = runner.invoke(
        app,
        [
            "generate-tasks",
            "--family",
            ",".join(arguments["families"]),
            "--horizons",
            ",".join(map(str, arguments["horizons"])),
            "--per-cell",
            str(arguments["per_cell"]),
            "--seed",
            str(arguments["seed"]),
            "--out",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    assert _files(tmp_path) == _files(HORIZON)
    assert len(lock.entries) >= 240
    hazards = {t.task.evaluator.hazard for t in load_directory(HORIZON)[0]}
    assert len(hazards) >= 4


def test_a_grid_over_the_task_limit_is_refused_naming_the_flag_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_work(*_args: object) -> None:
        raise AssertionError("generated tasks before refusing the grid")

    monkeypatch.setattr(families, "generate_suite", no_work)
    horizons = ",".join(str(h) for h in range(1, 65))
    result = runner.invoke(
        app,
        [
            "generate-tasks",
            "--family",
            "all",
            "--horizons",
            horizons,
            "--per-cell",
            "1000",
            "--out",
            str(tmp_path / "x"),
        ],
    )
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "--max-tasks: 7 families x 64 horizons x 1000 per cell is 448,000 tasks" in text
    assert "more than the limit of 5,000" in text and "--max-tasks 448000 if you mean it" in text
    assert "Traceback" not in result.output and not (tmp_path / "x").exists()


def test_max_tasks_lowers_or_raises_the_limit(tmp_path: Path) -> None:
    refused = _generate(tmp_path / "a", "--max-tasks", "7", exit_code=2)
    assert "is 8 tasks, more than the limit of 7" in " ".join(refused.split())
    assert not (tmp_path / "a").exists()
    assert "wrote 8 tasks" in _generate(tmp_path / "b", "--max-tasks", "8")


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "piped"])
def test_progress_shows_on_a_terminal_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, terminal: bool) -> None:
    monkeypatch.setenv("TTY_COMPATIBLE", "1" if terminal else "0")  # rich's switch for "stderr is a terminal"
    result = runner.invoke(
        app,
        [
            "generate-tasks",
            "--family",
            "order-address-shipped",
            "--horizons",
            "1",
            "--per-cell",
            "2",
            "--out",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    assert ("replaying each task" in result.stderr) is terminal
    assert "replaying" not in result.stdout and "wrote 2 tasks" in result.stdout
