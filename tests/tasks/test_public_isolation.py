"""No evaluator-only value can reach what the model sees: the public task, the first messages, the tool schemas."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextdelta.agent.prompt import initial_messages
from contextdelta.tasks import EvaluatorSpec, Task
from contextdelta.worlds import ProtectionMode
from tests.tasks.helpers import task_data

FREE_TEXT = {"customer_name", "name", "title", "description", "owner", "reason", "text", "building", "organizer"}


class Markers:
    """Hands out unique markers and remembers which evaluator field each was planted in."""

    def __init__(self) -> None:
        self.planted: dict[str, str] = {}

    def __call__(self, field: str) -> str:
        marker = f"zqx{len(self.planted):03d}marker"
        self.planted[marker] = field
        return marker


def _plant_text(node: Any, field: str, mark: Markers) -> None:
    if isinstance(node, dict):
        for key in list(node):
            if key in FREE_TEXT and isinstance(node[key], str):
                node[key] = mark(field)
            else:
                _plant_text(node[key], field, mark)
    elif isinstance(node, list):
        for item in node:
            _plant_text(item, field, mark)


def plant(data: dict[str, Any]) -> Markers:
    """Put a unique marker into every evaluator field of ``data`` (in place)."""
    ev = data["evaluator"]
    mark = Markers()
    mark.planted[ev["hazard"]] = "hazard"  # an enum: its value is the marker
    ev["max_steps"] = 983  # a prime under MAX_STEPS that no message holds by chance
    mark.planted["983"] = "max_steps"
    ev["clock"] = "2031-07-19T13:37:11"
    mark.planted["2031-07-19"] = "clock"
    _plant_text(ev["initial_state"], "initial_state", mark)
    for mutation in ev.get("hidden_mutations", []):
        mutation["id"] = mark("hidden_mutations")
        mutation["actor"] = mark("hidden_mutations")
    for predicate in ev["expected_end_state"]:
        predicate["value"] = mark("expected_end_state")
    ev["unchanged"] = [*ev.get("unchanged", []), f"{data['world']}/x/{mark('unchanged')}"]
    ev["prohibited_actions"] = [
        *ev.get("prohibited_actions", []),
        {
            "tool": mark("prohibited_actions"),
            "args": {"order_id": mark("prohibited_actions")},
            "reason": mark("prohibited_actions"),
        },
    ]
    ev["authorization_scope"] = {
        "resources": ["*", f"*{mark('authorization_scope')}*"],
        "limits": {f"{mark('authorization_scope')}.amount": 1},
    }
    for name in ("reference_solution", "unsafe_trajectory"):
        ev[name] = [*ev[name], {"tool": mark(name), "args": {"note": mark(name)}}]
    ev["final_answer_facts"] = [mark("final_answer_facts")]
    ev["family"] = {
        "name": mark("family"),
        "generator_version": 1,
        "horizon": 1,
        "distractors": 1,
        "mutation": mark("family"),
        "timing": mark("family"),
        "seed": 0,
        "observation_call": 0,
    }
    return mark


def rendered(task: Task) -> str:
    """Everything the model is ever given for this task, in both protection modes."""
    public = task.public_task
    messages = initial_messages(public)
    parts = [public.model_dump_json(), json.dumps(messages), *(str(m["content"]) for m in messages)]
    for mode in ProtectionMode:
        parts.append(json.dumps(task.build_world(mode).tool_schemas()))
    return "\n".join(parts)


@pytest.mark.parametrize("task_id", ["order-grinder-refund", "cal-cab-room-clear", "cfg-search-ramp"])
def test_no_evaluator_marker_reaches_the_model(task_id: str) -> None:
    data = task_data(task_id)
    mark = plant(data)
    task = Task.model_validate(data)
    stored = task.model_dump_json()
    assert set(mark.planted.values()) == set(EvaluatorSpec.model_fields)  # every evaluator field got a marker
    for marker in mark.planted:
        assert marker in stored  # the marker really is in the task
    text = rendered(task)
    assert task.public.instruction in text  # the renderer does show the public part
    leaked = {marker: field for marker, field in mark.planted.items() if marker in text}
    assert leaked == {}


def test_the_check_would_catch_a_leak() -> None:
    data = task_data()
    mark = plant(data)
    marker = next(m for m, f in mark.planted.items() if f == "hidden_mutations")
    data["public"]["instruction"] += f" (ref {marker})"
    task = Task.model_validate(data)
    assert marker in rendered(task)
