"""A scripted external agent for the tests: an MCP client (the ``mcp`` package) that replays a task's reference
solution (or unsafe trajectory) against ``CONTEXTDELTA_MCP_URL``, then calls ``finish``.

It is what ``run-external --agent-cmd`` runs in the tests. Environment: ``CONTEXTDELTA_MCP_URL`` and
``CONTEXTDELTA_TASK_ID`` (set by run-external), ``REPLAY_TASKS`` (the task folder), ``REPLAY_TRAJECTORY``
(``reference`` or ``unsafe``), ``REPLAY_FINISH`` (``0``: disconnect without finish), ``REPLAY_EXIT`` (exit code
to end with), ``REPLAY_SLEEP_S`` (wait before connecting).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import anyio
from mcp import Client

from contextdelta.tasks import Task, load_directory
from contextdelta.tasks.trajectory import resolve_call
from contextdelta.worlds import ProtectionMode, get_world


async def play(client: Client, task: Task, mode: ProtectionMode, trajectory: str, finish: bool) -> list[str]:
    """Replay ``task``'s reference solution (or unsafe trajectory) through ``client``, resolving each write's
    ``expected_version`` from the results received; then ``finish`` (unless not asked to). The results, in order."""
    calls = task.evaluator.reference_solution if trajectory == "reference" else task.evaluator.unsafe_trajectory
    results: list[str] = []
    for index, call in enumerate(calls):
        resolved = resolve_call(get_world(task.world), call, results, mode, index)
        answer = await client.call_tool(resolved.tool, resolved.arguments)
        results.append(answer.content[0].text)  # type: ignore[union-attr]
    if finish:
        await client.call_tool("finish", {"answer": "Done: " + "; ".join(task.evaluator.final_answer_facts)})
    return results


async def replay(url: str, task_id: str, tasks: Path, trajectory: str, finish: bool) -> None:
    loaded, problems = load_directory(tasks)
    assert not problems, problems
    task = next(t.task for t in loaded if t.task.id == task_id)
    mode = ProtectionMode(os.environ["CONTEXTDELTA_PROTECTION_MODE"])
    async with Client(url) as client:
        await play(client, task, mode, trajectory, finish)


def main() -> int:
    time.sleep(float(os.environ.get("REPLAY_SLEEP_S", "0")))
    anyio.run(
        replay,
        os.environ["CONTEXTDELTA_MCP_URL"],
        os.environ["CONTEXTDELTA_TASK_ID"],
        Path(os.environ["REPLAY_TASKS"]),
        os.environ.get("REPLAY_TRAJECTORY", "reference"),
        os.environ.get("REPLAY_FINISH", "1") != "0",
    )
    return int(os.environ.get("REPLAY_EXIT", "0"))


if __name__ == "__main__":
    sys.exit(main())
