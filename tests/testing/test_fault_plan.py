"""Request selectors and fault plans: which requests a fault hits."""

from __future__ import annotations

import email.utils

import pytest
from pydantic import ValidationError

from contextdelta.testing import FaultKind, FaultPlan, RequestSelector


@pytest.mark.parametrize(
    ("spec", "hits"),
    [
        ("3", [1, 2, 3]),
        (2, [1, 2]),
        ("first:2", [1, 2]),
        ("every:4", [4, 8]),
        ("at:2,5", [2, 5]),
        ("all", list(range(1, 11))),
        ("first:1+every:5", [1, 5, 10]),
        ("0", []),
        (0, []),
    ],
)
def test_selectors_pick_request_numbers(spec: str | int, hits: list[int]) -> None:
    selector = RequestSelector.parse(spec)
    assert [n for n in range(1, 11) if selector.matches(n)] == hits
    assert RequestSelector.parse(str(selector)) == selector


@pytest.mark.parametrize("spec", ["every", "first:x", "at:0", "-1", "sometimes", True])
def test_bad_selectors_are_refused(spec: str | bool) -> None:
    with pytest.raises(ValueError):
        RequestSelector.parse(spec)


@pytest.mark.parametrize("spec", ["at:1,,3", "at:", "at:2,", "first:1+at:,4"])
def test_a_selector_with_an_empty_request_number_is_refused_naming_the_part(spec: str) -> None:
    """'at:1,,3' selected requests 1 and 3, and 'at:' none at all, without a word."""
    with pytest.raises(ValueError, match="bad request selector part"):
        RequestSelector.parse(spec)


def test_response_faults_follow_precedence() -> None:
    plan = FaultPlan(fail_429="all", fail_500="every:2", drop_connection="at:4", slow="at:3", slow_ms=10)
    assert [plan.response_fault(n) for n in (1, 2, 3, 4)] == [
        FaultKind.FAIL_429,
        FaultKind.FAIL_500,
        FaultKind.FAIL_429,
        FaultKind.DROP_CONNECTION,
    ]
    assert FaultKind.SLOW in plan.hits(3) and FaultKind.SLOW not in plan.hits(2)


def test_slow_ms_alone_slows_every_request() -> None:
    assert FaultPlan(slow_ms=5).hits(7) == [FaultKind.SLOW]
    assert FaultPlan().hits(1) == []


def test_retry_after_header() -> None:
    assert FaultPlan().retry_after_header() == "1"
    assert FaultPlan(retry_after=2.5).retry_after_header() == "2.5"
    assert FaultPlan(retry_after=None).retry_after_header() is None
    date = FaultPlan(retry_after=60, retry_after_http_date=True).retry_after_header(now=1_000_000.0)
    assert date is not None and email.utils.parsedate_to_datetime(date).timestamp() == 1_000_060.0


def test_unknown_fault_names_are_refused() -> None:
    with pytest.raises(ValidationError):
        FaultPlan(fail_404=1)  # type: ignore[call-arg]


def test_cli_args_recreate_the_plan() -> None:
    plan = FaultPlan(fail_429="first:2", retry_after=None, fail_500="every:3", malformed_args="at:5", slow_ms=40)
    args = plan.cli_args()
    assert args == [
        "--fail-500",
        "every:3",
        "--fail-429",
        "first:2",
        "--malformed-args",
        "at:5",
        "--slow-ms",
        "40",
        "--no-retry-after",
    ]


def test_a_refusal_mid_run_and_replies_without_usage_are_flags_too() -> None:
    """The server's command line takes what a FaultPlan says (a launched server gets its plan as flags)."""
    plan = FaultPlan(no_usage="at:2", refuse_from=3, refuse_status=429)
    args = plan.cli_args()
    assert args == ["--no-usage", "at:2", "--retry-after", "1", "--refuse-from", "3", "--refuse-status", "429"]
    assert plan.refusal(2) is None
    assert (
        plan.refusal(3)
        == plan.refusal(30)
        == (
            429,
            "You exceeded your current quota (injected).",
            "insufficient_quota",
            "insufficient_quota",
        )
    )
    with pytest.raises(ValidationError):
        FaultPlan(refuse_from=1, refuse_status=500)  # type: ignore[arg-type]
