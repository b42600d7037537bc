"""No evaluator-only value of any task reaches any HTTP request body the model endpoint receives.

Every task of the suite gets unique markers planted in its evaluator-only fields that never become world state
(title, hidden-mutation ids and triggers, prohibited-action reasons, final-answer facts, the hazard's own slot is
an enum so it cannot carry one); then every task runs under every strategy and both protection modes against
the scripted server over real HTTP, which keeps every request body it receives. No body may contain a marker.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from contextdelta.context import STRATEGY_NAMES
from contextdelta.runner import BenchmarkRequest, run_benchmark
from contextdelta.testing.app import ScriptedServer

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def plant_markers(source: Path, target: Path) -> list[str]:
    markers: list[str] = []
    for path in sorted(source.glob("*/*.yaml")):
        data = yaml.safe_load(path.read_text())
        evaluator = data["evaluator"]
        base = f"EVALMARK{len(markers):03d}"
        data["title"] = f"{data['title']} {base}T"
        markers.append(f"{base}T")
        for index, mutation in enumerate(evaluator.get("hidden_mutations", [])):
            mutation["id"] = f"{mutation['id']}-evalmark{len(markers):03d}m{index}"
            markers.append(mutation["id"])
        for action in evaluator.get("prohibited_actions", []):
            action["reason"] = f"{action['reason']} {base}R"
            markers.append(f"{base}R")
        evaluator["final_answer_facts"] = [*evaluator.get("final_answer_facts", []), f"{base}F"]
        markers.append(f"{base}F")
        out = target / path.parent.name / path.name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(yaml.safe_dump(data, sort_keys=False))
    return markers


@pytest.mark.slow  # every task x strategy x mode x two policies: hundreds of episodes
def test_no_marker_reaches_any_request_body(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    markers = plant_markers(TASKS, tasks)
    assert len(markers) > 24 * 2
    for policy in ("oracle", "unsafe"):
        with ScriptedServer(policy, tasks, keep_requests=True) as server:
            outcome = run_benchmark(
                BenchmarkRequest(
                    tasks_dir=tasks,
                    base_url=server.base_url,
                    model=f"scripted-{policy}",
                    results_dir=tmp_path / policy,
                    repeats=1,
                    concurrency=8,
                    allow_unlocked=True,  # the planted tasks are edited copies without a SUITE.lock
                )
            )
            bodies = list(server.received or [])
        assert outcome.manifest.counts.finished == 24 * len(STRATEGY_NAMES) * 2
        assert len(bodies) > 24 * 8 * 4
        summary_requests = [b for b in bodies if b"ContextDelta summary prompt" in b]
        assert summary_requests, "semantic_summary requests must be covered too"
        for body in bodies:
            text = body.decode("utf-8")
            leaked = [m for m in markers if m.lower() in text.lower()]
            assert not leaked, leaked
