"""Record real raw completions of the local models on benchmark prompts, as parser test fixtures.

    .venv/bin/python scripts/record_local_model_outputs.py --model 0.5b [--model 1.5b] \
        [--out tests/local_model/fixtures/outputs] [--tasks tasks] [--task-ids a,b]

For each task and protection mode it renders the benchmark's real first request (the agent system prompt, the
task message and the world's tool schemas, exactly as the agent loop sends them) and, after executing the
model's first tool calls in the task's world, the second request; it greedily generates (temperature 0, seed 0)
and writes each raw completion, byte for byte, to ``<out>/<model>/<task>.<mode>.step<k>.txt``. Each
``--question WORLD:TEXT`` does the same for a plain user request with that world's tools
(``question-<world>-<n>.step<k>.txt``). Needs the ``local`` extra. The parser tests assert on these files;
rerun this script only to refresh them on purpose.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from contextdelta.agent.prompt import initial_messages
from contextdelta.local_model.assembly import ensure_model_file
from contextdelta.local_model.catalog import get_model_spec
from contextdelta.local_model.cli import default_threads
from contextdelta.local_model.llama import load_llama
from contextdelta.local_model.toolcalls import parse_completion
from contextdelta.tasks.loader import load_task
from contextdelta.worlds import ProtectionMode

DEFAULT_TASKS = "order-desk-cancel,order-chair-billing,cal-arch-review-move,cfg-staging-access"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", required=True, help="0.5b or 1.5b (repeatable)")
    parser.add_argument("--out", type=Path, default=Path("tests/local_model/fixtures/outputs"))
    parser.add_argument("--tasks", type=Path, default=Path("tasks"))
    parser.add_argument("--task-ids", default=DEFAULT_TASKS)
    parser.add_argument("--max-tokens", type=int, default=384)
    parser.add_argument(
        "--question",
        action="append",
        default=[],
        metavar="WORLD:TEXT",
        help="Also record a plain request (no agent system prompt) with WORLD's tools (repeatable).",
    )
    args = parser.parse_args()

    for key in args.model:
        spec = get_model_spec(key)
        generator, template = load_llama(ensure_model_file(spec), n_ctx=8192, n_threads=default_threads())
        folder = args.out / spec.key
        folder.mkdir(parents=True, exist_ok=True)
        conversations: list[tuple[str, Any, list[dict[str, Any]]]] = []
        for task_id in [t for t in args.task_ids.split(",") if t]:
            task = load_task(next(args.tasks.glob(f"*/{task_id}.yaml")))
            for mode in ProtectionMode:
                conversations.append(
                    (f"{task_id}.{mode.value}", task.build_world(mode), list(initial_messages(task.public_task)))
                )
        for index, question in enumerate(args.question, start=1):
            world_name, text = question.split(":", 1)
            task = load_task(next(args.tasks.glob(f"{world_name}/*.yaml")))  # the world's state from its first task
            world = task.build_world(ProtectionMode.UNPROTECTED)
            conversations.append((f"question-{world_name}-{index}", world, [{"role": "user", "content": text}]))
        for name, world, messages in conversations:
            tools = world.tool_schemas()
            names = [tool["function"]["name"] for tool in tools]
            for step in (1, 2):
                prompt = template.render(messages, tools)
                generation = generator.generate(
                    generator.tokenize(prompt),
                    max_tokens=args.max_tokens,
                    temperature=0.0,
                    top_p=1.0,
                    seed=0,
                    stop=(),
                )
                target = folder / f"{name}.step{step}.txt"
                target.write_text(generation.text, encoding="utf-8")
                parsed = parse_completion(generation.text, names)
                print(
                    f"{target}: {generation.completion_tokens} tokens, {[(c.name, c.form) for c in parsed.tool_calls]}",
                    flush=True,
                )
                if not parsed.tool_calls:
                    break
                calls: list[dict[str, Any]] = [
                    {
                        "id": f"call_{step}_{i}",
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }
                    for i, c in enumerate(parsed.tool_calls)
                ]
                messages.append({"role": "assistant", "content": parsed.content, "tool_calls": calls})
                for call in calls:
                    result = world.call(call["function"]["name"], call["function"]["arguments"], call["id"])
                    messages.append({"role": "tool", "tool_call_id": call["id"], "content": result.content})
        del generator
    return 0


if __name__ == "__main__":
    sys.exit(main())
