"""Creating a run directory: whole or not at all under the run's name."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextdelta.rundir import MANIFEST, RAW_RUNS, RunDirectory
from tests.report import runs


@pytest.mark.slow
def test_a_run_directory_cut_short_while_created_leaves_nothing_under_the_runs_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder under the run's name without a manifest can be neither resumed nor read (the dashboard lists it as
    unreadable): the folder is made beside it, hidden, and renamed into place once the manifest is written."""
    source = RunDirectory(runs.single_task_run())
    manifest = source.read_manifest()
    (task,) = manifest.tasks
    files = [(task.world, task.id, source.path / "tasks" / task.world / f"{task.id}.yaml")]
    target = RunDirectory(tmp_path / "results" / manifest.run_group_id)

    def interrupted(self: RunDirectory, value: object) -> None:
        raise KeyboardInterrupt  # a Ctrl-C (or a full disk) just before the first manifest is written

    with monkeypatch.context() as patch:
        patch.setattr(RunDirectory, "write_manifest", interrupted)
        with pytest.raises(KeyboardInterrupt):
            target.create(manifest, files)
    assert list((tmp_path / "results").iterdir()) == []  # neither the run's folder nor the hidden one it was made in
    target.create(manifest, files)
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == [manifest.run_group_id]
    assert target.read_manifest().run_group_id == manifest.run_group_id and target.manifest_edits() == []
    assert (target.path / RAW_RUNS).read_bytes() == b"" and (target.path / MANIFEST).is_file()
    assert target.snapshot_edits() == []
