"""The flip rate across repeats and the printed precision that the bootstrap's Monte-Carlo error allows."""

from __future__ import annotations

import numpy as np
import pytest

from contextdelta.stats import AnalysisParams, EstimateStatus, cluster_by_task, flip_rates, printed_decimals

PARAMS = AnalysisParams(resamples=2000, seed=1)


def test_flip_rate_is_the_share_of_tasks_whose_repeats_disagree() -> None:
    tasks = np.repeat(["a", "b", "c", "d", "e"], 3)
    repeats = np.tile([0, 1, 2], 5)
    values = [1, 1, 1, 0, 0, 0, 1, 0, 1, 0, 0, 1, 1, 1, 1]
    sample = cluster_by_task(np.append(tasks, "f"), np.append(repeats, 0), [*values, 1])  # f: one repeat, left out
    result = flip_rates({"s": sample}, PARAMS)["s"]
    assert result.estimate == pytest.approx(2 / 5)
    assert (result.n_tasks, result.n_episodes, result.status) == (5, 15, EstimateStatus.OK)
    assert result.low is not None and result.high is not None and 0.0 <= result.low < 0.4 < result.high <= 1.0


def test_flip_rate_without_a_task_of_two_repeats_is_no_data() -> None:
    result = flip_rates({"s": cluster_by_task(["a", "b"], [0, 0], [1, 0])}, PARAMS)["s"]
    assert result.status is EstimateStatus.NO_DATA


@pytest.mark.parametrize(
    ("mc_se", "decimals"), [(0.0069, 0), (0.004, 0), (0.0009, 1), (0.00005, 1), (None, 1), (0.0, 1), (0.3, 0)]
)
def test_printed_decimals_stop_where_resampling_noise_starts(mc_se: float | None, decimals: int) -> None:
    assert printed_decimals(mc_se) == decimals
    assert printed_decimals(0.00005, max_decimals=3) == 2
