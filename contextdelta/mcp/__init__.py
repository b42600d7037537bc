"""External agents over MCP: one episode's world served as an MCP server (``serve-world``), and the matrix for
an agent command (``run-external``). An edge package: it uses ``worlds/``, ``grading/`` and ``rundir/`` (through
the runner's phases) exactly as the built-in loop does; the ``mcp`` SDK is imported lazily (optional extra)."""

from contextdelta.mcp._episode import FINISH_TOOL, WorldEpisode, no_final_answer, server_instructions
from contextdelta.mcp._run import (
    DEFAULT_TIMEOUT_S,
    HTTP,
    STDIO,
    AgentCommandExecutor,
    agent_environment,
    agent_info,
    run_external,
    serve_world,
)
from contextdelta.mcp._server import McpUnavailable, build_server, require_mcp

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "FINISH_TOOL",
    "HTTP",
    "STDIO",
    "AgentCommandExecutor",
    "McpUnavailable",
    "WorldEpisode",
    "agent_environment",
    "agent_info",
    "build_server",
    "no_final_answer",
    "require_mcp",
    "run_external",
    "serve_world",
    "server_instructions",
]
