"""``python -m contextdelta.testing.server``: the ready line, flags, exit codes, and serve_scripted's subprocess."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from contextdelta.testing import ServerStartError, fetch_stats, serve_scripted
from tests.alarm import within
from tests.testing.episode_loop import FIXTURES, first_messages, fixture_tasks

READY = re.compile(r"^ready port=(\d+) base_url=http://127\.0\.0\.1:(\d+)/v1 model=scripted-unsafe tasks=2$")


def server_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "contextdelta.testing.server", *args]


@pytest.mark.slow
def test_prints_ready_with_the_chosen_port_and_serves_until_terminated() -> None:
    process = subprocess.Popen(
        server_command("--policy", "unsafe", "--tasks", str(FIXTURES), "--port", "0", "--latency-ms", "1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        match = READY.match(line)
        assert match is not None, line
        assert match.group(1) == match.group(2) and int(match.group(1)) > 0
        with urllib.request.urlopen(f"http://127.0.0.1:{match.group(1)}/v1/models", timeout=5) as response:
            assert json.loads(response.read())["data"][0]["id"] == "scripted-unsafe"
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0


@pytest.mark.slow
def test_bad_fault_selector_exits_2() -> None:
    result = subprocess.run(
        server_command("--policy", "oracle", "--tasks", str(FIXTURES), "--fail-429", "sometimes"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "bad request selector" in result.stderr and "ready" not in result.stdout


@pytest.mark.slow
def test_unknown_policy_and_missing_tasks_are_usage_errors(tmp_path: Path) -> None:
    for args in (
        ("--policy", "clever", "--tasks", str(FIXTURES)),
        ("--policy", "oracle", "--tasks", str(tmp_path / "missing")),
    ):
        result = subprocess.run(server_command(*args), capture_output=True, text=True, timeout=60)
        assert result.returncode == 2, result


def test_a_tasks_file_and_a_taken_port_are_named(tmp_path: Path) -> None:
    afile = tmp_path / "tasks.txt"
    afile.write_text("not a folder\n")
    result = subprocess.run(
        server_command("--policy", "oracle", "--tasks", str(afile)), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"task directory {afile} is not a folder: give the folder of task files with --tasks" in result.stderr
    with serve_scripted("oracle", FIXTURES) as url:
        port = url.rsplit(":", 1)[1].split("/")[0]
        result = subprocess.run(
            server_command("--policy", "oracle", "--tasks", str(FIXTURES), "--port", port),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"(binding 127.0.0.1:{port}; choose a free --port)" in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("tasks", "count"), [((), 24), (("--tasks", "package:horizon"), 280)])
def test_outside_a_clone_it_serves_a_packaged_suite(tasks: tuple[str, ...], count: int, tmp_path: Path) -> None:
    # the default is ./tasks when it is a folder, else package:core, as for every command taking --tasks
    process = subprocess.Popen(
        server_command("--policy", "oracle", *tasks), stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line.startswith("ready ") and line.endswith(f"model=scripted-oracle tasks={count}"), line
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0


@pytest.mark.slow
def test_an_unknown_packaged_suite_exits_2_naming_the_packaged_ones() -> None:
    result = subprocess.run(
        server_command("--policy", "oracle", "--tasks", "package:nope"), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and "ready" not in result.stdout
    assert "no packaged suite 'nope'; packaged: package:core, package:horizon" in result.stderr


@pytest.mark.slow
def test_serve_scripted_runs_a_subprocess_with_faults() -> None:
    task = fixture_tasks()["fixture-mug-refund"]
    body = json.dumps({"model": "x", "messages": first_messages(task)}).encode()
    with serve_scripted("oracle", FIXTURES, fail_500=1) as base_url:
        post = urllib.request.Request(f"{base_url}/chat/completions", data=body, method="POST")
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(post, timeout=5)
        assert caught.value.code == 500
        with urllib.request.urlopen(post, timeout=5) as response:
            assert json.loads(response.read())["model"] == "scripted-oracle"
        assert fetch_stats(base_url)["faults"] == {"fail_500": 1}


@pytest.mark.slow
def test_the_stats_give_the_server_process_cpu_time_which_answering_adds_to() -> None:
    task = fixture_tasks()["fixture-mug-refund"]
    body = json.dumps({"model": "x", "messages": first_messages(task)}).encode()
    with serve_scripted("oracle", FIXTURES) as base_url:
        before = fetch_stats(base_url)["process_cpu_s"]
        post = urllib.request.Request(f"{base_url}/chat/completions", data=body, method="POST")
        for _ in range(20):
            with urllib.request.urlopen(post, timeout=5) as response:
                response.read()
        after = fetch_stats(base_url)["process_cpu_s"]
    assert 0 < before < after  # start-up (imports, the task suite) cost it CPU already; 20 answers cost more


@pytest.mark.slow
def test_serve_scripted_reports_a_server_that_cannot_start(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("schema_version: 1\nid: Not Valid\n", encoding="utf-8")
    with pytest.raises(ServerStartError, match=r"broken\.yaml"), serve_scripted("oracle", tmp_path):
        pass


def test_faults_as_plan_or_options_not_both() -> None:
    from contextdelta.testing import FaultPlan

    with pytest.raises(TypeError), serve_scripted("oracle", FIXTURES, faults=FaultPlan(), fail_500=1):
        pass


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--latency-ms", "99999999999"), ("--slow-ms", "86400001"), ("--retry-after", "1e300"), ("--outage-s", "86401")],
)
def test_a_delay_over_a_day_is_refused_naming_the_flag(flag: str, value: str) -> None:
    from typer.testing import CliRunner

    from contextdelta.testing.server import app

    with within(30, f"serving with {flag} {value}"):  # accepted, the server would serve until stopped
        result = CliRunner().invoke(
            app, ["--policy", "oracle", "--tasks", str(FIXTURES), flag, value], env={"COLUMNS": "300"}
        )
    assert result.exit_code == 2 and "ready" not in result.stdout
    assert flag in result.output
    assert "less than or equal to 86400000" in result.output or "more than a day; allowed: 0 to 86400" in result.output


def test_flags_that_say_no_have_no_doubled_negation_in_the_help() -> None:
    from typer.testing import CliRunner

    from contextdelta.testing.server import app

    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "300"})
    assert result.exit_code == 0
    assert "--no-models" in result.output and "--no-retry-after" in result.output
    assert "--no-no-" not in result.output
