"""What every section of the metrics pipeline reads: the run's episode table, its conditions, the analysis
parameters, and a cache of the task-clustered samples the sections share."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from contextdelta.report._models import ConditionKey
from contextdelta.report._table import Condition, EpisodeTable
from contextdelta.rundir import RunManifest
from contextdelta.stats import AnalysisParams, ClusteredSample

Subset = tuple[str, str]
"""A restriction of the episodes: ``("", "")`` for all, ``("hazard", h)``, ``("world", w)``, ``("verdict", "")``
for the episodes that are not failed trials."""
ALL: Subset = ("", "")
WITH_VERDICT: Subset = ("verdict", "")


@dataclass
class MetricsContext:
    """The inputs of the metrics sections (see `contextdelta.report._metrics`)."""

    manifest: RunManifest
    table: EpisodeTable
    params: AnalysisParams
    keys: list[ConditionKey]
    """The run's conditions: manifest order (strategy-major), then any extra condition found in the episodes."""
    _samples: dict[tuple[str, Subset], dict[Condition, ClusteredSample]] = field(default_factory=dict)
    _tasks: tuple[npt.NDArray[np.str_], npt.NDArray[np.int64]] | None = None

    @classmethod
    def build(cls, manifest: RunManifest, table: EpisodeTable, params: AnalysisParams) -> MetricsContext:
        keys = [
            ConditionKey(strategy=s, protection_mode=m) for s in manifest.strategies for m in manifest.protection_modes
        ]
        known = {(k.strategy, k.protection_mode) for k in keys}
        keys += [ConditionKey(strategy=s, protection_mode=m) for s, m in table.conditions() if (s, m) not in known]
        return cls(manifest=manifest, table=table, params=params, keys=keys)

    def rows(self, condition: Condition, subset: Subset = ALL) -> npt.NDArray[np.int64]:
        """Row indices of a condition's episodes within ``subset``."""
        rows = self.table.rows(condition)
        if subset == ALL:
            return rows
        if subset == WITH_VERDICT:
            return np.asarray(rows[~self.table.failed[rows]], dtype=np.int64)
        column = self.table.hazard if subset[0] == "hazard" else self.table.world
        return np.asarray(rows[column[rows] == subset[1]], dtype=np.int64)

    def task_names(self) -> npt.NDArray[np.str_]:
        """Every task id of the run, sorted (the code of a task is its index here)."""
        return self._task_index()[0]

    def task_codes(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Per episode, its task's code and its repeat."""
        return self._task_index()[1], self.table.repeat

    def _task_index(self) -> tuple[npt.NDArray[np.str_], npt.NDArray[np.int64]]:
        if self._tasks is None:
            names, codes = np.unique(self.table.task_id, return_inverse=True)
            self._tasks = (names, codes.astype(np.int64).reshape(-1))
        return self._tasks

    def samples(self, metric: str, subset: Subset = ALL) -> dict[Condition, ClusteredSample]:
        """``metric`` per condition (only conditions with episodes in ``subset``), computed once."""
        key = (metric, subset)
        if key not in self._samples:
            found = {}
            for k in self.keys:
                condition = (k.strategy, k.protection_mode)
                rows = self.rows(condition, subset)
                if rows.size:
                    found[condition] = self.table.sample(metric, rows)
            self._samples[key] = found
        return self._samples[key]
