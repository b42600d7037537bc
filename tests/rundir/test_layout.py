"""Creating a run directory: whole or not at all under the run's name."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from contextdelta.rundir import MANIFEST, RAW_RUNS, RunDirectory, RunManifest, SessionLock, remove_abandoned_staging
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


def _aged(path: Path) -> Path:
    """``path`` as if last changed an hour ago (past the grace a builder has between making and locking it)."""
    path.mkdir(parents=True, exist_ok=True)
    old = time.time() - 3600
    os.utime(path, (old, old))
    return path


def test_abandoned_staging_folders_are_removed_but_never_one_a_live_process_holds(tmp_path: Path) -> None:
    """A run-benchmark or merge killed while it built its directory leaves a hidden ``.ID.creating`` or
    ``.ID.merging-XXXX`` folder that nothing read and nothing cleaned; the clean-up removes exactly those whose
    builder is gone: not one whose lock is held (a live builder), nor one changed in the last seconds, nor a link,
    nor anything that is not a staging folder."""
    killed = tmp_path / ".20260101T000000Z-aaaaaa.creating"
    (killed / "tasks").mkdir(parents=True)
    (killed / "raw_runs.jsonl").write_text("")
    _aged(killed)
    merge = _aged(tmp_path / ".merged.merging-x1y2z3")
    live = _aged(tmp_path / ".20260101T000000Z-bbbbbb.creating")
    fresh = tmp_path / ".20260101T000000Z-cccccc.creating"
    fresh.mkdir()
    run = _aged(tmp_path / "20260101T000000Z-dddddd")
    mine = tmp_path / ".photos.creating"  # named like one, but holding what no run writes
    (mine / "cat.jpg").parent.mkdir()
    (mine / "cat.jpg").write_bytes(b"\xff")
    _aged(mine)
    hidden = _aged(tmp_path / ".cache")
    outside = _aged(tmp_path.parent / f"{tmp_path.name}-outside")
    (tmp_path / ".linked.creating").symlink_to(outside)
    held = SessionLock.acquire(live)
    assert held is not None and held.held
    try:
        said = remove_abandoned_staging(tmp_path)
    finally:
        held.release()
    assert not killed.exists() and not merge.exists()
    assert live.is_dir() and fresh.is_dir() and run.is_dir() and hidden.is_dir() and outside.is_dir()
    assert (tmp_path / ".linked.creating").is_symlink()
    assert (mine / "cat.jpg").is_file()
    assert len(said) == 3
    assert said[0].startswith(f"removed {killed}: the hidden folder left by a run-benchmark killed")
    assert said[1].startswith(f"removed {merge}: the hidden folder left by a merge killed")
    assert said[2].startswith(f"left {mine}: it is named like the hidden folder of a run-benchmark that was killed")
    assert "cat.jpg" in said[2]
    assert remove_abandoned_staging(tmp_path / "missing") == []


def test_a_run_directory_being_created_is_locked_until_it_is_in_place(tmp_path: Path) -> None:
    """The hidden folder is locked from the moment it exists, and the lock comes back held on the run directory."""
    source = RunDirectory(runs.single_task_run())
    manifest = source.read_manifest()
    (task,) = manifest.tasks
    files = [(task.world, task.id, source.path / "tasks" / task.world / f"{task.id}.yaml")]
    target = RunDirectory(tmp_path / manifest.run_group_id)
    staging = tmp_path / f".{manifest.run_group_id}.creating"
    seen: list[bool] = []
    real = RunDirectory.write_manifest

    def write_manifest(self: RunDirectory, value: RunManifest) -> RunManifest:
        old = time.time() - 3600
        os.utime(staging, (old, old))
        seen.append(remove_abandoned_staging(tmp_path) == [] and staging.is_dir())
        return real(self, value)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RunDirectory, "write_manifest", write_manifest)
        lock = target.create(manifest, files)
    try:
        assert seen == [True]
        assert SessionLock.acquire(target.path) is None  # still held: this session's hold on the run
    finally:
        lock.release()
    again = SessionLock.acquire(target.path)
    assert again is not None and again.held
    again.release()
