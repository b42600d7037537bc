"""Every number of the report is recomputed by verify: a change to any new section of aggregate_metrics.json
(breakdowns, flip rates, exact bounds, tests, sensitivity rows, detectable differences, precision, warnings) or
to benchmark_report.md is named."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.report import build_report
from contextdelta.report._build import params_of, write_report_files
from contextdelta.rundir import RunDirectory
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


def _differences(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Every paired difference of the research questions with a bootstrap interval (status ok)."""
    found = [c["difference"] for q in data["research_questions"] for c in q["comparisons"]]
    return [d for d in found if d["status"] == "ok"]


def test_a_report_written_with_plain_percentile_intervals_still_verifies_and_keeps_its_method(tmp_path: Path) -> None:
    """Reports written before 0.6.0 have no `task_interval` and plain percentile task-level intervals: verify
    recomputes them with that method (MATCH), and `report --write` does not switch the method under them."""
    path = runs.copy_run(runs.faulted_run(), tmp_path)
    current = json.loads((path / AGGREGATE_METRICS).read_text())
    assert current["analysis"]["task_interval"] == "expanded_percentile"
    assert "**Task-level intervals**" in (path / BENCHMARK_REPORT).read_text()
    directory = RunDirectory(path)
    old = {k: v for k, v in current["analysis"].items() if k != "task_interval"}
    params = params_of(old)
    assert params.task_interval == "percentile"
    write_report_files(directory, build_report(directory.read_manifest(), directory.read_episodes(), params))
    assert directory.reseal_files()  # as if 0.5.0 had written these reports
    written = json.loads((path / AGGREGATE_METRICS).read_text())
    assert "task_interval" not in written["analysis"]
    assert "Task-level intervals" not in (path / BENCHMARK_REPORT).read_text()
    plain, expanded = _differences(written), _differences(current)
    assert plain and len(plain) == len(expanded)
    assert all(p["estimate"] == e["estimate"] for p, e in zip(plain, expanded, strict=True))
    assert all(e["low"] <= p["low"] and p["high"] <= e["high"] for p, e in zip(plain, expanded, strict=True))
    verified = verify_run(path)
    assert verified.divergences == [], verified.divergences
    result = CliRunner().invoke(app, ["report", path.name, "--results-dir", str(path.parent), "--write"])
    assert result.exit_code == 0, result.output
    assert json.loads((path / AGGREGATE_METRICS).read_text()) == written


def _pass_k(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pass^k estimate (both kinds) and flip rate with an interval from at least two tasks (status ok)."""
    found = [e for c in data["conditions"] for p in c["pass_k"].values() for e in (p["unbiased"], p["all_pass"])]
    found += [f for c in data["conditions"] for f in c["flip_rates"].values()]
    return [e for e in found if e["status"] == "ok"]


def _rates(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Every per-condition rate with a bootstrap interval (status ok)."""
    return [r for c in data["conditions"] for r in c["rates"].values() if r["status"] == "ok"]


def test_a_report_of_0_13_0_with_bootstrapped_pass_k_still_verifies_and_keeps_its_method(tmp_path: Path) -> None:
    """Reports written by 0.13.0 have no `share_interval` nor `cluster_interval`: their pass^k and flip-rate
    intervals are the task bootstrap's, their rates' the plain percentile interval. verify recomputes them so (no
    divergence), `report --write` keeps those methods, and `report --share-interval clopper_pearson` switches pass^k
    and the flip rate to the Clopper-Pearson interval, which verify then follows."""
    path = runs.copy_run(runs.faulted_run(), tmp_path)
    current = json.loads((path / AGGREGATE_METRICS).read_text())
    assert current["analysis"]["share_interval"] == "clopper_pearson"
    assert "**pass^k and flip-rate intervals**" in (path / BENCHMARK_REPORT).read_text()
    directory = RunDirectory(path)
    assert current["analysis"]["cluster_interval"] == "expanded_percentile"
    old = {k: v for k, v in current["analysis"].items() if k not in ("share_interval", "cluster_interval")}
    params = params_of(old)
    assert params.share_interval == "bootstrap" and params.task_interval == "expanded_percentile"
    assert params.cluster_interval == "percentile"
    write_report_files(directory, build_report(directory.read_manifest(), directory.read_episodes(), params))
    assert directory.reseal_files()  # as if 0.13.0 had written these reports
    written = json.loads((path / AGGREGATE_METRICS).read_text())
    assert "share_interval" not in written["analysis"] and "cluster_interval" not in written["analysis"]
    text = (path / BENCHMARK_REPORT).read_text()
    assert "pass^k and flip-rate intervals" not in text and "Rate and mean intervals" not in text
    plain, expanded = _rates(written), _rates(current)
    assert plain and len(plain) == len(expanded)
    assert all(e["low"] <= p["low"] and p["high"] <= e["high"] for p, e in zip(plain, expanded, strict=True))
    assert any((p["low"], p["high"]) != (e["low"], e["high"]) for p, e in zip(plain, expanded, strict=True))
    assert "**Task-level intervals** (paired differences, pass^k, flip rate)" in text
    bootstrapped, clopper = _pass_k(written), _pass_k(current)
    assert bootstrapped and len(bootstrapped) == len(clopper)
    assert all(b["estimate"] == c["estimate"] for b, c in zip(bootstrapped, clopper, strict=True))
    assert all(b["mc_se"] is not None and c["mc_se"] is None for b, c in zip(bootstrapped, clopper, strict=True))
    assert any((b["low"], b["high"]) != (c["low"], c["high"]) for b, c in zip(bootstrapped, clopper, strict=True))
    verified = verify_run(path)
    assert verified.divergences == [], verified.divergences
    result = CliRunner().invoke(app, ["report", path.name, "--results-dir", str(path.parent), "--write"])
    assert result.exit_code == 0, result.output
    assert json.loads((path / AGGREGATE_METRICS).read_text()) == written
    result = CliRunner().invoke(
        app, ["report", path.name, "--results-dir", str(path.parent), "--share-interval", "clopper_pearson"]
    )
    assert result.exit_code == 0, result.output
    switched = json.loads((path / AGGREGATE_METRICS).read_text())
    assert switched["analysis"]["share_interval"] == "clopper_pearson" and _pass_k(switched) == _pass_k(current)
    assert "cluster_interval" not in switched["analysis"] and _rates(switched) == plain  # the rates keep theirs
    assert verify_run(path).divergences == []
    result = CliRunner().invoke(
        app, ["report", path.name, "--results-dir", str(path.parent), "--share-interval", "wilson"]
    )
    assert result.exit_code == 2
    assert "--share-interval must be one of clopper_pearson, bootstrap, not 'wilson'" in result.output
    result = CliRunner().invoke(
        app, ["report", path.name, "--results-dir", str(path.parent), "--cluster-interval", "bca"]
    )
    assert result.exit_code == 2
    assert "--cluster-interval must be one of expanded_percentile, percentile, not 'bca'" in result.output
    result = CliRunner().invoke(
        app, ["report", path.name, "--results-dir", str(path.parent), "--cluster-interval", "expanded_percentile"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads((path / AGGREGATE_METRICS).read_text()) == current  # both methods of this version again
    assert verify_run(path).divergences == []
