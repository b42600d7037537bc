"""A plug-in that declares itself not deterministic cannot have its contexts re-derived: verify says so in a note
naming it, and does not let a bare MATCH suggest they were checked."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from contextdelta.context import Message, StrategyBase, TransformResult
from contextdelta.verify import verify_run
from tests.verify.conftest import oracle_run


class Jotter(StrategyBase):
    """Adds a note of its own at every step (as a model-backed strategy would): not a function of the history."""

    name = "jotter"
    deterministic = False

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        messages = [*history, {"role": "user", "content": "Keep going."}]
        return TransformResult(messages=messages, inserted=[len(messages) - 1])


def test_verify_names_a_plugin_whose_contexts_it_does_not_re_derive(tmp_path: Path) -> None:
    outcome = oracle_run(tmp_path, ["tests.verify.test_nondeterministic_plugin:Jotter", "last_n"])
    assert outcome.manifest.counts.succeeded == 2
    result = verify_run(outcome.path)
    assert result.ok, result.lines()
    assert [n for n in result.notes if "jotter" in n] == [
        "strategy 'jotter' (tests.verify.test_nondeterministic_plugin:Jotter) declares itself not deterministic: its "
        "contexts are not re-derived, only checked against the receipts' hash chain and their own hashes and counts"
    ]
    assert not any("last_n" in n for n in result.notes)
