"""run-benchmark against real loopback servers that misbehave, and against results folders that cannot take a run:
each is refused before anything is created (exit 2, one named error on stderr), and a printed run path is a RUN_ID."""

from __future__ import annotations

import http.server
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.rundir import RunDirectory, RunDirectoryError, check_results_dir
from contextdelta.runner import EXIT_ALL_FAILED
from contextdelta.testing import FaultPlan, ScriptedServer, fetch_stats, serve_scripted
from tests.runner.conftest import TASKS, as_killed

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def run_args(url: str, results: Path, *extra: str) -> list[str]:
    return [
        "run-benchmark",
        "--tasks",
        str(TASKS),
        "--base-url",
        url,
        "--model",
        "scripted-oracle",
        "--results-dir",
        str(results),
        "--task-ids",
        "order-grinder-refund",
        "--strategies",
        "full_history",
        "--protection-modes",
        "unprotected",
        "--repeats",
        "1",
        "--quiet",
        "--no-store",
        *extra,
    ]


def refused(args: list[str], cwd: Path) -> str:
    """Run the command in ``cwd``; it must exit 2 with one error on stderr, nothing on stdout, and create nothing."""
    before = sorted(cwd.rglob("*"))
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and result.stderr.startswith("error: ")
    assert "Traceback" not in result.stderr
    assert sorted(cwd.rglob("*")) == before  # no run directory, no ./results, no contextdelta.db
    return " ".join(result.stderr.split())


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean working folder (its .env is the only settings file read)."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for name in ("CONTEXTDELTA_DATABASE_URL", "CONTEXTDELTA_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return work


# ---- endpoints -----------------------------------------------------------------------------------------------


def test_a_failing_endpoint_is_refused_after_retries_without_blaming_the_url(here: Path, no_retry_waits: None) -> None:
    """A 5xx that persists through the check's retries refuses the run with "wait", not "check --base-url"."""
    with serve_scripted("oracle", TASKS, in_process=True, fail_500="all") as url:
        message = refused(run_args(url, here / "results"), here)
    assert "the endpoint is failing; wait for it to recover and run again" in message
    assert "gave up after 6 attempts" in message
    assert message.endswith("Nothing was run.") and "--base-url" not in message


def test_a_base_url_without_v1_is_refused_with_the_fix(here: Path) -> None:
    with serve_scripted("oracle", TASKS, in_process=True) as url:
        root = url.removesuffix("/v1")
        message = refused(run_args(root, here / "results"), here)
    assert f"did you mean --base-url {root}/v1 ? Nothing was run;" in message


@pytest.mark.slow
def test_openai_api_key_is_found_behind_a_copied_env_example(here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copyfile(ROOT / ".env.example", here / ".env")  # its CONTEXTDELTA_API_KEY= line is empty
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-users-key")
    with serve_scripted("oracle", TASKS, in_process=True, require_api_key="sk-the-users-key") as url:
        result = runner.invoke(app, run_args(url, here / "results"))
        assert result.exit_code == 0, result.stderr
        monkeypatch.setenv("OPENAI_API_KEY", "sk-a-wrong-key")
        message = refused(run_args(url, here / "results"), here)
        # GET /models and the chat check (a 401 on /models alone is no refusal: gateways keep keys to chat)
        assert fetch_stats(url)["faults"] == {"unauthorized": 2}
    assert "refused the API key (HTTP 401)" in message and "sk-a-wrong-key" not in message


def test_an_endpoint_that_rejects_tools_is_refused_naming_them(here: Path) -> None:
    with serve_scripted("oracle", TASKS, in_process=True, reject_tools=True) as url:
        message = refused(run_args(url, here / "results"), here)
    assert "rejected a minimal chat completion that carries `tools`" in message


@pytest.mark.slow
def test_a_hang_after_models_costs_one_timeout_not_a_run(here: Path) -> None:
    with serve_scripted("oracle", TASKS, in_process=True, hang="all") as url:
        message = refused(run_args(url, here / "results", "--timeout-s", "0.5"), here)
    assert "answered GET /models but not a chat completion within 0.5 s (--timeout-s)" in message


@pytest.mark.slow
def test_a_silent_socket_is_refused_within_timeout_s(here: Path) -> None:
    with serve_scripted("oracle", TASKS, in_process=True, silent=True) as url:
        message = refused(run_args(url, here / "results", "--timeout-s", "0.5"), here)
    assert "GET /models did not answer within 0.5 s (--timeout-s)" in message


# ---- results folders -----------------------------------------------------------------------------------------


def test_a_results_dir_that_is_a_file_is_refused(here: Path) -> None:
    (here / "taken").write_text("a file\n")
    with serve_scripted("oracle", TASKS, in_process=True) as url:
        message = refused(run_args(url, here / "taken"), here)
        nested = refused(run_args(url, here / "taken" / "sub"), here)
    assert message == f"error: --results-dir {here / 'taken'} is not a folder"
    assert f"cannot be created: {here / 'taken'} is not a folder" in nested


def test_a_results_dir_from_the_environment_is_named_by_its_variable(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CONTEXTDELTA_RESULTS_DIR naming a file was refused as '--results-dir ...', a flag the user never gave."""
    (here / "taken").write_text("a file\n")
    monkeypatch.setenv("CONTEXTDELTA_RESULTS_DIR", str(here / "taken"))
    with serve_scripted("oracle", TASKS, in_process=True) as url:
        args = [a for a in run_args(url, here / "unused") if a not in ("--results-dir", str(here / "unused"))]
        message = refused(args, here)
    assert message == f"error: CONTEXTDELTA_RESULTS_DIR {here / 'taken'} is not a folder"


def test_a_read_only_results_dir_is_refused(here: Path) -> None:
    if os.geteuid() == 0:  # root writes through permission bits: use a folder of a read-only file system
        target = Path("/sys")
        try:
            with tempfile.TemporaryFile(dir=target):
                pytest.skip("/sys is writable here")
        except OSError:
            pass
    else:
        target = here / "locked"
        target.mkdir()
        target.chmod(0o555)
    with serve_scripted("oracle", TASKS, in_process=True) as url:
        message = refused(run_args(url, target), here)
    assert f"--results-dir {target} is not writable" in message


@pytest.mark.slow
def test_a_missing_results_dir_is_created_only_when_the_run_starts(here: Path) -> None:
    with serve_scripted("oracle", TASKS, in_process=True) as url:
        refused(run_args(url, here / "new" / "results", "--task-ids", "no-such-task"), here)
        result = runner.invoke(app, run_args(url, here / "new" / "results"))
    assert result.exit_code == 0, result.stderr
    assert Path(result.stdout.strip().splitlines()[-1]).parent == here / "new" / "results"


def test_a_full_file_system_is_refused_before_the_run(tmp_path: Path) -> None:
    free = shutil.disk_usage(tmp_path).free
    with pytest.raises(RunDirectoryError, match=r"MiB free on its file system; a run needs at least"):
        check_results_dir(tmp_path, min_free_bytes=free * 2)
    check_results_dir(tmp_path, min_free_bytes=1)


@pytest.mark.slow
def test_a_resume_from_another_folder_names_the_recorded_suite_and_the_remedy(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The suite is recorded relative to the folder the run started in: a resume from elsewhere without --tasks was
    refused as "--tasks ...: not a directory", a flag the user had not given. It names the run, the recorded
    folder and the two remedies; --tasks with the same suite resumes it."""
    with serve_scripted("oracle", TASKS) as url:
        first = runner.invoke(app, run_args(url, here / "results"))
        assert first.exit_code == 0, first.output
        path = Path(first.stdout.strip().splitlines()[-1])
        as_killed(path)
        elsewhere = here / "a" / "b" / "c"
        elsewhere.mkdir(parents=True)
        monkeypatch.chdir(elsewhere)
        resume = ["run-benchmark", "--resume", str(path), "--base-url", url, "--no-store", "--quiet"]
        message = refused(resume, elsewhere)
        recorded = RunDirectory(path).read_manifest().suite
        assert recorded is not None
        assert message == (
            f"error: cannot resume {path.name}: its suite {recorded.source!r} (recorded relative to the folder the "
            f"run started in) is not a folder from here ({elsewhere}): resume from the folder the run started in, or "
            "give --tasks with the path of the same suite"
        )
        again = runner.invoke(app, [*resume, "--tasks", str(TASKS)])
    assert again.exit_code == 0, again.output


@pytest.mark.slow
def test_a_resume_on_a_full_file_system_names_the_run_and_the_one_remedy(
    here: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk that filled stopped the run; the user frees a little space and resumes. Too little is refused as for a
    new run, but named by --resume (the flag given) and without "choose another --results-dir": a resumed run stays
    in its directory."""
    with serve_scripted("oracle", TASKS) as url:
        first = runner.invoke(app, run_args(url, tmp_path / "results"))
        assert first.exit_code == 0, first.output
        path = Path(first.stdout.strip().splitlines()[-1])
        full = shutil.disk_usage(path)._replace(free=5 * 2**20)
        monkeypatch.setattr(shutil, "disk_usage", lambda where: full)
        message = refused(["run-benchmark", "--resume", str(path), "--base-url", url, "--no-store"], here)
    assert message == (
        f"error: --resume {path}: only 5.0 MiB free on its file system; a run needs at least 32 MiB (free some space "
        "there)"
    )


@pytest.mark.slow
def test_nothing_is_opened_in_the_working_folder_and_the_store_follows_the_results_dir(
    here: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    with serve_scripted("oracle", TASKS, in_process=True) as url:
        args = [a for a in run_args(url, elsewhere) if a != "--no-store"]
        refused([*args, "--task-ids", "no-such-task"], here)  # a refusal opens no store anywhere
        assert not elsewhere.exists()
        result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    assert list(here.iterdir()) == []  # no ./results/contextdelta.db
    assert (elsewhere / "contextdelta.db").is_file()


# ---- RUN_ID: a name or the printed path ------------------------------------------------------------------------


@pytest.mark.slow
def test_every_run_id_argument_takes_the_printed_path(here: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    with serve_scripted("oracle", TASKS, in_process=True) as url:
        result = runner.invoke(app, run_args(url, results))
        assert result.exit_code == 0, result.stderr
        printed = result.stdout.strip().splitlines()[-1]
        resumed = runner.invoke(
            app,
            [
                *["run-benchmark", "--tasks", str(TASKS), "--base-url", url, "--model", "scripted-oracle"],
                *["--resume", printed, "--quiet", "--no-store"],
            ],
        )
    assert resumed.exit_code == 0, resumed.stderr
    assert resumed.stdout.strip().splitlines()[-1] == printed
    copy = str(shutil.copytree(printed, tmp_path / "copy"))  # compare refuses one run given twice
    for words in (["verify"], ["report"], ["replay"], ["attribute"], ["compare", copy]):
        outcome = runner.invoke(app, [*words, printed])
        assert outcome.exit_code in (0, 1), (words, outcome.stderr)  # attribute/replay: nothing failed -> 0
    assert runner.invoke(app, ["verify", printed]).stdout.strip().splitlines()[-1] == "MATCH"
    name = Path(printed).name
    assert runner.invoke(app, ["verify", name, "--results-dir", str(results)]).exit_code == 0
    bad = runner.invoke(app, ["verify", str(tmp_path)])  # a folder that is no run directory
    assert bad.exit_code == 2 and "not a run directory" in bad.stderr
    assert RunDirectory(Path(printed)).read_manifest().counts.finished == 1


@pytest.mark.slow
def test_the_printed_resume_line_works_as_printed_whatever_env_now_says(here: Path, tmp_path: Path) -> None:
    """The endpoint, model and token cap came from flags; the resume line names only the run. A resume uses what
    the run recorded (a .env that now points elsewhere does not matter); a flag that contradicts it is refused."""
    (here / ".env").write_text(
        "CONTEXTDELTA_BASE_URL=http://127.0.0.1:9/v1\nCONTEXTDELTA_MODEL=another-model\n", encoding="utf-8"
    )
    with ScriptedServer("oracle", TASKS, faults=FaultPlan(fail_500="first:100000")) as server:
        url = server.base_url
        first = runner.invoke(
            app,
            [*run_args(url, tmp_path / "results", "--max-tokens", "512", "--max-retries", "0")],
        )
        assert first.exit_code == EXIT_ALL_FAILED, first.output  # its one episode is a failed trial
        path = first.stdout.strip().splitlines()[-1]
        line = next(x for x in first.stderr.splitlines() if x.startswith("Re-run its 1 failed trial with: "))
        printed = line.removeprefix("Re-run its 1 failed trial with: contextdelta ").split()
        assert printed == ["run-benchmark", "--resume", path, "--retry-failed"]
        server.faults = FaultPlan()
        again = runner.invoke(app, [*printed, "--quiet", "--no-store"])
        assert again.exit_code == 0, again.output
        other = runner.invoke(app, [*printed, "--quiet", "--no-store", "--model", "another-model"])
    manifest = RunDirectory(Path(path)).read_manifest()
    assert manifest.sessions[-1]["retry_failed"] is True and manifest.counts.succeeded == 1
    assert manifest.provider.max_tokens == 512
    assert other.exit_code == 2 and "model: run has 'scripted-oracle', now 'another-model'" in other.stderr


def test_a_bad_price_table_is_named_by_its_flag(here: Path) -> None:
    """The refusal began with the file's path alone ('.: cannot read price table' for --price-table '')."""
    (here / "prices.json").write_text('{"m": {"input_per_mtok": -1, "output_per_mtok": 1}}')
    with serve_scripted("oracle", TASKS, in_process=True) as url:
        message = refused([*run_args(url, here / "results"), "--price-table", "prices.json"], here)
    assert message.startswith("error: --price-table prices.json: m.input_per_mtok:"), message


@pytest.mark.slow
@pytest.mark.parametrize("key", ["sk-a-wrong-key", None])
def test_a_refused_key_names_the_key_variables_not_the_base_url(
    here: Path, monkeypatch: pytest.MonkeyPatch, key: str | None
) -> None:
    # the base URL answered: telling the user to check it sends them the wrong way (`here` unsets both keys)
    if key is not None:
        monkeypatch.setenv("OPENAI_API_KEY", key)
    with serve_scripted("oracle", TASKS, in_process=True, require_api_key="sk-the-users-key") as url:
        message = refused(run_args(url, here / "results"), here)
    said = "refused the API key (HTTP 401)" if key else "asks for an API key (HTTP 401) and none is set"
    assert said in message and "CONTEXTDELTA_API_KEY (or OPENAI_API_KEY" in message
    assert message.endswith("Nothing was run.") and "--base-url" not in message


@pytest.mark.slow
def test_a_server_that_takes_no_post_is_refused_at_once_naming_the_url(here: Path, no_retry_waits: None) -> None:
    # `python -m http.server` in the wrong folder: GET answers (404), POST is HTTP 501 Not Implemented, which no
    # wait changes: no retries, and the URL to check, not "wait for it to recover"
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        message = refused(run_args(f"http://127.0.0.1:{server.server_address[1]}/v1", here / "results"), here)
    finally:
        server.shutdown()
        server.server_close()
    assert "serves no chat completions: POST /chat/completions answered HTTP 501" in message
    assert "gave up after" not in message and "wait" not in message
    assert message.endswith("Nothing was run; check --base-url / CONTEXTDELTA_BASE_URL.")
