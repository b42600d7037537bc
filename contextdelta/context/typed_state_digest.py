"""``typed_state_digest``: older tool groups replaced by a deterministic digest of what the agent observed.

Once the history holds more than ``trigger`` tool groups, every group but the last ``keep`` is evicted and the
evicted groups (all of them, every step) are replaced by one user message placed right after the instruction.
The kept groups stay verbatim. The digest is built only from the evicted tool results the agent received and
the agent's own calls in them:

- ``resources``: one entry per resource shown in a tool result (any JSON object with a string ``resource`` and
  an integer ``version``), sorted by key: its identity, last observed ``version`` and ``state`` (the other
  fields), ``observed_step``, ``source_tool``, ``refresh_before: "write"`` and ``conflicts``. Two consecutive
  observations of a resource conflict when they differ in version or state, unless the later one is the result
  of the agent's own executed write showing exactly the next version. Conflicts list both observations in
  full; nothing is merged.
- ``writes``: the agent's calls of write tools in order, with arguments, ``outcome`` (``executed`` or
  ``error``), the error code, and the resources the result showed.

The message text is a fixed preamble followed by the digest as canonical JSON, so identical histories give
byte-identical messages, and every resource entry keeps its ``resource`` and ``version`` keys.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Collection, Iterator, Sequence
from typing import Any

from contextdelta.canonical import canonical_json
from contextdelta.context.base import PINNED, Message, Segment, StrategyBase, TransformResult, check_window, compaction
from contextdelta.worlds import resource_views

DIGEST_VERSION = 1

DIGEST_PREAMBLE = (
    "State digest of your earlier steps {first}-{last} (the log of those steps was condensed to save space). "
    "It was built only from tool results you received. States are as last observed and may have changed "
    'since; refresh_before "write" means: read the resource again before you change it.'
)


class TypedStateDigest(StrategyBase):
    """Pinned messages, a typed digest of the evicted groups, and the last ``keep`` groups verbatim."""

    name = "typed_state_digest"
    deterministic = True

    def __init__(self, trigger: int = 6, keep: int = 3) -> None:
        super().__init__()
        check_window(trigger, keep)
        self.trigger = trigger
        self.keep = keep

    @property
    def params(self) -> dict[str, Any]:
        return {"trigger": self.trigger, "keep": self.keep, "digest_version": DIGEST_VERSION}

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        """Replace the evicted groups by the digest message (a pure function of the history)."""
        plan = compaction(history, self.trigger, self.keep)
        if plan is None:
            return TransformResult(messages=list(history))
        digest = build_state_digest(history, plan.evicted, self.episode.write_tools)
        message = {"role": "user", "content": render_digest(digest)}
        return TransformResult(
            messages=[*history[:PINNED], message, *history[plan.start :]],
            removed=list(range(PINNED, plan.start)),
            inserted=[PINNED],
        )


def build_state_digest(
    history: Sequence[Message], groups: Sequence[Segment], write_tools: Collection[str]
) -> dict[str, Any]:
    """The digest of ``groups`` (tool groups of ``history``) as plain JSON data."""
    observations: dict[str, list[dict[str, Any]]] = {}
    writes: list[dict[str, Any]] = []
    for step, name, arguments, result in _calls(history, groups):
        parsed = _parse(result)
        error = parsed.get("error") if isinstance(parsed, dict) else None
        error_code = error.get("code") if isinstance(error, dict) else None
        failed = isinstance(error, dict)
        own_write = name in write_tools and not failed
        shown: list[str] = []
        if not failed:
            for obj in resource_views(parsed):
                key = obj["resource"]
                shown.append(key)
                state = {k: v for k, v in obj.items() if k not in ("resource", "version")}
                observations.setdefault(key, []).append(
                    {"version": obj["version"], "state": state, "step": step, "tool": name, "own_write": own_write}
                )
        if name in write_tools:
            writes.append(
                {
                    "step": step,
                    "tool": name,
                    "arguments": _arguments(arguments),
                    "outcome": "error" if failed else "executed",
                    "error_code": error_code if failed else None,
                    "resources_shown": sorted(set(shown)),
                }
            )
    resources = []
    for key in sorted(observations):
        seen = observations[key]
        last = seen[-1]
        conflicts = [
            {"earlier": _public(a), "later": _public(b)} for a, b in itertools.pairwise(seen) if _conflict(a, b)
        ]
        resources.append(
            {
                "resource": key,
                "version": last["version"],
                "state": last["state"],
                "observed_step": last["step"],
                "source_tool": last["tool"],
                "refresh_before": "write",
                "conflicts": conflicts,
            }
        )
    steps = [g.step for g in groups if g.step is not None]
    return {
        "digest_version": DIGEST_VERSION,
        "covers_steps": [min(steps), max(steps)] if steps else [],
        "resources": resources,
        "writes": writes,
    }


def render_digest(digest: dict[str, Any]) -> str:
    """The digest message text: the preamble, a newline, and the digest as canonical JSON."""
    steps = digest.get("covers_steps") or [0, 0]
    return DIGEST_PREAMBLE.format(first=steps[0], last=steps[-1]) + "\n" + canonical_json(digest)


def _calls(history: Sequence[Message], groups: Sequence[Segment]) -> Iterator[tuple[int, str, str, str]]:
    """(step, tool name, raw arguments, result text) for every call of ``groups``, in call order."""
    for group in groups:
        assistant = history[group.start]
        results = {m.get("tool_call_id"): m.get("content") for m in history[group.start + 1 : group.end]}
        for call in assistant.get("tool_calls") or []:
            function = call.get("function") or {}
            content = results.get(call.get("id"))
            yield (
                group.step or 0,
                str(function.get("name", "")),
                str(function.get("arguments") or ""),
                content if isinstance(content, str) else "",
            )


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _arguments(raw: str) -> Any:
    """Parsed arguments when they are a JSON object, else the raw text (as the agent sent it)."""
    parsed = _parse(raw) if raw.strip() else {}
    return parsed if isinstance(parsed, dict) else raw


def _conflict(earlier: dict[str, Any], later: dict[str, Any]) -> bool:
    if earlier["version"] == later["version"] and earlier["state"] == later["state"]:
        return False
    return not (later["own_write"] and later["version"] == earlier["version"] + 1)


def _public(observation: dict[str, Any]) -> dict[str, Any]:
    return {k: observation[k] for k in ("version", "state", "step", "tool")}
