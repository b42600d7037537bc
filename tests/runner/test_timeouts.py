"""How long a run lets one model call take: ``--timeout-s`` per attempt, within the retries' time budget."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from contextdelta.providers import OpenAIProvider, RetryPolicy
from contextdelta.runner import plan_run
from contextdelta.settings import Settings
from tests.runner.conftest import benchmark_request


@pytest.mark.parametrize("max_retries", [None, 2])
def test_a_long_timeout_is_not_cut_short_by_the_retry_budget(
    oracle_url: str, tmp_path: Path, max_retries: int | None
) -> None:
    # a slow local model given --timeout-s 600: an attempt never outlives the retries' time budget, so a budget
    # of the default 180 s would end every call after 180 s, whatever the flag said
    plan = plan_run(benchmark_request(oracle_url, tmp_path, timeout_s=600, max_retries=max_retries), Settings())
    assert plan.provider_spec is not None
    worker = plan.provider_spec.build()  # what each worker process builds its own provider from
    for provider in (plan.provider, worker):
        assert isinstance(provider, OpenAIProvider)
        assert provider.timeout_s == 600 and provider.retry.max_total_s >= 1.5 * 600
        assert provider.retry.max_attempts == (RetryPolicy().max_attempts if max_retries is None else 3)
        asyncio.run(provider.aclose())


def test_the_default_budget_is_kept_for_short_timeouts() -> None:
    assert RetryPolicy.for_timeout(120) == RetryPolicy()
    assert RetryPolicy.for_timeout(5, max_attempts=2) == RetryPolicy(max_attempts=2)
    assert OpenAIProvider(model="m", timeout_s=1000).retry.max_total_s == 1500
