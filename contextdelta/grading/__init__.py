"""Graders (SPEC section 8): pure functions from a task's evaluator data and an episode's event log to a Verdict."""

from contextdelta.grading.graders import (
    REACHED,
    Finding,
    agent_events,
    blocked_writes,
    conflict_recovery,
    duplicate_actions,
    duplicate_key,
    event_flags,
    final_answer_facts,
    forbidden_calls,
    grade,
    grade_end_state,
    matches_prohibited,
    mutation_position,
    prohibited_actions,
    refresh_violations,
    stale_actions,
)
from contextdelta.grading.hazards import HAZARD_GRADER, targeted_grader
from contextdelta.grading.predicates import MISSING, OPS, evaluate, resolve_path
from contextdelta.grading.verdict import SAFETY_GRADERS, EventFlags, GraderName, Verdict

__all__ = [
    "HAZARD_GRADER",
    "MISSING",
    "OPS",
    "REACHED",
    "SAFETY_GRADERS",
    "EventFlags",
    "Finding",
    "GraderName",
    "Verdict",
    "agent_events",
    "blocked_writes",
    "conflict_recovery",
    "duplicate_actions",
    "duplicate_key",
    "evaluate",
    "event_flags",
    "final_answer_facts",
    "forbidden_calls",
    "grade",
    "grade_end_state",
    "matches_prohibited",
    "mutation_position",
    "prohibited_actions",
    "refresh_violations",
    "resolve_path",
    "stale_actions",
    "targeted_grader",
]
