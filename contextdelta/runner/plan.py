"""The episode matrix: tasks x strategies x protection modes x repeats, in a seeded shuffled order, and the shards
a plan can be split into (``--shard I/N``)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from contextdelta.canonical import sha256_hex
from contextdelta.rundir import RunManifest, SeedRule, episode_run_id


@dataclass(frozen=True, order=True)
class EpisodeSpec:
    """One planned episode."""

    task_id: str
    strategy: str
    protection_mode: str
    repeat: int
    control: str = ""
    """The control condition (``no_mutation``), or empty for the main matrix."""

    @property
    def run_id(self) -> str:
        return episode_run_id(self.task_id, self.strategy, self.protection_mode, self.repeat, self.control)


SEED_RULE = SeedRule.TASK_REPEAT
"""The seed rule of new runs (a resumed run keeps the rule its manifest records)."""


def episode_seed(run_seed: int, spec: EpisodeSpec, rule: SeedRule = SEED_RULE) -> int:
    """The 31-bit sampling seed sent to the provider for one episode, by ``rule`` (see `SeedRule`).

    Under `SeedRule.TASK_REPEAT` it depends on (run seed, task, repeat) only, so both episodes of every paired
    comparison share it (common random numbers), and so does a control episode with its main episode;
    `SeedRule.CONDITION` is the rule of older run directories.
    """
    if rule is SeedRule.TASK_REPEAT:
        text = f"{run_seed}|{spec.task_id}|{spec.repeat}"
    else:
        text = f"{run_seed}|{spec.task_id}|{spec.strategy}|{spec.protection_mode}|{spec.repeat}"
    return int(sha256_hex(text)[:8], 16) & 0x7FFFFFFF


def order_seed(run_seed: int) -> int:
    """The seed of the episode-order shuffle (recorded in the manifest)."""
    return int(sha256_hex(f"order|{run_seed}")[:8], 16) & 0x7FFFFFFF


def plan_episodes(
    task_ids: list[str],
    strategies: list[str],
    modes: list[str],
    repeats: int,
    shuffle_seed: int,
    controls: Sequence[str] = (),
) -> list[EpisodeSpec]:
    """Every episode of the matrix (and, for each control condition, the same matrix again under it), shuffled
    with ``shuffle_seed`` so no condition always runs first (drift in a provider over time then spreads over
    conditions instead of biasing one)."""
    specs = sorted(
        EpisodeSpec(t, s, m, r, c)
        for c in ("", *controls)
        for t in task_ids
        for s in strategies
        for m in modes
        for r in range(1, repeats + 1)
    )
    random.Random(shuffle_seed).shuffle(specs)
    return specs


@dataclass(frozen=True)
class Shard:
    """``--shard I/N``: the I-th of N parts of a plan (1-based)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.index <= self.count:
            raise ValueError(f"shard {self.index}/{self.count}: the index must be between 1 and {self.count}")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"I/N"`` -> Shard; ValueError with a message that names the expected form."""
        index, sep, count = text.strip().partition("/")
        try:
            if not sep:
                raise ValueError
            shard = cls(int(index), int(count))
        except ValueError as exc:
            detail = f" ({exc})" if str(exc) else ""
            raise ValueError(f"--shard {text!r}: expected I/N with 1 <= I <= N, e.g. 2/3{detail}") from None
        return shard

    def select(self, specs: list[EpisodeSpec]) -> list[EpisodeSpec]:
        """This shard's episodes: every N-th episode of the shuffled plan, starting at the I-th. Each episode of
        the plan is in exactly one shard, and shards differ in size by at most one episode."""
        return specs[self.index - 1 :: self.count]

    def render(self) -> str:
        return f"{self.index}/{self.count}"


def plan_sha256(run_seed: int, specs: list[EpisodeSpec], rule: SeedRule = SEED_RULE) -> str:
    """The hash of a whole plan: every episode id with its seed (by ``rule``), in start order. Shards of one plan
    record the same hash, which is how ``merge`` knows they are parts of one run."""
    return sha256_hex("\n".join(f"{s.run_id}:{episode_seed(run_seed, s, rule)}" for s in specs))


def manifest_episodes(manifest: RunManifest) -> tuple[list[EpisodeSpec], list[EpisodeSpec]]:
    """The whole plan a manifest records, and the part of it its run directory holds (its shard, or all of it),
    both in start order. Pure: derived from the manifest's tasks, matrix and seed alone."""
    specs = plan_episodes(
        [t.id for t in manifest.tasks],
        manifest.strategies,
        manifest.protection_modes,
        manifest.repeats,
        manifest.order_seed,
        manifest.controls,
    )
    if manifest.shard is None:
        return specs, specs
    return specs, Shard(manifest.shard.index, manifest.shard.count).select(specs)
