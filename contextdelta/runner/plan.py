"""The episode matrix: tasks x strategies x protection modes x repeats, in a seeded shuffled order."""

from __future__ import annotations

import random
from dataclasses import dataclass

from contextdelta.canonical import sha256_hex
from contextdelta.rundir.ids import episode_run_id


@dataclass(frozen=True, order=True)
class EpisodeSpec:
    """One planned episode."""

    task_id: str
    strategy: str
    protection_mode: str
    repeat: int

    @property
    def run_id(self) -> str:
        return episode_run_id(self.task_id, self.strategy, self.protection_mode, self.repeat)


def episode_seed(run_seed: int, spec: EpisodeSpec) -> int:
    """A 31-bit seed derived from (run seed, task, strategy, mode, repeat); sent to the provider."""
    digest = sha256_hex(f"{run_seed}|{spec.task_id}|{spec.strategy}|{spec.protection_mode}|{spec.repeat}")
    return int(digest[:8], 16) & 0x7FFFFFFF


def order_seed(run_seed: int) -> int:
    """The seed of the episode-order shuffle (recorded in the manifest)."""
    return int(sha256_hex(f"order|{run_seed}")[:8], 16) & 0x7FFFFFFF


def plan_episodes(
    task_ids: list[str], strategies: list[str], modes: list[str], repeats: int, shuffle_seed: int
) -> list[EpisodeSpec]:
    """Every episode of the matrix, shuffled with ``shuffle_seed`` so no condition always runs first (drift in
    a provider over time then spreads over conditions instead of biasing one)."""
    specs = sorted(
        EpisodeSpec(t, s, m, r) for t in task_ids for s in strategies for m in modes for r in range(1, repeats + 1)
    )
    random.Random(shuffle_seed).shuffle(specs)
    return specs
