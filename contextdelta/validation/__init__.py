"""``validate-tasks`` (SPEC section 5): every task file loaded, checked, replayed (reference solution and unsafe
trajectory, graded in both protection modes) and compared with ``SUITE.lock``.

It sits above ``contextdelta.tasks`` and ``contextdelta.grading`` (it needs both; the graders need the tasks)::

    report = validate_suite(Path("tasks"))     # SuiteReport: one TaskReport per file, problems, suite hash
    print_report(report, console)               # the table validate-tasks prints
"""

from contextdelta.validation.suite import (
    MODES,
    STALE_HAZARDS,
    ReplayCheck,
    RunnableSuite,
    SuiteRefused,
    SuiteReport,
    TaskReport,
    check_replays,
    checked_suite,
    runnable_suite,
    suite_fingerprint,
    task_report,
    validate_suite,
    write_lock,
)
from contextdelta.validation.table import print_report, task_table

__all__ = [
    "MODES",
    "STALE_HAZARDS",
    "ReplayCheck",
    "RunnableSuite",
    "SuiteRefused",
    "SuiteReport",
    "TaskReport",
    "check_replays",
    "checked_suite",
    "print_report",
    "runnable_suite",
    "suite_fingerprint",
    "task_report",
    "task_table",
    "validate_suite",
    "write_lock",
]
