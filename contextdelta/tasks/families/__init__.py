"""Task families: parameterised templates that generate ordinary, validated task files along a horizon.

Each family is one module (world + hazard); :data:`FAMILIES` is the registry ``generate-tasks`` reads. See
``_base`` for the shape every family shares and the horizon rule, and each module for the observation its
horizon counts from.
"""

from contextdelta.tasks.families._base import (
    GENERATOR_VERSION,
    MAX_DISTRACTORS,
    MAX_HORIZON,
    FamilyParams,
    TaskFamily,
    Timing,
)
from contextdelta.tasks.families._suite import (
    GeneratedSuite,
    SuiteArguments,
    SuiteFolderError,
    cell_params,
    generate_suite,
    render_task,
    write_suite,
)
from contextdelta.tasks.families.calendar_invite_twice import CalendarInviteTwice
from contextdelta.tasks.families.calendar_meeting_moved import CalendarMeetingMoved
from contextdelta.tasks.families.config_launch_freeze import ConfigLaunchFreeze
from contextdelta.tasks.families.config_limit_conflict import ConfigLimitConflict
from contextdelta.tasks.families.config_limit_retuned import ConfigLimitRetuned
from contextdelta.tasks.families.order_address_shipped import OrderAddressShipped
from contextdelta.tasks.families.order_refund_handled import OrderRefundHandled

FAMILIES: dict[str, TaskFamily] = {
    family.name: family
    for family in (
        OrderRefundHandled(),
        OrderAddressShipped(),
        CalendarMeetingMoved(),
        CalendarInviteTwice(),
        ConfigLimitRetuned(),
        ConfigLimitConflict(),
        ConfigLaunchFreeze(),
    )
}
"""Every family by name."""


def get_family(name: str) -> TaskFamily:
    """The family called ``name``; raises KeyError naming the known families."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise KeyError(f"unknown task family {name!r}; known families: {', '.join(sorted(FAMILIES))}") from None


__all__ = [
    "FAMILIES",
    "GENERATOR_VERSION",
    "MAX_DISTRACTORS",
    "MAX_HORIZON",
    "CalendarInviteTwice",
    "CalendarMeetingMoved",
    "ConfigLaunchFreeze",
    "ConfigLimitConflict",
    "ConfigLimitRetuned",
    "FamilyParams",
    "GeneratedSuite",
    "OrderAddressShipped",
    "OrderRefundHandled",
    "SuiteArguments",
    "SuiteFolderError",
    "TaskFamily",
    "Timing",
    "cell_params",
    "generate_suite",
    "get_family",
    "render_task",
    "write_suite",
]
