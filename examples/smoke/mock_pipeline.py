"""The plumbing fixture ``mock_pipeline.jsonl``: make it, load it, and turn it into a run directory.

PLUMBING ONLY. The episodes come from the scripted test server's deterministic policies (not a model), picked
because each shows one known failure mode; they test that import, replay and attribute work end to end. They
are not a benchmark result and say nothing about any model.

    python examples/smoke/mock_pipeline.py generate                 # re-record mock_pipeline.jsonl (~1 min)
    python examples/smoke/mock_pipeline.py materialize --results-dir results
    contextdelta replay mock-pipeline && contextdelta attribute mock-pipeline

Every episode is recorded by the real code path: ``run_benchmark`` over HTTP against the scripted server (run
in this process; agent loop, context strategy, world, graders). One is then edited by hand and
says so in its label (``doctored``): the scripted server's summaries are extractive and never wrong, so the
``summary_distorted_state`` example has the version of one resource in its summary lowered by one, which is what
a lossy model summary does.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contextdelta.canonical import canonical_json, content_hash
from contextdelta.rundir import RunDirectory, RunDirectoryRecorder, RunEnd, RunStart
from contextdelta.rundir.records import Counts, EpisodeRecord, RunManifest, RunStatus

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "mock_pipeline.jsonl"
REPO = HERE.parents[1]
RUN_GROUP_ID = "mock-pipeline"
KIND = "contextdelta-plumbing-fixture"
NOTICE = (
    "PLUMBING FIXTURE, NOT A BENCHMARK RESULT: episodes recorded from the scripted test server's deterministic "
    "policies (no model), each labelled with the failure mode it was picked to show. It tests import, replay and "
    "attribute. Regenerate with: python examples/smoke/mock_pipeline.py generate"
)


@dataclass(frozen=True)
class Pick:
    """One episode to record: the policy and condition, and the failure mode it is known to show."""

    failure_mode: str | None
    policy: str
    task_id: str
    strategy: str
    mode: str
    why: str
    max_steps: int | None = None
    faults: dict[str, Any] = field(default_factory=dict)
    doctor: bool = False


PICKS: tuple[Pick, ...] = (
    Pick(
        "never_refreshed",
        "unsafe",
        "order-grinder-refund",
        "full_history",
        "unprotected",
        "A colleague refunds the grinder after the agent's only read of A-1042; the agent never reads it again and "
        "refunds a second time. The change was never visible, even in the full history.",
    ),
    Pick(
        "context_dropped_fresh_observation",
        "unsafe",
        "cfg-legacy-cleanup",
        "last_n",
        "unprotected",
        "A later read shows the flag changed; last_n (n=3) drops that read (gap 4) before the prohibited write.",
    ),
    Pick(
        "ignored_visible_change",
        "unsafe",
        "cfg-legacy-cleanup",
        "full_history",
        "unprotected",
        "The same trajectory with full history: the read showing the change is in the messages sent, and the "
        "agent writes anyway.",
    ),
    Pick(
        "summary_distorted_state",
        "unsafe",
        "cfg-legacy-cleanup",
        "semantic_summary",
        "unprotected",
        "The same trajectory with a summary that covers the fresher read; the summary's version of the resource "
        "was lowered by one (doctored), so the summary contradicts the last observation.",
        doctor=True,
    ),
    Pick(
        "context_dropped_own_write",
        "unsafe",
        "order-split-refund",
        "last_n",
        "unprotected",
        "The agent's own refund is dropped by last_n (gap 4); it issues the same refund again.",
    ),
    Pick(
        "unauthorized_write",
        "unsafe",
        "cfg-staging-access",
        "full_history",
        "unprotected",
        "The agent writes a setting outside its principal's scope; the world refuses it as forbidden.",
    ),
    Pick(
        "end_state_miss",
        "context_trusting",
        "order-grinder-refund",
        "last_n",
        "unprotected",
        "The trusting policy skips the read of A-1017 (already in its context), the read that would have set off "
        "the colleague's refund; nobody else ever changes A-1042, so the agent's note acts on current state and "
        "the expected refund is simply missing: a wrong end state with no stale-state cause.",
    ),
    Pick(
        "max_steps",
        "oracle",
        "cal-design-review",
        "full_history",
        "unprotected",
        "The careful policy with a step limit of 3: the episode ends before the task is done.",
        max_steps=3,
    ),
    Pick(
        "provider_error",
        "oracle",
        "cfg-search-ramp",
        "full_history",
        "unprotected",
        "Every chat request answers HTTP 500; the provider gives up after its retries.",
        faults={"fail_500": "first:1000"},  # the run's requests; the endpoint check before it still passes
    ),
    Pick(
        None,
        "oracle",
        "order-desk-cancel",
        "full_history",
        "freshness_contract",
        "The careful policy under the freshness contract: a success, nothing to attribute.",
    ),
)


@dataclass
class LabelledEpisode:
    """One fixture line: the known failure mode and the episode."""

    label: dict[str, Any]
    record: EpisodeRecord

    @property
    def failure_mode(self) -> str | None:
        mode: str | None = self.label["failure_mode"]
        return mode


@dataclass
class Fixture:
    """The parsed fixture: header (with the run manifest) and labelled episodes."""

    header: dict[str, Any]
    manifest: RunManifest
    episodes: list[LabelledEpisode]

    def episode(self, failure_mode: str | None) -> EpisodeRecord:
        """The episode labelled with ``failure_mode`` (None: the success)."""
        return next(e.record for e in self.episodes if e.failure_mode == failure_mode)


def load_fixture(path: Path = FIXTURE) -> Fixture:
    """Read ``mock_pipeline.jsonl``; the first line must be the plumbing-fixture header."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    if header.get("kind") != KIND:
        raise ValueError(f"{path}: the first line is not a {KIND} header")
    episodes = []
    for line in lines[1:]:
        value = json.loads(line)
        episodes.append(LabelledEpisode(value["label"], EpisodeRecord.model_validate(value["episode"])))
    return Fixture(header, RunManifest.model_validate(header["manifest"]), episodes)


def write_run_directory(results_dir: Path, fixture: Fixture | None = None, tasks_dir: Path = REPO / "tasks") -> Path:
    """Write the fixture as run directory ``results_dir/mock-pipeline`` (manifest, raw_runs.jsonl, derived files,
    task snapshot) and return its path."""
    fixture = fixture or load_fixture()
    directory = RunDirectory(results_dir / fixture.manifest.run_group_id)
    tasks = sorted({(e.record.world, e.record.task_id) for e in fixture.episodes})
    directory.create(fixture.manifest, [(w, t, tasks_dir / w / f"{t}.yaml") for w, t in tasks])
    records = tuple(e.record for e in fixture.episodes)
    recorder = RunDirectoryRecorder(directory)
    path, manifest = directory.path, fixture.manifest
    recorder.start(RunStart(path=path, manifest=manifest, planned=len(records), done=(), pending=len(records)))
    for record in records:
        recorder.episode(record)
    recorder.finish(RunEnd(path=path, manifest=manifest, records=records, new=len(records)))
    directory.write_manifest(manifest)  # last, as a run does: its seal covers the records and the derived files
    return directory.path


# ---- generating ------------------------------------------------------------------------------------------------


def _doctor_summary(record: EpisodeRecord) -> tuple[EpisodeRecord, str]:
    """Lower the version of the decisive resource by one in the summary sent at the decisive step."""
    harmful = [f.seq for f in record.verdict.event_flags if f.stale or f.duplicate or f.prohibited]
    events = {e.seq: e for e in record.trace.tool_events()}
    decisive = events[min(harmful)]
    resource = decisive.resource
    data = record.model_dump(mode="json")
    step = data["trace"]["steps"][decisive.step - 1]
    if not step["context"]["inserted"]:
        raise RuntimeError(f"{record.run_id}: no summary was sent at step {decisive.step}; pick another episode")
    pattern = re.compile(r'(\{[^\n]*"resource":"' + re.escape(str(resource)) + r'"[^\n]*"version":)(\d+)')
    for index in step["context"]["inserted"]:
        message = step["messages"][index]
        match = pattern.search(message["content"] or "")
        if match:
            old = int(match.group(2))
            message["content"] = pattern.sub(rf"\g<1>{max(1, old - 1)}", message["content"], count=1)
            step["messages_sha256"] = content_hash(step["messages"])
            note = (
                f"doctored: the summary sent at step {decisive.step} states {resource} at version "
                f"{max(1, old - 1)} instead of {old} (the scripted server's summaries are never wrong)"
            )
            return EpisodeRecord.model_validate(data), note
    raise RuntimeError(f"{record.run_id}: the summary at step {decisive.step} does not mention {resource}")


def generate(path: Path = FIXTURE, tasks_dir: Path = REPO / "tasks") -> Fixture:
    """Record every pick with the scripted server and write the fixture to ``path``."""
    from contextdelta.runner import BenchmarkRequest, run_benchmark
    from contextdelta.testing import serve_scripted

    picked: list[LabelledEpisode] = []
    manifests: list[RunManifest] = []
    with tempfile.TemporaryDirectory() as tmp:
        for pick in PICKS:
            with serve_scripted(pick.policy, tasks_dir, in_process=True, **pick.faults) as url:
                outcome = run_benchmark(
                    BenchmarkRequest(
                        tasks_dir=tasks_dir,
                        task_ids=[pick.task_id],
                        strategies=[pick.strategy],
                        protection_modes=[pick.mode],
                        repeats=1,
                        max_steps=pick.max_steps,
                        seed=0,
                        base_url=url,
                        model=f"scripted-{pick.policy}",
                        api_key="not-a-secret",
                        results_dir=Path(tmp),
                        concurrency=1,
                    )
                )
            (record,) = outcome.records
            manifests.append(outcome.manifest)
            record = record.model_copy(update={"run_group_id": RUN_GROUP_ID})
            note = None
            if pick.doctor:
                record, note = _doctor_summary(record)
            label = {"failure_mode": pick.failure_mode, "policy": pick.policy, "why": pick.why, "doctored": note}
            picked.append(LabelledEpisode(label, record))
    manifest = _merged_manifest(manifests, [e.record for e in picked])
    header = {  # notice first: the fixture's first line says what it is before anything else
        "notice": NOTICE,
        "kind": KIND,
        "plumbing_only": True,
        "generated_by": "examples/smoke/mock_pipeline.py generate",
        "manifest": manifest.model_dump(mode="json"),
    }
    lines = [json.dumps(header, ensure_ascii=False, separators=(",", ":"))]
    lines += [canonical_json({"label": e.label, "episode": e.record.model_dump(mode="json")}) for e in picked]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return Fixture(header, manifest, picked)


def _merged_manifest(manifests: Sequence[RunManifest], records: Sequence[EpisodeRecord]) -> RunManifest:
    first = manifests[0]
    tasks = {t.id: t for m in manifests for t in m.tasks}
    return first.model_copy(
        update={
            "run_group_id": RUN_GROUP_ID,
            "status": RunStatus.COMPLETE,
            "stop_reason": None,
            "sessions": [],
            "provider": first.provider.model_copy(
                update={"model": "scripted (several policies)", "summary_model": "scripted (several policies)"}
            ),
            "strategies": sorted({r.strategy for r in records}),
            "protection_modes": sorted({r.protection_mode for r in records}),
            "max_steps": None,
            "tasks": [tasks[t] for t in sorted(tasks)],
            "counts": Counts(
                planned=len(records),
                finished=len(records),
                failed=sum(r.failed for r in records),
                succeeded=sum(r.verdict.success for r in records),
            ),
            "finished_at": max(m.finished_at or m.updated_at for m in manifests),
        }
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="record the episodes again and rewrite mock_pipeline.jsonl")
    gen.add_argument("--out", type=Path, default=FIXTURE)
    mat = sub.add_parser("materialize", help="write the fixture as run directory RESULTS_DIR/mock-pipeline")
    mat.add_argument("--results-dir", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    if args.command == "generate":
        fixture = generate(args.out)
        for episode in fixture.episodes:
            print(f"{episode.record.run_id:55} {episode.failure_mode}")
        print(f"wrote {args.out}")
    else:
        print(write_run_directory(args.results_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
