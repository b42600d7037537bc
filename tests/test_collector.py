"""The collector setting for a process that runs episodes: frozen start-up objects, rarer young collections."""

from __future__ import annotations

import gc
from typing import Any, cast

import anyio

from contextdelta._collector import YOUNG_THRESHOLD, tuned_for_episodes
from contextdelta.runner.ray_executor import EpisodeActor


def test_the_block_freezes_what_exists_and_collects_young_objects_less_often_then_undoes_both() -> None:
    before = gc.get_threshold()
    frozen_before = gc.get_freeze_count()
    existing = [object(), {"a": []}]  # tracked by the collector before the block
    with tuned_for_episodes():
        assert gc.get_threshold() == (YOUNG_THRESHOLD, *before[1:])
        assert gc.get_freeze_count() >= frozen_before + 1
        assert not any(o is existing[1] for o in gc.get_objects())  # frozen: no collection walks it
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    assert any(o is existing[1] for o in gc.get_objects())


def test_cycles_made_inside_the_block_are_still_collected() -> None:
    class Node:
        pass

    with tuned_for_episodes():
        node = Node()
        node.self = node  # type: ignore[attr-defined]
        del node
        assert gc.collect() >= 1


def test_a_block_inside_another_leaves_the_setting_to_the_outer_one() -> None:
    before = gc.get_threshold()
    with tuned_for_episodes():
        with tuned_for_episodes():
            pass
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD and gc.get_freeze_count() > 0
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_a_ray_actor_holds_the_setting_from_its_start_to_its_close() -> None:
    # the actor class itself, outside Ray: the setting is its own doing, whichever process Ray starts it in
    before = gc.get_threshold()
    actor = EpisodeActor(cast(Any, None), None)
    assert gc.get_threshold() == (YOUNG_THRESHOLD, *before[1:]) and gc.get_freeze_count() > 0
    anyio.run(actor.close)
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
