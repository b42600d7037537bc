"""The Episode page of an external agent's episode (``run-external``): the agent managed its own context, so the
page says that what its model saw is unknown instead of showing an empty context as the one sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextdelta.dashboard import _html
from contextdelta.dashboard.timeline import episode_timeline
from contextdelta.rundir import RunDirectory
from tests.dashboard.test_app import no_exception, open_page
from tests.mcp.test_run_external import run_external

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def external_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """run-external of one task, unprotected, once (the replay agent)."""
    folder = tmp_path_factory.mktemp("dashboard-external")
    done = run_external(folder, "--task-ids", "cfg-search-ramp", "--protection-modes", "unprotected")
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip().splitlines()[-1])


def test_an_external_agents_context_is_unknown_not_empty(external_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (record,) = RunDirectory(external_run).read_episodes()
    timeline = episode_timeline(record)
    assert timeline.steps and not any(s.context_known for s in timeline.steps)
    assert all("context unknown (external agent)" in _html.step_title(s) for s in timeline.steps)
    assert not any("full history sent" in _html.step_title(s) for s in timeline.steps)
    app = open_page(external_run.parent, monkeypatch, "views/episode.py", {"run": external_run.name})
    no_exception(app)
    texts = [m.value for m in app.markdown]
    assert "**Context sent**: unknown" in texts
    assert not any(t.startswith("**Context sent** (0 messages") for t in texts), texts
    assert any("what its model saw is not recorded" in c.value for c in app.caption)
    labels = [e.label for e in app.expander]
    assert labels and not any("full history sent" in label for label in labels)
