"""Prompt caching in the costs: a run against a server that reports cached and cache-write tokens, priced with
cache rates, records its prices, costs each episode with the cache, reports the cost with and without it per
condition and whether each strategy's saving survives it, and verifies; tampering is named; a run from before
prices were recorded keeps its reports and verifies."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.providers import Price
from contextdelta.report import build_report
from contextdelta.rundir import AGGREGATE_METRICS, BENCHMARK_REPORT, MANIFEST, RAW_RUNS, RunDirectory, episode_cost
from contextdelta.runner import BenchmarkError, BenchmarkRequest, run_benchmark
from contextdelta.testing import serve_scripted
from contextdelta.verify import verify_run
from tests.report import runs

BEFORE_PRICES = Path(__file__).resolve().parents[1] / "verify" / "fixtures" / "20261201T104738Z-6ea5de"
"""A run directory written before prices were recorded (see tests/verify/fixtures/README.md)."""


@pytest.mark.slow
def test_a_cached_run_records_its_prices_and_costs_each_episode_with_the_cache() -> None:
    directory = RunDirectory(runs.cached_run())
    manifest, records = directory.read_manifest(), directory.read_episodes()
    assert manifest.prices == {m: Price.model_validate(p) for m, p in runs.CACHED_PRICES.items()}
    model = manifest.provider.model
    for record in records:
        totals = record.trace.totals
        assert totals.agent_usage.cached_tokens is not None and totals.agent_usage.cache_write_tokens is not None
        with_cache = episode_cost(totals, manifest.prices, model, model)
        without = episode_cost(totals, manifest.prices, model, model, caching=False)
        assert record.cost_usd == with_cache
        assert with_cache is not None and without is not None and with_cache != without


def test_the_report_shows_cost_with_and_without_caching_and_whether_savings_survive() -> None:
    path = runs.cached_run()
    metrics = json.loads((path / AGGREGATE_METRICS).read_text())
    caching = metrics["caching"]
    assert caching["prices"] == runs.CACHED_PRICES
    assert [c["condition"]["strategy"] for c in caching["conditions"]] == [
        "full_history",
        "last_n",
        "typed_state_digest",
    ]
    for c in caching["conditions"]:
        tokens, costs = c["tokens"], c["costs"]
        assert tokens["cached_prompt_tokens"]["total"] > 0 and 0 < c["cache_hit_ratio"] < 1
        assert tokens["prompt_tokens"]["total"] == sum(
            tokens[p]["total"] for p in ("cached_prompt_tokens", "cache_write_tokens", "uncached_prompt_tokens")
        )
        assert costs["cost_with_caching_usd"]["total"] < costs["cost_without_caching_usd"]["total"]
        # the with-caching total is the recorded cost_usd total of the conditions table
        (same,) = [x for x in metrics["conditions"] if x["condition"] == c["condition"]]
        assert costs["cost_with_caching_usd"]["total"] == pytest.approx(same["totals"]["cost_usd"]["total"])
    by_strategy = {r["condition"]["strategy"]: r for r in caching["reductions"]}
    assert set(by_strategy) == {"last_n", "typed_state_digest"}
    assert all(r["survives"] in ("yes", "reversed", "unclear", "no_saving") for r in by_strategy.values())
    report = (path / BENCHMARK_REPORT).read_text()
    assert "## Prompt caching and cost" in report
    assert "| strategy | baseline | agent tokens | agent + summary tokens | cost saved, no caching |" in report
    assert "saving survives caching |" in report
    assert "`scripted-context_trusting`: input $2, output $8, cached input $0.5, cache write $2.5" in report


@pytest.mark.slow
def test_the_cached_run_verifies_and_a_changed_cost_or_price_is_named(tmp_path: Path) -> None:
    assert verify_run(runs.cached_run()).ok
    path = runs.copy_run(runs.cached_run(), tmp_path)
    lines = (path / RAW_RUNS).read_text().splitlines()
    record = json.loads(lines[0])
    record["cost_usd"] = record["cost_usd"] * 2
    lines[0] = json.dumps(record)
    (path / RAW_RUNS).write_text("\n".join(lines) + "\n")
    found = [d for d in verify_run(path).divergences if d.field == "cost_usd"]
    assert [d.run_id for d in found] == [record["run_id"]] * 2  # the receipt's seal, then the re-derived cost
    assert "edited after the run" in found[0].detail and "the usage at the run's prices gives" in found[1].detail

    path = runs.copy_run(runs.cached_run(), tmp_path / "prices")
    manifest = json.loads((path / MANIFEST).read_text())
    manifest["prices"]["scripted-context_trusting"]["cached_input_per_mtok"] = 2.0
    (path / MANIFEST).write_text(json.dumps(manifest))
    fields = {d.field for d in verify_run(path).divergences}
    assert "cost_usd" in fields and any(f.startswith(f"{AGGREGATE_METRICS} caching") for f in fields)


@pytest.mark.slow
def test_a_free_model_gets_a_caching_section_with_no_price_to_compare() -> None:
    metrics = json.loads((runs.trusting_run() / AGGREGATE_METRICS).read_text())["caching"]
    assert metrics["prices"] == {
        "scripted-context_trusting": {
            "input_per_mtok": 0.0,
            "output_per_mtok": 0.0,
            "cached_input_per_mtok": None,
            "cache_write_per_mtok": None,
        }
    }
    assert {r["survives"] for r in metrics["reductions"]} == {"no_price"}
    assert all(c["costs"]["cost_with_caching_usd"]["total"] == 0 for c in metrics["conditions"])
    assert all(c["cache_hit_ratio"] == 0 for c in metrics["conditions"])  # reported as 0 by the scripted server


def test_a_run_from_before_prices_keeps_its_reports_and_verifies(tmp_path: Path) -> None:
    path = tmp_path / BEFORE_PRICES.name
    shutil.copytree(BEFORE_PRICES, path)
    directory = RunDirectory(path)
    manifest = directory.read_manifest()
    assert manifest.prices is None and "prices" not in json.loads((path / MANIFEST).read_text())
    report = build_report(manifest, directory.read_episodes())
    assert report.metrics.caching is None and "caching" not in report.metrics_json()
    assert "Prompt caching" not in report.markdown and "survives caching" not in report.markdown
    result = verify_run(path)  # every number and line re-derives (the statistics code's hash is only a note)
    assert result.ok and not [n for n in result.notes if "metrics schema" in n], result.lines()


def test_verify_names_a_report_that_differs_beyond_the_statistics_codes_hash(tmp_path: Path) -> None:
    path = tmp_path / BEFORE_PRICES.name
    shutil.copytree(BEFORE_PRICES, path)
    report = (path / BENCHMARK_REPORT).read_text()
    (path / BENCHMARK_REPORT).write_text(report.replace("| full_history / unprotected |", "| full_history |", 1))
    assert [d.field for d in verify_run(path).divergences] == [BENCHMARK_REPORT]


@pytest.mark.slow
def test_resume_keeps_the_recorded_prices_and_refuses_a_table_that_prices_the_run_differently(
    tmp_path: Path,
) -> None:
    prices, other = tmp_path / "prices.json", tmp_path / "other.json"
    prices.write_text(json.dumps({"scripted-oracle": {"input_per_mtok": 1000.0, "output_per_mtok": 1000.0}}))
    other.write_text(json.dumps({"scripted-oracle": {"input_per_mtok": 1.0, "output_per_mtok": 1.0}}))
    fields = {
        "tasks_dir": runs.TASKS,
        "model": "scripted-oracle",
        "results_dir": tmp_path / "results",
        "task_ids": runs.TRUST_TASKS,
        "strategies": ["full_history"],
        "protection_modes": ["unprotected"],
        "repeats": 1,
        "concurrency": 1,
    }
    with serve_scripted("oracle", runs.TASKS, in_process=True) as url:
        first = run_benchmark(
            BenchmarkRequest.model_validate({**fields, "base_url": url, "price_table": prices, "max_cost_usd": 0.001})
        )
        assert first.manifest.counts.finished == 1
        resume = {"resume": str(first.path), "base_url": url, "model": "scripted-oracle", "max_cost_usd": 1e6}
        with pytest.raises(BenchmarkError, match=r"--price-table .* prices scripted-oracle differently"):
            run_benchmark(BenchmarkRequest.model_validate({**resume, "price_table": other}))
        done = run_benchmark(BenchmarkRequest.model_validate(resume))  # the built-in table says 0: not used
    assert done.manifest.counts.finished == 3 and all(r.cost_usd and r.cost_usd > 1 for r in done.records)
    assert verify_run(done.path).ok


def test_a_bad_price_table_is_one_line_and_exit_2(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"m": {"input_per_mtok": 1, "output_per_mtok": 1, "cached_input_per_mtok": -1}}))
    result = CliRunner().invoke(
        app,
        ["run-benchmark", "--model", "m", "--price-table", str(prices), "--results-dir", str(tmp_path / "r")],
    )
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "m.cached_input_per_mtok" in lines[0] and "Traceback" not in result.output
