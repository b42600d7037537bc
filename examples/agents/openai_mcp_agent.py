"""An example external agent for ContextDelta: an MCP client plus an OpenAI-compatible model, in one small loop.

ContextDelta's ``run-external`` starts it once per episode with the episode's world served over MCP at
``CONTEXTDELTA_MCP_URL``. The agent reads the server's instructions and its ``task`` prompt, offers the model the
server's tools, runs every tool call the model makes through MCP, and calls ``finish`` with the model's final
message. Its context is the full conversation: replace ``messages`` handling with your own context manager
(trimming, summarising, clearing tool results) to measure what it does to stale actions.

Configuration (environment):
    CONTEXTDELTA_MCP_URL    set by run-external: the episode's MCP endpoint (streamable HTTP)
    AGENT_BASE_URL          the OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (default: OpenAI)
    AGENT_MODEL             the model name (required)
    AGENT_API_KEY           its key (default: OPENAI_API_KEY; "unused" for local servers)
    AGENT_MAX_TURNS         model calls before giving up (default 40)
    CONTEXTDELTA_EPISODE_SEED  set by run-external: passed to the model as its sampling seed

    contextdelta run-external --agent my-agent --agent-cmd "python examples/agents/openai_mcp_agent.py" \\
        --tasks tasks --protection-modes unprotected,freshness_contract --repeats 1
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
from mcp import Client
from openai import AsyncOpenAI


def text_of(result: Any) -> str:
    """The text of an MCP tool result or prompt message content."""
    blocks = result if isinstance(result, list) else [result]
    return "".join(getattr(block, "text", "") for block in blocks)


async def run_agent(url: str, model: str, base_url: str | None, api_key: str, max_turns: int, seed: int | None) -> int:
    llm = AsyncOpenAI(base_url=base_url, api_key=api_key)
    async with Client(url) as mcp:
        listed = await mcp.list_tools()
        tools: list[Any] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description or "", "parameters": t.input_schema},
            }
            for t in listed.tools
            if t.name != "finish"  # the agent finishes by answering in text; it calls finish for the model
        ]
        prompt = await mcp.get_prompt("task")
        messages: list[Any] = [
            {"role": "system", "content": mcp.instructions or ""},
            {"role": "user", "content": text_of(prompt.messages[0].content)},
        ]
        for _ in range(max_turns):
            response = await llm.chat.completions.create(
                model=model,
                messages=messages,
                tools=tools,
                temperature=0,
                seed=seed,  # type: ignore[arg-type]
            )
            message = response.choices[0].message
            # function tool calls only (the server offers nothing else)
            calls: list[Any] = [c for c in message.tool_calls or [] if getattr(c, "function", None) is not None]
            if not calls:
                await mcp.call_tool("finish", {"answer": message.content or ""})
                return 0
            messages.append(
                {
                    "role": "assistant",
                    "content": message.content,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.function.name, "arguments": c.function.arguments},
                        }
                        for c in calls
                    ],
                }
            )
            for call in calls:
                try:
                    arguments = json.loads(call.function.arguments or "{}")
                except ValueError:
                    arguments = None
                if not isinstance(arguments, dict):
                    content = '{"error": {"code": "invalid_arguments", "message": "arguments are not a JSON object"}}'
                else:
                    content = text_of((await mcp.call_tool(call.function.name, arguments)).content)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        print(f"gave up after {max_turns} model calls", file=sys.stderr)
        return 1


def main() -> int:
    model = os.environ.get("AGENT_MODEL")
    url = os.environ.get("CONTEXTDELTA_MCP_URL")
    if not model or not url:
        print(
            "set AGENT_MODEL (and run me through contextdelta run-external, which sets CONTEXTDELTA_MCP_URL)",
            file=sys.stderr,
        )
        return 2
    seed = os.environ.get("CONTEXTDELTA_EPISODE_SEED")
    return anyio.run(
        run_agent,
        url,
        model,
        os.environ.get("AGENT_BASE_URL"),
        os.environ.get("AGENT_API_KEY") or os.environ.get("OPENAI_API_KEY") or "unused",
        int(os.environ.get("AGENT_MAX_TURNS", "40")),
        int(seed) if seed else None,
    )


if __name__ == "__main__":
    sys.exit(main())
