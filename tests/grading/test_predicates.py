"""End-state predicates: path resolution, every op, and the documented missing-data semantics."""

from __future__ import annotations

import typing

import pytest

from contextdelta.grading import MISSING, OPS, evaluate, resolve_path
from contextdelta.tasks.schema import PredicateOp

STATE = {
    "order/order/A-1": {
        "version": 3,
        "fields": {
            "status": "refunded",
            "refunded_cents": 2500,
            "ratio": 0.5,
            "flag": True,
            "notes": [{"author": "sam", "text": "Refunded the lid"}],
            "items": [{"sku": "KB-1", "quantity": 2}],
            "address": {"city": "Austin", "line2": None},
        },
    }
}
KEY = "order/order/A-1"


def test_every_schema_op_has_an_implementation() -> None:
    assert set(typing.get_args(PredicateOp)) == set(OPS)


def test_resolve_path_reads_version_fields_and_list_indexes() -> None:
    entry = STATE[KEY]
    assert resolve_path(entry, "version") == 3
    assert resolve_path(entry, "address.city") == "Austin"
    assert resolve_path(entry, "items.0.sku") == "KB-1"
    assert resolve_path(entry, "items.-1.quantity") == 2
    assert resolve_path(entry, "address.line2") is None
    assert resolve_path(entry, "items.5.sku") is MISSING
    assert resolve_path(entry, "address.zip") is MISSING
    assert resolve_path(entry, "status.deeper") is MISSING


@pytest.mark.parametrize("segment", ["--1", "\u00b2", "\u0663", "+0", " 0", "0 "])
def test_a_path_segment_that_is_not_an_ascii_integer_indexes_nothing(segment: str) -> None:
    # str.isdigit() passes superscripts and other scripts' digits, lstrip("-") passes "--1": int() crashed on both
    assert resolve_path(STATE[KEY], f"items.{segment}.sku") is MISSING


@pytest.mark.parametrize(
    ("field", "op", "value", "expected"),
    [
        ("status", "eq", "refunded", True),
        ("status", "eq", "paid", False),
        ("refunded_cents", "eq", 2500.0, True),
        ("flag", "eq", 1, False),
        ("flag", "eq", True, True),
        ("version", "eq", 3, True),
        ("version", "gt", 2, True),
        ("refunded_cents", "ge", 2500, True),
        ("refunded_cents", "lt", 2500, False),
        ("ratio", "le", 0.5, True),
        ("status", "gt", 5, False),
        ("status", "in", ["paid", "refunded"], True),
        ("status", "not_in", ["paid", "refunded"], False),
        ("notes", "contains", {"author": "sam"}, True),
        ("notes", "contains", {"author": "sam", "text": "other"}, False),
        ("notes.0.text", "contains", "lid", True),
        ("notes", "not_contains", {"author": "ana"}, True),
        ("address", "contains", "city", True),
        ("notes", "len_eq", 1, True),
        ("items", "len_eq", 2, False),
        ("address.line2", "eq", None, True),
        ("address.line2", "ne", None, False),
    ],
)
def test_ops(field: str, op: str, value: object, expected: bool) -> None:
    assert evaluate(STATE, KEY, field, op, value)[0] is expected


@pytest.mark.parametrize("op", sorted(OPS))
def test_a_missing_resource_is_false_for_every_op(op: str) -> None:
    assert evaluate(STATE, "order/order/NOPE", "status", op, "x") == (False, MISSING)


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        ("eq", False),
        ("ne", True),
        ("not_in", True),
        ("not_contains", True),
        ("contains", False),
        ("gt", False),
        ("len_eq", False),
    ],
)
def test_a_missing_field_holds_only_for_the_negative_ops(op: str, expected: bool) -> None:
    assert evaluate(STATE, KEY, "cancellation_reason", op, ["x"])[0] is expected
