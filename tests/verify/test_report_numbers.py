"""Every number of the report is recomputed by verify: a change to any new section of aggregate_metrics.json
(breakdowns, flip rates, exact bounds, tests, sensitivity rows, detectable differences, precision, warnings) or
to benchmark_report.md is named."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contextdelta.rundir.layout import AGGREGATE_METRICS, BENCHMARK_REPORT
from contextdelta.verify import verify_run
from tests.report import runs

Edit = Callable[[dict[str, Any]], str]


def _breakdown(data: dict[str, Any]) -> str:
    data["breakdowns"][0]["cells"][0]["rates"]["success"]["high"] = 0.5
    return "breakdowns[0].cells[0].rates.success.high"


def _flip(data: dict[str, Any]) -> str:
    data["conditions"][0]["flip_rates"]["success"]["estimate"] = 0.25
    return "conditions[0].flip_rates.success.estimate"


def _exact_bound(data: dict[str, Any]) -> str:
    data["conditions"][1]["rates"]["stale_action"]["high"] = 0.01
    return "conditions[1].rates.stale_action.high"


def _pvalue(data: dict[str, Any]) -> str:
    data["research_questions"][2]["comparisons"][0]["test"]["pvalue"] = 0.01
    return "research_questions[2].comparisons[0].test.pvalue"


def _sensitivity(data: dict[str, Any]) -> str:
    data["research_questions"][2]["comparisons"][0]["sensitivity"]["difference"]["estimate"] = 0.0
    return "research_questions[2].comparisons[0].sensitivity.difference.estimate"


def _detectable(data: dict[str, Any]) -> str:
    data["research_questions"][0]["comparisons"][0]["detectable"]["largest_difference"] = 0.5
    return "research_questions[0].comparisons[0].detectable.largest_difference"


def _family(data: dict[str, Any]) -> str:
    data["research_questions"][2]["family"] = []
    return "research_questions[2].family"


def _precision(data: dict[str, Any]) -> str:
    data["analysis"]["rate_decimals"] = 2
    return "analysis.rate_decimals"


def _warning(data: dict[str, Any]) -> str:
    data["warnings"] = []
    return "warnings"


def _failed_pairs(data: dict[str, Any]) -> str:
    data["research_questions"][2]["comparisons"][0]["failed_pairs"] = 0
    return "research_questions[2].comparisons[0].failed_pairs"


EDITS = [
    _breakdown,
    _flip,
    _exact_bound,
    _pvalue,
    _sensitivity,
    _detectable,
    _family,
    _precision,
    _warning,
    _failed_pairs,
]


@pytest.mark.slow
@pytest.mark.parametrize("edit", EDITS, ids=[e.__name__.strip("_") for e in EDITS])
def test_a_changed_number_is_named(edit: Edit, tmp_path: Path) -> None:
    path = runs.copy_run(runs.faulted_run(), tmp_path)
    data = json.loads((path / AGGREGATE_METRICS).read_text())
    where = edit(data)
    (path / AGGREGATE_METRICS).write_text(json.dumps(data))
    fields = [d.field for d in verify_run(path).divergences]
    assert any(f.startswith(f"{AGGREGATE_METRICS} {where}") for f in fields), fields


def test_a_changed_interval_in_the_markdown_is_named(tmp_path: Path) -> None:
    path = runs.copy_run(runs.faulted_run(), tmp_path)
    text = (path / BENCHMARK_REPORT).read_text()
    assert "exact |" in text
    (path / BENCHMARK_REPORT).write_text(text.replace("exact |", "|", 1))
    found = verify_run(path).divergences
    assert [d.field for d in found] == [BENCHMARK_REPORT, BENCHMARK_REPORT]  # the seal, then the rebuilt report
    assert found[0].detail.startswith("edited after the run") and "rebuilt" in found[1].detail
