"""WorldEpisode: an external agent's tool calls are steps on the world exactly as in the built-in loop; the record
says what the agent did and that what its model saw is unknown (no MCP needed here)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from contextdelta.agent import EXTERNAL_PREFIX, TerminationReason, external_strategy, initial_messages
from contextdelta.canonical import content_hash
from contextdelta.mcp import WorldEpisode, no_final_answer, server_instructions
from contextdelta.tasks import Task, load_directory
from contextdelta.tasks.trajectory import replay, resolve_call
from contextdelta.worlds import ProtectionMode, get_world

TASKS = Path(__file__).resolve().parents[2] / "tasks"


@pytest.fixture(scope="module")
def tasks() -> dict[str, Task]:
    loaded, problems = load_directory(TASKS)
    assert not problems
    return {t.task.id: t.task for t in loaded}


def episode(task: Task, mode: ProtectionMode = ProtectionMode.UNPROTECTED, max_steps: int = 30) -> WorldEpisode:
    return WorldEpisode(task, task.build_world(mode), "tester", "streamable-http", max_steps)


def play(ep: WorldEpisode, trajectory: str = "reference") -> list[str]:
    task = ep.task
    calls = task.evaluator.reference_solution if trajectory == "reference" else task.evaluator.unsafe_trajectory
    results: list[str] = []
    for index, call in enumerate(calls):
        resolved = resolve_call(get_world(task.world), call, results, ep.world.mode, index)
        text, _ = ep.call(resolved.tool, resolved.arguments)
        results.append(text)
    return results


@pytest.mark.slow
def test_calls_are_steps_with_the_worlds_events_and_mutations_as_the_builtin_replay(tasks: dict[str, Task]) -> None:
    task = tasks["order-grinder-refund"]
    for mode in ProtectionMode:
        ep = episode(task, mode)
        results = play(ep, "unsafe")
        builtin = replay(task, task.evaluator.unsafe_trajectory, mode)
        # the same events, but for the call ids (mcp_<step> here, call-<index> in the replay)
        assert [e.model_dump(exclude={"call_id"}) for e in ep.world.events] == [
            e.model_dump(exclude={"call_id"}) for e in builtin.world.events
        ]
        assert [m.model_dump() for m in ep.world.mutation_log] == [m.model_dump() for m in builtin.world.mutation_log]
        assert ep.world.state() == builtin.final_state
        trace = ep.trace()
        assert [s.step for s in trace.steps] == list(range(1, len(results) + 1))
        assert [c.result for s in trace.steps for c in s.tool_calls] == results


def test_the_record_says_the_model_view_is_unknown(tasks: dict[str, Task]) -> None:
    task = tasks["order-grinder-refund"]
    ep = episode(task)
    play(ep)
    assert ep.finish("done") == ('{"finished": true}', False)
    trace = ep.trace()
    assert trace.strategy.name == external_strategy("tester") == f"{EXTERNAL_PREFIX}tester"
    assert trace.provider == "external" and trace.model == "tester"
    assert trace.external is not None and trace.external.model_view == "unknown"
    assert trace.external.ended_by == "finish" and trace.termination is TerminationReason.FINAL_ANSWER
    assert trace.final_answer == "done"
    assert trace.initial_messages == initial_messages(task.public_task)
    assert all(s.messages == [] and s.messages_sha256 == content_hash([]) for s in trace.steps)
    assert all(
        s.harness_prompt_tokens == 0 and s.response is not None and s.response.usage is None for s in trace.steps
    )
    assert not trace.totals.usage_complete and trace.totals.tool_calls == len(task.evaluator.reference_solution)
    # the finish is a step of its own (the built-in final answer is a model call too)
    assert len(trace.steps) == len(task.evaluator.reference_solution) + 1
    assert trace.canonical_history()[-1] == {"role": "assistant", "content": "done"}
    assert trace.tools_sha256 == content_hash(task.build_world(ProtectionMode.UNPROTECTED).tool_schemas())


def test_after_the_end_nothing_changes(tasks: dict[str, Task]) -> None:
    task = tasks["order-grinder-refund"]
    ep = episode(task, max_steps=2)
    first = task.evaluator.reference_solution[0]
    ep.call(first.tool, first.args)
    assert not ep.over
    ep.call(first.tool, first.args)
    assert ep.over and ep.termination is TerminationReason.MAX_STEPS
    state = ep.world.state()
    text, is_error = ep.call(first.tool, first.args)
    assert is_error and "episode_over" in text
    text, is_error = ep.finish("late")
    assert is_error and "episode_over" in text
    assert ep.world.state() == state and len(ep.steps) == 2


@pytest.mark.parametrize(
    ("ended_by", "failed", "termination"),
    [
        ("session_closed", None, TerminationReason.PROVIDER_ERROR),
        ("agent_exited", None, TerminationReason.PROVIDER_ERROR),
        ("agent_failed", "the agent command exited with code 3", TerminationReason.PROVIDER_ERROR),
        ("timeout", "the agent command ran past --timeout-s 5", TerminationReason.PROVIDER_ERROR),
    ],
)
def test_how_the_agent_left_decides_the_ending(
    tasks: dict[str, Task], ended_by: str, failed: str | None, termination: TerminationReason
) -> None:
    ep = episode(tasks["cfg-search-ramp"])
    ep.close(ended_by, failed=failed, exit_code=3 if ended_by == "agent_failed" else None)
    trace = ep.trace()
    # left without finish: no final answer was given, and the error says how the agent left
    assert trace.termination is termination and trace.error == (failed or no_final_answer(ended_by))
    assert trace.final_answer is None
    assert trace.external is not None and trace.external.ended_by == ended_by
    # a finished episode keeps its ending when the agent then leaves cleanly ...
    done = episode(tasks["cfg-search-ramp"])
    done.finish("ok")
    done.close("agent_exited", exit_code=0)
    assert done.trace().termination is TerminationReason.FINAL_ANSWER
    # ... and is a failed trial when it then crashes or hangs: an agent that did not end cleanly is no success
    crashed = episode(tasks["cfg-search-ramp"])
    crashed.finish("ok")
    crashed.close("agent_failed", failed="exit 1", exit_code=1)
    trace = crashed.trace()
    assert trace.termination is TerminationReason.PROVIDER_ERROR and trace.error == "exit 1 (after it called finish)"
    assert trace.external is not None and trace.external.exit_code == 1 and trace.external.ended_by == "agent_failed"


def test_invalid_calls_are_recorded_like_the_builtin_loop(tasks: dict[str, Task]) -> None:
    ep = episode(tasks["order-grinder-refund"])
    text, is_error = ep.call("no_such_tool", {"x": 1})
    assert is_error and "error" in text
    text, is_error = ep.call("get_order", {"order_id": 17})
    assert is_error
    outcomes = [e.outcome.value for e in ep.world.events]
    assert outcomes == ["invalid", "invalid"]


def test_a_finish_without_a_text_answer_is_an_error_step_and_the_episode_goes_on(tasks: dict[str, Task]) -> None:
    ep = episode(tasks["cfg-search-ramp"], max_steps=4)
    for answer, got in ((42, "that is a number"), (None, "no `answer`"), (["done"], "that is an array")):
        text, is_error = ep.finish(answer)
        assert is_error and "invalid_arguments" in text and got in text and "has not ended" in text, text
        assert not ep.over and ep.final_answer is None
    # each one step, with a note saying what happened, and no world event
    assert [step.note for step in ep.steps] == [
        "finish called with `answer` that is a number; answered with an error, the episode went on",
        "finish called with no `answer`; answered with an error, the episode went on",
        "finish called with `answer` that is an array; answered with an error, the episode went on",
    ]
    assert ep.world.events == []
    # the step limit bounds them as any call: the fourth bad finish ends the episode at max_steps
    text, is_error = ep.finish({"answer": "done"})
    assert is_error and "the episode has ended" in text
    assert ep.over and ep.trace().termination is TerminationReason.MAX_STEPS

    fixed = episode(tasks["cfg-search-ramp"])
    assert fixed.finish(7)[1] and fixed.finish("done") == ('{"finished": true}', False)
    trace = fixed.trace()
    assert (
        trace.termination is TerminationReason.FINAL_ANSWER and trace.final_answer == "done" and len(trace.steps) == 2
    )


def test_a_number_json_cannot_hold_is_a_recorded_invalid_call(tasks: dict[str, Task]) -> None:
    # an MCP client's JSON may carry NaN; it used to raise out of the call, and the step was never recorded
    ep = episode(tasks["order-grinder-refund"])
    text, is_error = ep.call("issue_refund", {"order_id": "A-1042", "amount_cents": float("nan"), "reason": "x"})
    assert is_error and "NaN, Infinity" in text
    (step,) = ep.steps
    assert step.tool_calls[0].arguments == '{"amount_cents":NaN,"order_id":"A-1042","reason":"x"}'
    assert [(e.outcome.value, e.error_code) for e in ep.world.events] == [("invalid", "malformed_arguments")]
    again = tasks["order-grinder-refund"].build_world(ProtectionMode.UNPROTECTED)  # as verify re-reads the step
    assert again.call("issue_refund", step.tool_calls[0].arguments).content == text


def test_the_instructions_hold_the_public_task_only(tasks: dict[str, Task]) -> None:
    for task in tasks.values():
        text = server_instructions(task)
        assert task.public.instruction in text and "finish" in text
        for mutation in task.evaluator.hidden_mutations:
            assert mutation.id not in text and mutation.actor not in text


def test_agent_names_that_cannot_be_part_of_a_run_id_are_refused() -> None:
    for bad in ("", "my agent", "a.b", "a:b", "x" * 65):
        with pytest.raises(ValueError, match="agent name"):
            external_strategy(bad)


def test_without_the_mcp_extra_the_commands_say_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from contextdelta.cli import app
    from contextdelta.mcp import McpUnavailable, require_mcp

    monkeypatch.setitem(sys.modules, "mcp", None)  # import mcp now raises ImportError
    with pytest.raises(McpUnavailable, match=r"pip install 'contextdelta\[mcp\]'"):
        require_mcp()
    for args in (
        ["serve-world", "--task", "cfg-search-ramp", "--mode", "unprotected"],
        ["run-external", "--agent-cmd", "true"],
    ):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2 and "contextdelta[mcp]" in result.stderr and "Traceback" not in result.output


def test_an_agent_that_crashes_after_its_session_closed_is_recorded_by_its_crash(tasks: dict[str, Task]) -> None:
    """Over HTTP the SDK client ends its session (DELETE) as it leaves, which ends the episode; a command that then
    exits non-zero kept only "the session closed" as its error, the crash lost."""
    ep = episode(tasks["cfg-search-ramp"])
    ep.close("session_closed")
    ep.close("agent_failed", failed="the agent command exited with code 3", exit_code=3)
    trace = ep.trace()
    assert trace.termination is TerminationReason.PROVIDER_ERROR
    assert trace.error == "the agent command exited with code 3 (after its MCP session closed)"
    assert trace.external is not None and (trace.external.ended_by, trace.external.exit_code) == ("agent_failed", 3)
    ep.close("agent_exited", exit_code=0)  # a clean exit after that changes nothing
    assert ep.trace().error == "the agent command exited with code 3 (after its MCP session closed)"
