"""One real episode through the embedded local model (0.5B), exactly as a user runs it from the command line.

Asserts the pipeline, not the model's quality: the endpoint starts from the installed part packages, the
benchmark writes a valid run directory with token usage recorded, and ``verify`` re-derives it (MATCH).
Skipped unless the ``local`` extra is installed (``make local``); ``.ci/run`` installs it and runs
``pytest -m realmodel`` after the main suite.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextdelta.agent.prompt import initial_messages
from contextdelta.local_model.assembly import ensure_model_file, installed_part_count
from contextdelta.local_model.catalog import QWEN_CODER_0_5B
from contextdelta.tasks.loader import load_task
from contextdelta.worlds import ProtectionMode

pytestmark = pytest.mark.realmodel

REPO = Path(__file__).resolve().parents[2]


def _why_it_cannot_run() -> str | None:
    missing = [name for name in ("llama_cpp", "fastapi", "uvicorn") if importlib.util.find_spec(name) is None]
    parts = installed_part_count(QWEN_CODER_0_5B)
    if missing or parts != QWEN_CODER_0_5B.part_count:
        return (
            f"the local extra is not installed (missing modules: {missing or 'none'}; 0.5B parts installed: "
            f"{parts}/{QWEN_CODER_0_5B.part_count}); install it with `make local`"
        )
    return None


if (_reason := _why_it_cannot_run()) is not None:
    pytest.skip(_reason, allow_module_level=True)

TASK_ID = "cfg-staging-access"
READY_TIMEOUT_S = 600
EPISODE_TIMEOUT_S = 1200


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "contextdelta", *args]


@pytest.fixture(scope="module")
def local_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``contextdelta local-model serve --model 0.5b --port 0`` in a subprocess; yields its base URL."""
    log = tmp_path_factory.mktemp("local-model") / "server.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log.open("w") as stderr:
        process = subprocess.Popen(
            _cli("local-model", "serve", "--model", "0.5b", "--port", "0"),
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env,
        )
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        try:
            deadline = time.monotonic() + READY_TIMEOUT_S
            base_url = None
            while base_url is None:
                try:
                    line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
                except queue.Empty:
                    pytest.fail(f"the local model was not ready in {READY_TIMEOUT_S}s:\n{log.read_text()[-3000:]}")
                if line is None:
                    pytest.fail(f"the local model server exited:\n{log.read_text()[-3000:]}")
                if line.startswith("ready "):
                    fields = dict(part.split("=", 1) for part in line.split()[1:])
                    assert fields["model"] == QWEN_CODER_0_5B.served_name
                    base_url = fields["base_url"]
            yield base_url
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=20)


def test_one_episode_through_the_local_model_verifies(local_endpoint: str, tmp_path: Path) -> None:
    results = tmp_path / "results"
    run = subprocess.run(
        _cli(
            "run-benchmark",
            "--tasks",
            str(REPO / "tasks"),
            "--task-ids",
            TASK_ID,
            "--strategies",
            "full_history",
            "--protection-modes",
            "freshness_contract",
            "--repeats",
            "1",
            "--model",
            QWEN_CODER_0_5B.served_name,
            "--base-url",
            local_endpoint,
            "--results-dir",
            str(results),
            "--concurrency",
            "1",
            "--max-steps",
            "4",
            "--max-tokens",
            "256",
            "--quiet",
        ),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=EPISODE_TIMEOUT_S,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    run_dir = Path(run.stdout.strip().splitlines()[-1])
    assert run_dir.parent == results and run_dir.is_dir()

    manifest = json.loads((run_dir / "run_manifest.json").read_text())
    assert QWEN_CODER_0_5B.served_name in json.dumps(manifest)
    episodes = [json.loads(line) for line in (run_dir / "raw_runs.jsonl").read_text().splitlines() if line.strip()]
    assert len(episodes) == 1
    with (run_dir / "task_results.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["task_id"], r["strategy"], r["protection_mode"]) for r in rows] == [
        (TASK_ID, "full_history", "freshness_contract")
    ]
    row = rows[0]
    assert int(row["steps"]) >= 1
    assert int(row["agent_prompt_tokens"]) > 0 and int(row["agent_completion_tokens"]) > 0  # usage recorded
    assert row["termination_reason"] in {"final_answer", "max_steps"}, row  # the endpoint answered every call

    verify = subprocess.run(
        _cli("verify", run_dir.name, "--results-dir", str(results)),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert verify.returncode == 0, verify.stdout[-3000:] + verify.stderr[-3000:]
    assert "MATCH" in verify.stdout


def test_reused_prefixes_and_snapshots_give_the_same_greedy_text() -> None:
    """Prompt-prefix reuse and first-message snapshots only skip work: the greedy output does not change."""
    from contextdelta.local_model.llama import load_llama

    generator, template = load_llama(ensure_model_file(QWEN_CODER_0_5B), n_ctx=4096, n_threads=2)

    def prompt(task_file: str, mode: ProtectionMode) -> list[int]:
        task = load_task(REPO / "tasks" / task_file)
        text = template.render(initial_messages(task.public_task), task.build_world(mode).tool_schemas())
        return generator.tokenize(text)

    def run(tokens: list[int]) -> tuple[str, int]:
        out = generator.generate(tokens, max_tokens=24, temperature=0.0, top_p=1.0, seed=0, stop=())
        assert out.prompt_tokens == len(tokens) and out.completion_tokens > 0
        return out.text, out.cached_tokens

    order = prompt("order/order-desk-cancel.yaml", ProtectionMode.FRESHNESS_CONTRACT)
    config = prompt("config/cfg-staging-access.yaml", ProtectionMode.UNPROTECTED)
    head = order.index(generator.llama.token_eos()) + 1

    cold, cached_cold = run(order)
    assert cached_cold == 0
    run(config)  # the live cache now holds another world's prompt
    restored, cached_restored = run(order)
    assert cached_restored >= head  # the first message came back from its snapshot
    repeated, cached_repeated = run(order)
    assert cached_repeated == len(order) - 1  # the whole prompt but its last token was reused
    assert restored == cold and repeated == cold
