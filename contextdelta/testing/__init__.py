"""Test support shipped with the package: the scripted OpenAI-compatible server and its policies.

``python -m contextdelta.testing.server`` serves a deterministic policy (``oracle``, ``unsafe``,
``context_trusting``) over HTTP; :func:`serve_scripted` runs one for the length of a ``with`` block.
"""

from contextdelta.testing.app import PromptCache, PromptCacheMode, ScriptedServer, approx_tokens
from contextdelta.testing.faults import FaultKind, FaultPlan, RequestSelector
from contextdelta.testing.launcher import ServerStartError, fetch_stats, serve_scripted
from contextdelta.testing.policies import (
    SUMMARY_MARKER,
    PolicyName,
    ScriptedPolicy,
    ScriptedReply,
    ScriptedToolCall,
    TaskCatalog,
    UnknownTask,
    extractive_summary,
    load_task_files,
)
from contextdelta.testing.transcript import CallId, Phase, Transcript

__all__ = [
    "SUMMARY_MARKER",
    "CallId",
    "FaultKind",
    "FaultPlan",
    "Phase",
    "PolicyName",
    "PromptCache",
    "PromptCacheMode",
    "RequestSelector",
    "ScriptedPolicy",
    "ScriptedReply",
    "ScriptedServer",
    "ScriptedToolCall",
    "ServerStartError",
    "TaskCatalog",
    "Transcript",
    "UnknownTask",
    "approx_tokens",
    "extractive_summary",
    "fetch_stats",
    "load_task_files",
    "serve_scripted",
]
