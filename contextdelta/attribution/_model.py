"""The records of a failure attribution: failure modes, the decisive action and its cause chain."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class FailureMode(StrEnum):
    """Why an episode failed (SPEC section 9). Exactly one per failed episode; see `MODE_PRECEDENCE`."""

    CONTEXT_DROPPED_FRESH_OBSERVATION = "context_dropped_fresh_observation"
    CONTEXT_DROPPED_OWN_WRITE = "context_dropped_own_write"
    SUMMARY_DISTORTED_STATE = "summary_distorted_state"
    NEVER_REFRESHED = "never_refreshed"
    IGNORED_VISIBLE_CHANGE = "ignored_visible_change"
    UNAUTHORIZED_WRITE = "unauthorized_write"
    END_STATE_MISS = "end_state_miss"
    MAX_STEPS = "max_steps"
    PROVIDER_ERROR = "provider_error"


STALE_STATE_MODES: tuple[FailureMode, ...] = (
    FailureMode.CONTEXT_DROPPED_FRESH_OBSERVATION,
    FailureMode.CONTEXT_DROPPED_OWN_WRITE,
    FailureMode.SUMMARY_DISTORTED_STATE,
    FailureMode.NEVER_REFRESHED,
    FailureMode.IGNORED_VISIBLE_CHANGE,
)
"""The modes that name a stale-state cause of the decisive action."""

MODE_PRECEDENCE: tuple[FailureMode, ...] = (
    FailureMode.PROVIDER_ERROR,
    FailureMode.UNAUTHORIZED_WRITE,
    *STALE_STATE_MODES,
    FailureMode.MAX_STEPS,
    FailureMode.END_STATE_MISS,
)
"""The order in which modes are decided (first that applies wins); also the order of the atlas sections.

1. ``provider_error``: the episode is a failed trial (termination ``provider_error``,
   ``context_window_exceeded``, ``budget_exceeded`` or ``harness_error``); its behaviour was cut short by the
   infrastructure, so nothing else is attributed. ``termination`` says which.
2. ``unauthorized_write``: a call was refused as ``forbidden`` (the ``authorized`` grader failed).
3. A stale-state mode: the first harmful or failing action (in call order) whose resource the agent acted on
   with an outdated view; the mode names where the fresher information was (see `MODE_DESCRIPTIONS`).
4. ``max_steps``: the step limit ended the episode and no stale-state cause was found.
5. ``end_state_miss``: everything else (a wrong or missing action without a stale-state cause).
"""

MODE_DESCRIPTIONS: dict[FailureMode, str] = {
    FailureMode.CONTEXT_DROPPED_FRESH_OBSERVATION: (
        "A tool result showing the changed state reached the canonical history before the decisive step, but the "
        "context strategy left it out of the messages sent at that step (and no summary or digest carried it)."
    ),
    FailureMode.CONTEXT_DROPPED_OWN_WRITE: (
        "The agent's own earlier write changed the resource (or is the action it repeated), and the context "
        "strategy left that write out of the messages sent at the decisive step."
    ),
    FailureMode.SUMMARY_DISTORTED_STATE: (
        "A summary or digest sent at the decisive step stated the resource at an older version (or an executed "
        "write as failed) than the last tool result it replaced."
    ),
    FailureMode.NEVER_REFRESHED: (
        "Another actor changed the resource after the agent's last observation of it and no tool result before "
        "the decisive step showed the change: even the full history was stale."
    ),
    FailureMode.IGNORED_VISIBLE_CHANGE: (
        "The change (another actor's write, a version conflict, or the agent's own earlier write) was in the "
        "messages sent at the decisive step, and the agent acted against it anyway."
    ),
    FailureMode.UNAUTHORIZED_WRITE: "The agent called a write outside its principal's scope (refused as forbidden).",
    FailureMode.END_STATE_MISS: (
        "The episode failed its end state or another grader, and no stale-state cause was found: a wrong or "
        "missing action on current information."
    ),
    FailureMode.MAX_STEPS: "The step limit ended the episode before the task was done (no stale-state cause found).",
    FailureMode.PROVIDER_ERROR: (
        "A failed trial: the provider, the context window, the budget or the harness ended the episode "
        "(`termination` says which). Counted as a non-success, never as model behaviour."
    ),
}


class ObservationVia(StrEnum):
    """How an observation reached the model at the decisive step."""

    TOOL_RESULT = "tool_result"
    """A tool result sent verbatim."""
    INSERTED = "inserted"
    """A claim in a message the strategy wrote (semantic summary or typed state digest)."""
    NOT_SENT = "not_sent"
    """In the canonical history but not in the messages sent at the decisive step."""


class ActionRef(BaseModel):
    """One agent tool call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step: int
    seq: int
    tool: str
    resource: str | None
    outcome: str
    arguments: str = Field(description="The raw argument text the model wrote.")
    version_at_execution: int | None
    expected_version: int | None
    flags: list[str] = Field(
        default_factory=list,
        description="Why it counts: stale, duplicate, prohibited (the graders' event flags), forbidden, "
        "refresh_before_write, conflict_recovery, end_state (a write on a resource of a failing end-state "
        "check), or blocked (shown for context only: the contract stopped it).",
    )


class ObservationRef(BaseModel):
    """A version of a resource the agent was shown."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    resource: str
    version: int
    step: int | None = Field(description="Step of the tool call that showed it; None for an unmatched claim.")
    seq: int | None = Field(description="seq of the tool call that showed it; None for an unmatched claim.")
    tool: str | None
    kind: str = Field(description="read, own_write (the agent's executed write) or version_conflict (a block).")
    via: ObservationVia = Field(description="How it was present in the messages sent at the decisive step.")


class MutationRef(BaseModel):
    """A hidden mutation (another actor's write) of the decisive resource."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mutation_id: str
    actor: str
    step: int
    after_seq: int | None
    trigger: str
    resource: str
    version_before: int | None
    version_after: int | None


class ContextAtAction(BaseModel):
    """What the context strategy did at the decisive step."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step: int
    strategy: str
    canonical_messages: int = Field(description="Messages in the canonical history before the call.")
    sent_messages: int
    removed: list[int] = Field(description="Canonical-history indices not sent verbatim.")
    removed_steps: list[int] = Field(description="Steps whose messages were (partly) removed.")
    inserted: list[int] = Field(description="Indices in the sent messages that the strategy wrote.")
    summary_claim_version: int | None = Field(
        description="The version of the decisive resource an inserted summary/digest stated, if any."
    )
    excerpt: str = Field(description="Excerpt of the messages sent: what the model saw about the resource.")


class Attribution(BaseModel):
    """The cause chain of one failed episode."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_group_id: str
    run_id: str
    task_id: str
    hazard: str
    strategy: str
    protection_mode: str
    repeat: int
    termination: str
    failed_trial: bool
    mode: FailureMode
    failed_graders: list[str]
    action: ActionRef | None = Field(description="The decisive action; None when no action is to blame.")
    relied_on: ObservationRef | None = Field(
        description="The freshest view of the resource in the messages sent at the decisive step (verbatim tool "
        "result or summary/digest claim); None when that context showed none."
    )
    latest_observation: ObservationRef | None = Field(
        description="The freshest observation of the resource in the full canonical history before the step."
    )
    mutation: MutationRef | None = Field(
        description="The hidden mutation that made the relied-on view stale (the first after it)."
    )
    own_write: ActionRef | None = Field(
        description="The agent's own earlier executed write that made the view stale or that it repeated."
    )
    fresher_observation_dropped: bool = Field(
        description="A fresher observation (or the agent's own write) was in the history but not sent."
    )
    own_write_dropped: bool = Field(description="The relevant own write was removed from the context and not carried.")
    summary_contradicted: bool = Field(description="An inserted summary/digest contradicted the last observation.")
    change_ever_visible: bool | None = Field(
        description="The change was shown to the model in some request before the decisive action; None: no change."
    )
    change_visible_at_action: bool | None = Field(
        description="The change was in the messages sent at the decisive step; None: no change."
    )
    context: ContextAtAction | None
    harmful_action_seqs: list[int] = Field(
        description="seqs of every harmful action (reached agent write flagged stale, duplicate or prohibited)."
    )
    chain: list[str] = Field(description="The cause chain in words, in time order.")
    explanation: str = Field(description="One sentence: the mode's meaning applied to this episode.")
