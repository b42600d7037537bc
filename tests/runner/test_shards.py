"""Shards (``run-benchmark --shard I/N``) and ``merge``: one plan in parts, joined back into one run group."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextdelta.canonical import canonical_json
from contextdelta.cli import app
from contextdelta.rundir import AGGREGATE_METRICS, MANIFEST, RAW_RUNS, RAW_RUNS_RECEIPTS, RunDirectory, RunStatus
from contextdelta.runner import (
    BenchmarkError,
    BenchmarkRequest,
    MergeError,
    Shard,
    merge_shards,
    plan_episodes,
    run_benchmark,
)
from contextdelta.testing import serve_scripted
from contextdelta.verify import verify_run
from tests.recorders import CtrlC
from tests.runner.conftest import TASKS, as_killed, benchmark_request


def request(url: str, results: Path, **overrides: object) -> BenchmarkRequest:
    fields: dict[str, object] = {"strategies": ["full_history", "last_n"], "repeats": 2, "seed": 11}
    fields["model"] = "scripted-context_trusting"
    return benchmark_request(url, results, **{**fields, **overrides})


def test_every_episode_is_in_exactly_one_shard() -> None:
    specs = plan_episodes(["a", "b", "c"], ["full_history", "last_n"], ["unprotected"], 3, 5)
    parts = [Shard(i, 4).select(specs) for i in range(1, 5)]
    assert sorted(s for part in parts for s in part) == sorted(specs)
    assert {len(p) for p in parts} <= {len(specs) // 4, len(specs) // 4 + 1}


@pytest.mark.parametrize("text", ["0/3", "4/3", "3", "a/b", "1/0", "-1/2"])
def test_a_bad_shard_is_refused_naming_the_form(text: str) -> None:
    with pytest.raises(ValueError, match="expected I/N"):
        Shard.parse(text)


@pytest.fixture(scope="module")
def trusting() -> Iterator[str]:
    with serve_scripted("context_trusting", TASKS) as url:
        yield url


@pytest.fixture(scope="module")
def sharded(trusting: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], str]:
    """Three shards of one plan and an unsharded run of the same plan, in one results folder."""
    results = tmp_path_factory.mktemp("results")
    shards = [run_benchmark(request(trusting, results, shard=f"{i}/3")).path.name for i in (1, 2, 3)]
    whole = run_benchmark(request(trusting, results)).path.name
    return results, shards, whole


def verdicts(path: Path) -> dict[str, dict[str, Any]]:
    return {r.run_id: r.verdict.model_dump() for r in RunDirectory(path).read_episodes()}


@pytest.mark.slow
def test_three_shards_merged_equal_the_unsharded_run_and_verify(sharded: tuple[Path, list[str], str]) -> None:
    results, shards, whole = sharded
    manifests = [RunDirectory(results / s).read_manifest() for s in shards]
    assert [m.shard.index for m in manifests if m.shard] == [1, 2, 3]
    assert len({m.plan_sha256 for m in manifests}) == 1
    assert manifests[0].plan_sha256 == RunDirectory(results / whole).read_manifest().plan_sha256
    assert sum(m.counts.planned for m in manifests) == 3 * 2 * 2 * 2
    assert all(m.status is RunStatus.COMPLETE for m in manifests)
    assert verify_run(results / shards[1]).ok  # a shard on its own is a verifiable run directory

    out = CliRunner().invoke(app, ["merge", *reversed(shards), "--out", "merged-ok", "--results-dir", str(results)])
    assert out.exit_code == 0, out.output
    assert out.stdout.strip().splitlines()[-1] == str(results / "merged-ok")
    merged = RunDirectory(results / "merged-ok").read_manifest()
    assert merged.status is RunStatus.COMPLETE and merged.shard is None
    assert merged.counts.finished == merged.counts.planned == 24
    assert [m.run_group_id for m in merged.merged_from or []] == shards
    assert verdicts(results / "merged-ok") == verdicts(results / whole)
    assert {r.run_group_id for r in RunDirectory(results / "merged-ok").read_episodes()} == {"merged-ok"}
    result = verify_run(results / "merged-ok")
    assert result.ok, result.lines()
    # each shard's reports say it is one; the merged run's do not
    assert "**Shard 2/3, not the whole plan" in (results / shards[1] / "benchmark_report.md").read_text()
    for name in ("benchmark_report.md", "failure_atlas.md", AGGREGATE_METRICS):
        assert "not the whole plan" not in (results / "merged-ok" / name).read_text()
    # the same plan gives the same per-episode verdicts, and a varied verdict set (not all alike)
    assert len({json.dumps(v, sort_keys=True) for v in verdicts(results / whole).values()}) > 1


def _edit_manifest(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def edit(path: Path) -> None:
        data = json.loads((path / MANIFEST).read_text())
        change(data)
        (path / MANIFEST).write_text(json.dumps(data))

    return edit


def _set(*keys: str, value: object) -> Callable[[Path], None]:
    def change(data: dict[str, Any]) -> None:
        for key in keys[:-1]:
            data = data[key]
        data[keys[-1]] = value

    return _edit_manifest(change)


def _analysis(path: Path) -> None:
    data = json.loads((path / AGGREGATE_METRICS).read_text())
    data["analysis"]["resamples"] = 123
    (path / AGGREGATE_METRICS).write_text(json.dumps(data))


def _drop_last_episode(path: Path) -> None:
    """As a session killed before it recorded the last episode leaves the run: neither its record nor its receipt."""
    for name in (RAW_RUNS, RAW_RUNS_RECEIPTS):
        lines = (path / name).read_text().splitlines(keepends=True)
        (path / name).write_text("".join(lines[:-1]))


MISMATCHES: dict[str, tuple[Callable[[Path], None], str]] = {
    "model": (_set("provider", "model", value="another-model"), "model differs"),
    "endpoint": (_set("provider", "base_url", value="http://127.0.0.1:9/v1"), "endpoint differs"),
    "suite": (_set("hashes", "suite_sha256", value="0" * 64), "suite differs"),
    "harness": (_set("hashes", "harness_sha256", value="0" * 64), "harness differs"),
    "analysis": (_analysis, "analysis differs"),
    "plan seed": (_set("seed", value=12), "plan differs (seed)"),
    "plan hash": (_set("plan_sha256", value="0" * 64), "plan differs (plan_sha256)"),
    "prices": (
        _set("prices", value={"scripted-oracle": {"input_per_mtok": 1.0, "output_per_mtok": 1.0}}),
        "plan differs (prices)",
    ),
    "missing episode": (_drop_last_episode, "lost records it sealed"),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(MISMATCHES))
def test_merge_refuses_each_kind_of_mismatch(kind: str, sharded: tuple[Path, list[str], str], tmp_path: Path) -> None:
    results, shards, _ = sharded
    for name in shards:
        shutil.copytree(results / name, tmp_path / name)
    edit, message = MISMATCHES[kind]
    edit(tmp_path / shards[2])
    out = CliRunner().invoke(app, ["merge", *shards, "--out", "merged", "--results-dir", str(tmp_path)])
    assert out.exit_code == 2, out.output
    assert message in out.output
    assert not (tmp_path / "merged").exists()


@pytest.mark.slow
def test_merge_refuses_a_missing_shard_a_duplicate_episode_and_an_unsharded_run(
    sharded: tuple[Path, list[str], str],
) -> None:
    results, shards, whole = sharded
    with pytest.raises(MergeError, match=r"missing, first .* \(shard 3/3 was not given\)"):
        merge_shards(results, shards[:2], "merged-2")
    twin = results / f"{shards[0]}-copy"
    shutil.copytree(results / shards[0], twin)
    try:
        with pytest.raises(MergeError, match="present twice"):
            merge_shards(results, [*shards, twin.name], "merged-dup")
    finally:
        shutil.rmtree(twin)
    with pytest.raises(MergeError, match="shard: it is not a shard"):
        merge_shards(results, [*shards, whole], "merged-whole")
    with pytest.raises(MergeError, match="already exists"):
        merge_shards(results, shards, shards[0])
    assert not any((results / name).exists() for name in ("merged-2", "merged-dup", "merged-whole"))


@pytest.mark.slow
def test_a_shard_resumes_as_that_shard_and_refuses_another(
    sharded: tuple[Path, list[str], str], trusting: str, tmp_path: Path
) -> None:
    results, shards, _ = sharded
    shutil.copytree(results / shards[1], tmp_path / shards[1])
    _drop_last_episode(tmp_path / shards[1])
    as_killed(tmp_path / shards[1])
    with pytest.raises(BenchmarkError, match="--shard: run has '2/3', now '1/3'"):
        run_benchmark(
            BenchmarkRequest(
                tasks_dir=TASKS,
                base_url=trusting,
                results_dir=tmp_path,
                resume=shards[1],
                shard="1/3",
                model="scripted-context_trusting",
            )
        )
    outcome = run_benchmark(
        BenchmarkRequest(
            tasks_dir=TASKS,
            base_url=trusting,
            results_dir=tmp_path,
            resume=shards[1],
            model="scripted-context_trusting",
        )
    )
    assert outcome.manifest.status is RunStatus.COMPLETE
    assert outcome.manifest.shard is not None and outcome.manifest.shard.index == 2
    assert verify_run(tmp_path / shards[1]).ok


def test_run_benchmark_refuses_a_bad_shard_flag(tmp_path: Path) -> None:
    out = CliRunner().invoke(
        app, ["run-benchmark", "--tasks", str(TASKS), "--shard", "4/3", "--results-dir", str(tmp_path), "--quiet"]
    )
    assert out.exit_code == 2
    assert "--shard '4/3': expected I/N" in out.output
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_merge_refuses_a_shard_changed_after_its_run(sharded: tuple[Path, list[str], str], tmp_path: Path) -> None:
    """A value verify cannot re-derive (the endpoint's usage) edited in a shard: merging would seal the edit as the
    merged run's own, and verify of the merged run would say MATCH."""
    results, shards, _ = sharded
    for name in shards:
        shutil.copytree(results / name, tmp_path / name)
    raw = tmp_path / shards[1] / RAW_RUNS
    lines = raw.read_text().splitlines(keepends=True)
    record = json.loads(lines[0])
    record["trace"]["totals"]["agent_usage"]["prompt_tokens"] += 100000
    lines[0] = canonical_json(record) + "\n"
    raw.write_text("".join(lines))
    out = CliRunner().invoke(app, ["merge", *shards, "--out", "merged", "--results-dir", str(tmp_path)])
    assert out.exit_code == 2, out.output
    message = " ".join(out.stderr.split())
    assert f"shard {shards[1]} was changed after its run" in message
    assert "trace.totals.agent_usage.prompt_tokens: raw_runs.jsonl line 1: edited after the run" in message
    assert f"contextdelta verify {shards[1]}" in message
    assert not (tmp_path / "merged").exists()


def test_merge_takes_the_paths_run_benchmark_printed_and_writes_beside_them(
    sharded: tuple[Path, list[str], str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results, shards, _ = sharded
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    for name in shards:
        shutil.copytree(results / name, folder / name)
    monkeypatch.chdir(tmp_path)  # no --results-dir: the shards' own folder, not results/ here
    out = CliRunner().invoke(app, ["merge", *(str(folder / s) for s in shards), "--out", "by-path"])
    assert out.exit_code == 0, out.output
    assert out.stdout.strip().splitlines()[-1] == str(folder / "by-path") and not (tmp_path / "results").exists()
    other = tmp_path / "other"
    other.mkdir()
    shutil.move(str(folder / shards[0]), other / shards[0])
    mixed = [str(other / shards[0]), *(str(folder / s) for s in shards[1:])]
    out = CliRunner().invoke(app, ["merge", *mixed, "--out", "mixed"])
    assert out.exit_code == 2 and "not in one results folder" in " ".join(out.stderr.split())
    out = CliRunner().invoke(
        app, ["merge", *(str(folder / s) for s in shards[1:]), "--out", "x", "--results-dir", str(other)]
    )
    assert out.exit_code == 2 and f"not in --results-dir {other}" in " ".join(out.stderr.split())


@pytest.mark.slow
def test_a_shard_that_stopped_early_is_named_to_resume(
    sharded: tuple[Path, list[str], str], trusting: str, tmp_path: Path
) -> None:
    """A shard stopped early by Ctrl-C (status incomplete, nothing lost) is to be resumed; one that finished and then
    lost sealed records (the 'missing episode' case above) is to be restored instead: --resume refuses it."""
    results, shards, _ = sharded
    for name in shards[:2]:
        shutil.copytree(results / name, tmp_path / name)
    outcome = run_benchmark(request(trusting, tmp_path, shard="3/3", concurrency=1), recorders=[CtrlC()])
    stopped = outcome.path.name
    assert RunDirectory(tmp_path / stopped).read_manifest().status is RunStatus.INCOMPLETE
    with pytest.raises(MergeError, match=rf"shard 3/3, {stopped}, is incomplete: resume it") as err:
        merge_shards(tmp_path, [*shards[:2], stopped], "merged")
    assert "restore" not in str(err.value)


@pytest.mark.slow
def test_an_interrupted_merge_leaves_nothing_under_out_and_the_next_merge_succeeds(
    sharded: tuple[Path, list[str], str], tmp_path: Path
) -> None:
    """The merged run is built in a hidden folder and renamed into place: Ctrl-C halfway (here, at the first
    episode a recorder sees) leaves neither a half-written `--out` that the next merge would refuse ("already
    exists") nor the hidden folder; the same merge then succeeds and verifies."""
    results, shards, _ = sharded
    for name in shards:
        shutil.copytree(results / name, tmp_path / name)
    with pytest.raises(KeyboardInterrupt):
        merge_shards(tmp_path, shards, "merged", recorders=[CtrlC()])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(shards)
    merged = merge_shards(tmp_path, shards, "merged")
    assert merged.path == tmp_path / "merged"
    assert merged.read_manifest().status is RunStatus.COMPLETE
    assert verify_run(merged.path).ok
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*shards, "merged"])


@pytest.mark.slow
def test_a_merge_that_cannot_write_is_exit_2_naming_the_folder(
    sharded: tuple[Path, list[str], str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results, shards, _ = sharded
    for name in shards:
        shutil.copytree(results / name, tmp_path / name)
    real_copy = shutil.copyfile

    def full_disk(source: Any, target: Any, **kwargs: Any) -> Any:
        if ".merged.merging-" in str(target):
            raise OSError(28, "No space left on device")
        return real_copy(source, target, **kwargs)

    monkeypatch.setattr(shutil, "copyfile", full_disk)
    out = CliRunner().invoke(app, ["merge", *shards, "--out", "merged", "--results-dir", str(tmp_path)])
    assert out.exit_code == 2, out.output
    assert f"cannot write the merged run in {tmp_path}: No space left on device" in " ".join(out.stderr.split())
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(shards)


_KILLED_AT_RENAME = """
import os, signal, sys
real = os.rename
def rename(source, target, *args, **kwargs):
    if ".merging-" in str(source):
        os.kill(os.getpid(), signal.SIGKILL)
    return real(source, target, *args, **kwargs)
os.rename = rename
from contextdelta.cli import main
sys.argv = ["contextdelta", *sys.argv[1:]]
main()
"""


@pytest.mark.slow
def test_a_merge_killed_before_its_rename_leaves_a_folder_the_next_merge_removes(
    sharded: tuple[Path, list[str], str], tmp_path: Path
) -> None:
    """SIGKILL once the merged run group is whole in its hidden ``.OUT.merging-XXXX`` folder, before the rename: the
    folder stayed in the results folder for good. The next merge (or run-benchmark) removes it and says so."""
    results, shards, _ = sharded
    for name in shards:
        shutil.copytree(results / name, tmp_path / name)
    args = ["merge", *shards, "--out", "merged", "--results-dir", str(tmp_path)]
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_AT_RENAME, *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    (left,) = [p for p in tmp_path.iterdir() if p.name.startswith(".merged.merging-")]
    old = time.time() - 3600
    os.utime(left, (old, old))
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    said = " ".join(out.stderr.split())
    assert (
        f"repaired: removed {left}: the hidden folder left by a merge killed before its run directory existed" in said
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*shards, "merged"])
    assert verify_run(tmp_path / "merged").ok


def test_run_benchmark_says_a_shard_is_not_the_whole_plan(oracle_url: str, tmp_path: Path) -> None:
    """The last summary line of a shard read '3/3 episodes, 3 succeeded, 0 failed trials; status complete', like a
    whole run."""
    args = ["run-benchmark", "--tasks", str(TASKS), "--base-url", oracle_url, "--model", "scripted-oracle"]
    args += ["--task-ids", "order-desk-cancel", "--strategies", "full_history,last_n"]
    args += ["--protection-modes", "unprotected", "--shard", "2/2", "--results-dir", str(tmp_path), "--no-store"]
    out = CliRunner().invoke(app, [*args, "--quiet"])
    assert out.exit_code == 0, out.output
    assert "status complete; shard 2/2, not the whole plan" in " ".join(out.stderr.split()), out.stderr
