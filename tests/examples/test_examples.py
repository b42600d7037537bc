"""examples/: the plumbing fixture says what it is and loads; the provider .env files are valid settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextdelta.attribution import FailureMode
from contextdelta.settings import Settings
from examples.smoke.mock_pipeline import FIXTURE, KIND, PICKS, generate, load_fixture

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_fixture_says_on_its_first_line_that_it_is_plumbing_not_a_result() -> None:
    first = FIXTURE.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith('{"notice":"PLUMBING FIXTURE, NOT A BENCHMARK RESULT')
    header = json.loads(first)
    assert header["kind"] == KIND and header["plumbing_only"] is True
    readme = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    assert "plumbing fixture, NOT a benchmark result" in readme and "tests plumbing only" in readme


def test_the_fixture_loads_with_one_label_per_failure_mode() -> None:
    fixture = load_fixture()
    labels = [e.failure_mode for e in fixture.episodes]
    assert sorted(m for m in labels if m) == sorted(m.value for m in FailureMode)
    assert labels.count(None) == 1
    assert len({e.record.run_id for e in fixture.episodes}) == len(labels)
    assert {e.record.run_group_id for e in fixture.episodes} == {fixture.manifest.run_group_id} == {"mock-pipeline"}
    doctored = [e for e in fixture.episodes if e.label["doctored"]]
    assert [e.failure_mode for e in doctored] == ["summary_distorted_state"]
    assert all(e.label["why"] for e in fixture.episodes)


@pytest.mark.parametrize("name", ["openai", "vllm", "ollama", "llamacpp"])
def test_provider_env_files_are_valid_settings_with_their_command(name: str) -> None:
    path = EXAMPLES / "providers" / f"{name}.env"
    text = path.read_text(encoding="utf-8")
    assert f"set -a && . examples/providers/{name}.env && set +a && contextdelta run-benchmark --tasks tasks" in text
    keys = [line.split("=", 1)[0] for line in text.splitlines() if line and not line.startswith("#")]
    assert all(k.startswith("CONTEXTDELTA_") for k in keys)
    settings = Settings(_env_file=path)  # type: ignore[call-arg]
    assert settings.base_url and settings.base_url.endswith("/v1") and settings.model
    assert not any(k == "CONTEXTDELTA_API_KEY" and name == "openai" for k in keys)  # real keys stay in the shell


@pytest.mark.slow
@pytest.mark.usefixtures("no_retry_waits")
def test_the_generator_reproduces_the_labelled_episodes(tmp_path: Path) -> None:
    regenerated = generate(tmp_path / "mock_pipeline.jsonl")
    committed = load_fixture()
    assert [(e.record.run_id, e.failure_mode) for e in regenerated.episodes] == [
        (e.record.run_id, e.failure_mode) for e in committed.episodes
    ]
    for new, old in zip(regenerated.episodes, committed.episodes, strict=True):
        assert new.record.verdict == old.record.verdict
        assert [e.result for e in new.record.trace.tool_events()] == [e.result for e in old.record.trace.tool_events()]
    assert len(PICKS) == len(committed.episodes)
