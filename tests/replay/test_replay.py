"""``contextdelta replay``: a golden-file test of one known episode, and the command line (plain when piped)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.replay import EpisodeNotFound, render_episode, select_episodes
from contextdelta.rundir import EpisodeRecord
from examples.smoke.mock_pipeline import Fixture, load_fixture, write_run_directory

GOLDEN = Path(__file__).parent / "golden" / "context_dropped_fresh_observation.txt"
RUN = "cfg-legacy-cleanup.last_n.unprotected.r1"
runner = CliRunner()


@pytest.fixture(scope="module")
def fixture() -> Fixture:
    return load_fixture()


@pytest.fixture
def results(tmp_path: Path, fixture: Fixture) -> Path:
    return write_run_directory(tmp_path / "results", fixture).parent


def test_replay_of_a_known_episode_matches_the_golden_file(fixture: Fixture) -> None:
    text = render_episode(fixture.episode("context_dropped_fresh_observation")).plain
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8"), "replay output changed; UPDATE_GOLDEN=1 rewrites the golden"


def test_replay_shows_context_calls_mutations_and_versions(fixture: Fixture) -> None:
    text = render_episode(fixture.episode("context_dropped_fresh_observation")).plain
    step9 = text[text.index("── step 9 ") : text.index("── step 10 ")]
    # what the strategy removed from the full history (the read that showed the change, step 4)
    assert "not sent: [2-11] (steps 1-5)" in step9
    assert "- [10] assistant (step 5)" in step9
    # what the model called, what came back, and the versions at the write
    assert "→ #8 delete_config" in step9
    assert "agent last saw v2 (call #3) · at execution v2 · key_frozen  PROHIBITED REJECTED" in step9
    assert '← {"error":{"code":"key_frozen"' in step9
    # the hidden mutation between the calls
    assert (
        "hidden mutation finance-claims-export-key by finance-data@lumen.dev (after call #0, after_tool_call): "
        "config/setting/prod:legacy.batch_export_enabled v1 → v2"
    ) in text


def test_replay_shows_what_a_summary_strategy_wrote(fixture: Fixture) -> None:
    text = render_episode(fixture.episode("summary_distorted_state")).plain
    assert "+ [2] user, written by the strategy (sent in place of removed history):" in text
    assert "Summary of your earlier steps 1-4" in text
    assert "summary call folded steps 1-4 into the summary" in text


def _cut_short(record: EpisodeRecord, finish: str, note: str | None) -> EpisodeRecord:
    """``record`` with its last step's reply cut short: ``finish`` as its finish reason, ``note`` as its note."""
    steps = list(record.trace.steps)
    last = steps[-1]
    assert last.response is not None
    steps[-1] = last.model_copy(
        update={"note": note, "response": last.response.model_copy(update={"finish_reason": finish})}
    )
    return record.model_copy(update={"trace": record.trace.model_copy(update={"steps": steps})})


def test_replay_names_a_final_answer_cut_at_the_token_limit(fixture: Fixture) -> None:
    note = "final answer cut at the completion token limit (finish_reason 'length')"
    record = _cut_short(fixture.episode(None), "length", note)
    assert record.trace.final_answer
    text = render_episode(record).plain
    assert f"note: {note}" in text
    assert "(cut at the completion token limit, finish_reason 'length')" in text.split("final answer: ")[-1]


def test_replay_names_a_cut_reply_recorded_before_steps_noted_it(fixture: Fixture) -> None:
    text = render_episode(_cut_short(fixture.episode(None), "content_filter", None)).plain
    assert "note: reply cut by the endpoint's content filter (finish_reason 'content_filter')" in text
    assert "(cut by the endpoint's content filter, finish_reason 'content_filter')" in text


def test_full_replay_lists_every_sent_message(fixture: Fixture) -> None:
    record = fixture.episode("never_refreshed")
    short, full = render_episode(record).plain, render_episode(record, full=True).plain
    assert "  sent:\n" in full and "… (+" not in full
    assert len(full) > len(short)


def test_cli_replay_is_plain_when_piped_and_coloured_on_request(results: Path) -> None:
    plain = runner.invoke(app, ["replay", "mock-pipeline", "--run", RUN, "--results-dir", str(results)])
    assert plain.exit_code == 0, plain.output
    assert "\x1b[" not in plain.stdout
    assert plain.stdout == GOLDEN.read_text(encoding="utf-8")
    coloured = runner.invoke(app, ["replay", "mock-pipeline", "--run", RUN, "--results-dir", str(results), "--color"])
    assert coloured.exit_code == 0 and "\x1b[" in coloured.stdout


def test_cli_replay_without_run_replays_every_episode(results: Path, fixture: Fixture) -> None:
    result = runner.invoke(app, ["replay", "mock-pipeline", "--results-dir", str(results)])
    assert result.exit_code == 0
    assert result.stdout.count("═══ episode ") == len(fixture.episodes)


def test_cli_replay_refuses_bad_ids(results: Path) -> None:
    traversal = runner.invoke(app, ["replay", "../mock-pipeline", "--results-dir", str(results)])
    assert traversal.exit_code == 2 and "invalid RUN_ID" in traversal.output
    unknown = runner.invoke(app, ["replay", "mock-pipeline", "--run", "nope", "--results-dir", str(results)])
    assert unknown.exit_code == 2 and "matches no episode" in unknown.output


def test_select_episodes_accepts_a_unique_prefix(fixture: Fixture) -> None:
    records = [e.record for e in fixture.episodes]
    chosen = select_episodes(records, "cfg-staging")
    assert [r.run_id for r in chosen] == ["cfg-staging-access.full_history.unprotected.r1"]
    with pytest.raises(EpisodeNotFound, match="several"):
        select_episodes(records, "cfg-legacy-cleanup")


@pytest.mark.parametrize("blank", ["", " "])
def test_select_episodes_refuses_a_run_that_names_nothing(fixture: Fixture, blank: str) -> None:
    """Every run id starts with "": in a run group of one episode it matched that episode."""
    only = [fixture.episodes[0].record]
    with pytest.raises(EpisodeNotFound, match="names no episode"):
        select_episodes(only, blank)


def test_terminal_escapes_a_model_wrote_are_shown_not_sent_to_the_terminal(fixture: Fixture) -> None:
    """A model (or a hostile endpoint) can write an escape sequence that sets the terminal's title or clears it."""
    record = fixture.episode("context_dropped_fresh_observation")
    hostile = "done \x1b]0;TITLE\x07 \x1b[2J\x1b[31mRED\x1b[0m\x9b"
    record = record.model_copy(update={"trace": record.trace.model_copy(update={"final_answer": hostile})})
    text = render_episode(record).plain
    assert not any((ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F for c in text)
    assert "done \\x1b]0;TITLE\\x07 \\x1b[2J\\x1b[31mRED\\x1b[0m\\x9b" in text


def test_an_edited_run_with_a_lone_surrogate_and_bidi_controls_replays_escaped(results: Path) -> None:
    """raw_runs.jsonl edited after its run can hold a ``\\ud800`` escape (UTF-8 cannot encode it: printing it
    crashed replay with a UnicodeEncodeError) and a right-to-left override that reorders the terminal line."""
    raw = results / "mock-pipeline" / "raw_runs.jsonl"
    lines = raw.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    record["trace"]["final_answer"] = "done \u202eevil \ud800 \x1b[2J"
    lines[0] = json.dumps(record)  # ensure_ascii: the surrogate as the escape \ud800, as an editor would leave it
    raw.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = runner.invoke(app, ["replay", "mock-pipeline", "--run", record["run_id"], "--results-dir", str(results)])
    assert done.exit_code == 0, done.output
    assert "done \\u202eevil \\ud800 \\x1b[2J" in done.stdout
    assert not any(c in done.stdout for c in "\u202e\x1b")


def test_a_mutation_that_creates_a_resource_shows_it_absent_before(fixture: Fixture) -> None:
    """A hidden mutation that creates a resource (cal-design-review's booking) has no version before it: replay,
    attribute and the dashboard showed ``vNone → v1``."""
    from contextdelta.dashboard.timeline import episode_timeline

    record = fixture.episode("context_dropped_fresh_observation")
    data = json.loads(record.model_dump_json())
    step = next(s for s in data["trace"]["steps"] if s["evaluator"]["mutations_after_calls"])
    mutation = step["evaluator"]["mutations_after_calls"][0]
    resource = mutation["resources"][0]
    mutation["versions_before"][resource] = None
    edited = EpisodeRecord.model_validate(data)
    after = mutation["versions_after"][resource]
    text = render_episode(edited).plain
    assert f"{resource} absent → v{after}" in text and "vNone" not in text
    timeline = episode_timeline(edited)
    shown = [m.text for s in timeline.steps for m in s.mutations]
    assert any(f"{resource} absent -> v{after}" in t for t in shown) and not any("vNone" in t for t in shown)


def test_replay_shows_a_superseded_attempt_on_request(tmp_path: Path) -> None:
    """After --retry-failed, replay showed only an episode's current attempt: the failed first attempt (kept in
    raw_runs.jsonl as evidence) could not be replayed. --attempt N shows it, marked superseded."""
    from tests.runner.conftest import retried_run

    path, failed = retried_run(tmp_path)
    base = ["replay", path.name, "--results-dir", str(tmp_path), "--run", failed.run_id]
    old = runner.invoke(app, [*base, "--attempt", "1"])
    assert old.exit_code == 0, old.output
    assert "· attempt 1" in old.stdout and "superseded: a later attempt of this episode replaced it" in old.stdout
    assert "failed trial: no verdict" in old.stdout and "termination provider_error" in old.stdout
    current = runner.invoke(app, base)
    assert current.exit_code == 0 and "· attempt 2" in current.stdout and "superseded:" not in current.stdout
    assert runner.invoke(app, [*base, "--attempt", "2"]).stdout == current.stdout
    missing = runner.invoke(app, [*base, "--attempt", "3"])
    assert missing.exit_code == 2 and "has attempts 1 to 2 on record, not 3" in missing.stderr
    alone = runner.invoke(app, ["replay", path.name, "--results-dir", str(tmp_path), "--attempt", "1"])
    assert alone.exit_code == 2 and "--attempt needs --run" in alone.stderr
