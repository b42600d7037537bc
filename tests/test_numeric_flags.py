"""Every numeric option of every command declares its allowed range and refuses a value outside it (exit 2, the
range named); zero, where the range allows it, is a value that reaches the run, never a stand-in for a default."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main
from pydantic import ValidationError
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.providers import EndpointLimits
from contextdelta.rundir import RunDirectory, RunManifest, StrategyParams
from contextdelta.runner import BenchmarkRequest
from contextdelta.testing import serve_scripted
from contextdelta.testing.server import app as scripted_server_app

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "tasks"
runner = CliRunner()

SEED_REASON = "a run seed may be negative: any signed 64-bit integer (tests/test_settings.py checks the bounds)"
UNBOUNDED = {
    (
        "run-benchmark",
        "--seed",
    ): SEED_REASON,
    (
        "run-external",
        "--seed",
    ): SEED_REASON,
    (
        "serve-world",
        "--seed",
    ): SEED_REASON,
}
"""Numeric options that accept every value, with the reason."""
REQUIRED = {
    "scripted-server": ["--policy", "oracle", "--tasks", str(TASKS)],
    "serve-world": ["--task", "cfg-search-ramp", "--mode", "unprotected"],
    "run-external": ["--agent-cmd", "true"],
}
"""Valid values of a command's required options, so that only the numeric option under test is wrong."""


def _numeric_options(application: typer.Typer) -> list[tuple[list[str], str, Any]]:
    """(command words, flag, click parameter) of every int/float option of every command of ``application``."""
    found: list[tuple[list[str], str, Any]] = []

    def walk(command: Any, words: list[str]) -> None:
        if hasattr(command, "commands"):  # a group (typer ships its own click)
            for name, sub in command.commands.items():
                walk(sub, [*words, name])
            return
        for param in command.params:
            annotation = param.type_descriptor.annotation  # the Python type (None-stripped) typer parses into
            if param.param_type_name == "option" and annotation in (int, float):
                flag = next(o for o in param.opts if o.startswith("--"))
                found.append((words, flag, param))

    walk(typer.main.get_command(application), [])
    return found


OPTIONS = [(app, words, flag, param) for words, flag, param in _numeric_options(app)] + [
    (scripted_server_app, [], flag, param) for _, flag, param in _numeric_options(scripted_server_app)
]


def test_the_enumeration_sees_the_run_benchmark_flags() -> None:
    flags = {flag for _, words, flag, _ in OPTIONS if words == ["run-benchmark"]}
    assert {"--concurrency", "--temperature", "--repeats", "--last-n", "--timeout-s"} <= flags


@pytest.mark.slow
@pytest.mark.parametrize(
    ("application", "words", "flag", "param"),
    OPTIONS,
    ids=[f"{' '.join(w) or 'scripted-server'} {f}" for _, w, f, _ in OPTIONS],
)
def test_every_numeric_option_refuses_a_value_below_its_range(
    application: typer.Typer, words: list[str], flag: str, param: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = " ".join(words) or "scripted-server"
    if (name, flag) in UNBOUNDED:
        pytest.skip(UNBOUNDED[(name, flag)])
    monkeypatch.chdir(tmp_path)  # nothing may be written, but if it were, not into the checkout
    result = runner.invoke(application, [*words, *REQUIRED.get(name, []), flag, "-1"])
    assert result.exit_code == 2, f"{name} {flag} -1 was accepted: {result.output}"
    message = " ".join(result.stderr.split()).replace("│", "")
    # our own ranges say "out of range; allowed: ...", typer's min/max "should be greater than or equal to ..."
    assert flag in message and any(w in message for w in ("allowed:", "greater than", "less than")), message
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("flag", "value", "allowed"),
    [
        ("--temperature", "2.5", "from 0 to 2"),
        ("--concurrency", "0", "at least 1"),
        ("--repeats", "0", "at least 1"),
        ("--timeout-s", "0", "greater than 0"),
        ("--max-steps", "0", "from 1 to 1000"),
        ("--max-steps", "1000000000", "from 1 to 1000"),
    ],
)
def test_run_benchmark_names_the_allowed_range(flag: str, value: str, allowed: str) -> None:
    result = runner.invoke(app, ["run-benchmark", flag, value])
    assert result.exit_code == 2
    message = " ".join(result.stderr.replace("│", " ").split())
    assert f"Invalid value for '{flag}': {value} is out of range; allowed: {allowed}" in message


def test_the_request_model_holds_the_same_ranges() -> None:
    for field, value in [("concurrency", 0), ("temperature", 2.5), ("repeats", 0), ("timeout_s", 0), ("limit", 0)]:
        with pytest.raises(ValidationError):
            BenchmarkRequest.model_validate({field: value})
    with pytest.raises(ValidationError):
        StrategyParams(last_n=-1)


# ---- zero is a value ---------------------------------------------------------------------------------------------

ZERO_CASES: dict[str, Callable[[RunManifest], bool]] = {
    "--last-n": lambda manifest: manifest.strategy_params.last_n == 0,
    "--summary-trigger": lambda manifest: manifest.strategy_params.summary_trigger == 0,
    "--summary-keep": lambda manifest: manifest.strategy_params.summary_keep == 0,
    "--seed": lambda manifest: manifest.seed == 0,
    "--temperature": lambda manifest: manifest.provider.temperature == 0,
    "--max-retries": lambda manifest: manifest.sessions[-1]["max_retries"] == 0,
}
"""Every run-benchmark numeric flag whose range includes 0, and how its 0 shows in the run's manifest. The cost
budgets refuse 0 (a budget must be > 0; no flag means no budget)."""
ZERO_ELSEWHERE: set[str] = set()


@pytest.mark.slow
def test_every_zero_accepting_run_benchmark_flag_is_covered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no model configured here: a run that gets past its flags stops at once
    flags = [flag for _, words, flag, _ in OPTIONS if words == ["run-benchmark"]]
    accepting = set()
    for flag in flags:
        result = runner.invoke(app, ["run-benchmark", flag, "0", "--results-dir", str(tmp_path), "--no-store"])
        if "out of range" not in result.stderr:
            accepting.add(flag)
    assert accepting == set(ZERO_CASES) | ZERO_ELSEWHERE
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_zero_reaches_the_run_and_last_n_0_keeps_no_tool_group(tmp_path: Path) -> None:
    with serve_scripted("oracle", TASKS) as url:
        args = ["run-benchmark", "--tasks", str(TASKS), "--base-url", url, "--model", "scripted-oracle"]
        args += ["--results-dir", str(tmp_path), "--task-ids", "order-grinder-refund", "--repeats", "1"]
        args += ["--strategies", "last_n,typed_state_digest", "--protection-modes", "unprotected"]
        args += ["--quiet", "--no-store", "--max-steps", "8"]
        for flag in ZERO_CASES:
            args += [flag, "0"]
        result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    directory = RunDirectory(Path(result.stdout.strip().splitlines()[-1]))
    manifest = directory.read_manifest()
    assert all(check(manifest) for check in ZERO_CASES.values())
    (last_n,) = [r for r in directory.read_episodes() if r.strategy == "last_n"]
    sent = [step.messages for step in last_n.trace.steps]
    assert len(sent) >= 3
    assert all(not any(m.get("role") == "tool" for m in messages) for messages in sent)


FLOAT_OPTIONS = [option for option in OPTIONS if option[3].type_descriptor.annotation is float]


def test_the_enumeration_sees_the_float_flags() -> None:
    flags = {flag for _, words, flag, _ in FLOAT_OPTIONS if words == ["run-benchmark"]}
    assert {"--temperature", "--timeout-s", "--requests-per-minute", "--max-cost-usd"} <= flags


@pytest.mark.slow
@pytest.mark.parametrize("value", ["nan", "inf"])
@pytest.mark.parametrize(
    ("application", "words", "flag", "param"),
    FLOAT_OPTIONS,
    ids=[f"{' '.join(w) or 'scripted-server'} {f}" for _, w, f, _ in FLOAT_OPTIONS],
)
def test_every_float_option_refuses_a_value_that_is_not_finite(
    application: typer.Typer,
    words: list[str],
    flag: str,
    param: Any,
    value: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """nan passes every comparison and inf every open end, so a range alone lets them through (nan reached the
    request model as a traceback, inf a rate limiter as a division by zero)."""
    name = " ".join(words) or "scripted-server"
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(application, [*words, *REQUIRED.get(name, []), flag, value])
    assert result.exit_code == 2, f"{name} {flag} {value} was accepted: {result.output}"
    message = " ".join(result.stderr.replace("│", " ").split())
    # ours: "nan is not a finite number; allowed: ..."; typer's min refuses nan itself ("greater than or equal")
    assert flag in message and any(w in message for w in (f"{value} is not a finite number", "greater than")), message
    assert list(tmp_path.iterdir()) == []


def test_the_request_models_refuse_values_that_are_not_finite() -> None:
    for field in ("temperature", "timeout_s", "max_cost_usd"):
        with pytest.raises(ValidationError):
            BenchmarkRequest.model_validate({field: float("nan")})
    with pytest.raises(ValidationError):
        EndpointLimits(requests_per_minute=float("inf"))


@pytest.mark.parametrize(
    ("words", "flag", "value", "allowed"),
    [
        (["run-benchmark"], "--timeout-s", "1e308", "greater than 0 and at most 3600"),
        (["run-external", "--agent-cmd", "true"], "--timeout-s", "1e9", "greater than 0 and at most 86400"),
        (["serve"], "--timeout-s", "1e308", "greater than 0 and at most 3600"),
        (["run-benchmark"], "--requests-per-minute", "1e-300", "at least 0.0166667"),
        (["run-benchmark"], "--tokens-per-minute", "1e-300", "at least 60"),
        (["run-benchmark"], "--max-cost-usd", "0", "greater than 0"),
        (["run-benchmark"], "--max-episode-cost-usd", "0", "greater than 0"),
    ],
)
def test_a_value_that_would_stall_or_fail_the_run_is_refused(
    words: list[str], flag: str, value: str, allowed: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A timeout of 1e308 let a stalled endpoint block the endpoint check forever, a rate of 1e-300 per minute
    waited forever without a word, a budget of 0 made every episode a failed trial."""
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, [*words, flag, value])
    assert result.exit_code == 2, result.output
    message = " ".join(result.stderr.replace("│", " ").split())
    assert f"Invalid value for '{flag}':" in message and f"allowed: {allowed}" in message, message
    assert list(tmp_path.iterdir()) == []
