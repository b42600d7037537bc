"""The manifest says ``complete`` only once every derived file is written: a finalisation interrupted between two
of them leaves the run ``running`` (resumable), ``verify`` says to resume it, and the resume completes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.report import _build
from contextdelta.rundir import BENCHMARK_REPORT, DERIVED_FILES, RunDirectory, RunStatus, atomic_write_text
from contextdelta.runner import FinaliseInterrupted, run_benchmark
from contextdelta.verify import verify_run
from tests.runner.conftest import SMALL, benchmark_request

runner = CliRunner()


@pytest.mark.slow
def test_an_interrupted_finalisation_is_incomplete_until_resumed(
    oracle_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[str] = []
    real = atomic_write_text  # what the report files are written with (contextdelta.report._build imports it)

    def interrupted(path: Path, text: str) -> None:
        if path.name == BENCHMARK_REPORT:
            raise KeyboardInterrupt  # a Ctrl-C (or a kill) between two derived files
        written.append(path.name)
        real(path, text)

    monkeypatch.setattr(_build, "atomic_write_text", interrupted)
    request = benchmark_request(oracle_url, tmp_path, task_ids=SMALL[:1], strategies=["full_history"])
    with pytest.raises(FinaliseInterrupted):
        run_benchmark(request)
    (path,) = list(tmp_path.iterdir())
    assert written == ["failure_atlas.md"]
    assert RunDirectory(path).read_manifest().status is RunStatus.RUNNING
    assert not (path / BENCHMARK_REPORT).exists()
    result = runner.invoke(app, ["verify", str(path)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: incomplete: run run-benchmark --resume {path.name} (status running")
    allowed = verify_run(path, allow_incomplete=True)
    assert any(f"{BENCHMARK_REPORT} not written yet" in note for note in allowed.notes), allowed.notes
    monkeypatch.setattr(_build, "atomic_write_text", real)
    resumed = run_benchmark(benchmark_request(oracle_url, tmp_path, task_ids=None, resume=path.name))
    assert resumed.manifest.status is RunStatus.COMPLETE
    assert all((path / name).is_file() for name in DERIVED_FILES)
    assert verify_run(path).lines() == ["MATCH"]


def test_complete_is_written_after_every_recorder_finished(oracle_url: str, tmp_path: Path) -> None:
    seen: list[Any] = []

    class Watcher:
        def start(self, run: object) -> None:
            pass

        def episode(self, record: object) -> None:
            pass

        def finish(self, run: Any) -> None:
            directory = RunDirectory(run.path)
            seen.append(directory.read_manifest().status)
            seen.append(sorted(name for name in DERIVED_FILES if directory.file(name).is_file()))

    outcome = run_benchmark(
        benchmark_request(oracle_url, tmp_path, task_ids=SMALL[:1], strategies=["full_history"]), recorders=[Watcher()]
    )
    assert seen == [RunStatus.RUNNING, sorted(DERIVED_FILES)]  # every derived file on disk, the manifest not yet
    assert outcome.manifest.status is RunStatus.COMPLETE
