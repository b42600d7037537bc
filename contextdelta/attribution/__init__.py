"""Failure attribution (SPEC section 9): why each failed episode failed, as a cause chain and one failure mode.

A pure function of a recorded episode (`EpisodeRecord`: verdict + trace), so the failure atlas, the
``attribute`` command and the dashboard all read the same answer::

    attribution = attribute_episode(record)        # None for a successful episode
    attribution.mode                               # FailureMode, decided in MODE_PRECEDENCE order
    attribution.action                             # the decisive action (step, seq, tool, resource)
    attribution.relied_on, attribution.mutation    # the view it acted on, the hidden change that made it stale
    attribution.context.excerpt                    # what the model saw at that step

See `contextdelta.attribution._classify` for the rules.
"""

from contextdelta.attribution._classify import attribute_episode, attribute_run, context_excerpt, harmful_actions
from contextdelta.attribution._index import EpisodeIndex, text_claim
from contextdelta.attribution._model import (
    MODE_DESCRIPTIONS,
    MODE_PRECEDENCE,
    STALE_STATE_MODES,
    ActionRef,
    Attribution,
    ContextAtAction,
    FailureMode,
    MutationRef,
    ObservationRef,
    ObservationVia,
)

__all__ = [
    "MODE_DESCRIPTIONS",
    "MODE_PRECEDENCE",
    "STALE_STATE_MODES",
    "ActionRef",
    "Attribution",
    "ContextAtAction",
    "EpisodeIndex",
    "FailureMode",
    "MutationRef",
    "ObservationRef",
    "ObservationVia",
    "attribute_episode",
    "attribute_run",
    "context_excerpt",
    "harmful_actions",
    "text_claim",
]
