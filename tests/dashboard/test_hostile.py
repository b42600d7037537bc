"""Hostile content under ``streamlit.testing.v1.AppTest``: a run whose model name, final answers, errors, notes and
tool-call arguments hold HTML, a script, markdown images and links, Streamlit's colour syntax, ANSI/OSC escapes, a
NUL, a lone surrogate and a right-to-left override, a folder whose name and manifest are such text, and query
parameters that are.
Every page renders without a traceback, nothing of that text is rendered as HTML, no image or link a model wrote
reaches the page (every markdown string the app sends is rendered here with a CommonMark parser and checked), the
timeline's HTML holds the text escaped, and nothing in the results folder is written."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from contextdelta.dashboard._text import visible
from tests.dashboard.conftest import HOSTILE, make_hostile
from tests.dashboard.test_app import PAGES, html_text, no_exception, open_page
from tests.report import runs

MARKDOWN = MarkdownIt("commonmark")  # raw HTML passes through it: a tag that is not escaped shows up below
HOSTILE_NAME = "zz `![n](https:attacker.example) <img src=x onerror=alert(1)> \u202e"


def markdown_strings(node: object) -> Iterator[tuple[str, str]]:
    """(element type, text) of every markdown-rendered string under ``node``: bodies (markdown, captions, alerts,
    titles) and labels (expanders, page links, widgets); ``st.html`` left out."""
    proto = getattr(node, "proto", None)
    if type(node).__name__ == "Html":  # the timeline's own HTML: checked by `check` apart
        return
    for name in ("body", "label"):
        value = getattr(proto, name, None) if proto is not None else None
        if isinstance(value, str) and value:
            yield type(node).__name__, value
    children = getattr(node, "children", None)
    if isinstance(children, dict):
        for child in children.values():
            yield from markdown_strings(child)


def unsafe(text: str) -> list[str]:
    """What is wrong with one markdown string as the browser would get it: an image, a link (a bare URL outside
    code too), an HTML tag, a control character, a bidirectional override."""
    rendered = MARKDOWN.render(text)
    problems = [tag for tag in ("<img", "<a ", "<script", "<b>") if tag in rendered]
    if "attacker" in re.sub(r"<code>.*?</code>", "", rendered, flags=re.DOTALL):
        problems.append("a bare URL outside code (GitHub-flavoured markdown links it)")
    hidden = [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or c in "\x7f\u202e" or "\ud800" <= c <= "\udfff"]
    problems += [f"U+{ord(c):04X}" for c in hidden]
    return problems


def files(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def hostile_results(tmp_path_factory: pytest.TempPathFactory, unsafe_run: Path) -> Path:
    folder = tmp_path_factory.mktemp("dashboard-hostile")
    make_hostile(unsafe_run, folder)
    runs.copy_run(runs.oracle_pair_run(), folder)
    broken = folder / HOSTILE_NAME
    broken.mkdir()
    (broken / "run_manifest.json").write_text('{"run_group_id": "![m](http://attacker.example/m.png)"}')
    return folder


def check(app: AppTest) -> None:
    no_exception(app)
    bad = [(kind, text, problems) for kind, text in markdown_strings(app._tree) if (problems := unsafe(text))]
    assert not bad, bad
    html = html_text(app)
    assert "<script" not in html and "<img" not in html and "\x1b" not in html and "\x00" not in html


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_no_page_renders_what_a_model_or_a_file_wrote(
    page: str, hostile_results: Path, unsafe_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = files(hostile_results)
    episode = sorted(runs.records(unsafe_run))[0]
    queries: list[dict[str, str | list[str]]] = [
        {"run": unsafe_run.name, "episode": episode, "a": unsafe_run.name, "b": runs.oracle_pair_run().name},
        {"run": unsafe_run.name, "q": "x`![q](http://attacker.example/q.png)", "outcome": "![o](http://a.example/o)"},
        {"run": unsafe_run.name, "q": "alert"},  # every episode matches: the hostile text in the table's snippets
        {"run": "`![r](http://attacker.example/r.png)`", "episode": "<script>`![e](http://a.example/e)", "a": "..\\"},
        {"run": HOSTILE_NAME},
    ]
    for query in queries:
        check(open_page(hostile_results, monkeypatch, page, query))
    assert files(hostile_results) == before  # nothing written into a run directory


@pytest.mark.slow
def test_the_timeline_shows_the_hostile_text_escaped(
    hostile_results: Path, unsafe_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    episode = sorted(runs.records(unsafe_run))[0]
    app = open_page(hostile_results, monkeypatch, PAGES[3], {"run": unsafe_run.name, "episode": episode})
    check(app)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html_text(app)
    assert [t.value for t in app.text] == [visible(HOSTILE)]  # the final answer, as plain text, escapes shown
    warnings = [w.value for w in app.warning]
    assert any(w.startswith("Episode error: `` x`</code><script>") for w in warnings), warnings
    assert any("was changed after its run" in w for w in warnings)  # the seal names the edit


@pytest.mark.slow
def test_compare_refuses_a_run_compared_with_itself(
    compare_results: Path, trusting_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = open_page(compare_results, monkeypatch, PAGES[5], {"a": trusting_run.name, "b": trusting_run.name})
    no_exception(app)
    (error,) = app.error
    assert error.value.startswith(f"Run a and run b are the same run directory, `{trusting_run.name}`")
    assert "Pick two different run groups" in error.value
    assert not app.dataframe and not app.get("vega_lite_chart")


@pytest.mark.slow
def test_two_folders_holding_one_run_group_are_both_offered(
    tmp_path: Path, trusting_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "copy-1", tmp_path / "copy-2"
    for folder in (first, second):
        shutil.copytree(trusting_run, folder)  # a plain copy: the manifest still names trusting_run's run group
    app = open_page(tmp_path, monkeypatch, PAGES[0], {"run": "copy-2"})
    no_exception(app)
    assert app.selectbox(key="cd_run").options == [f"copy-{n} (run group {trusting_run.name})" for n in (2, 1)]
    assert app.selectbox(key="cd_run").value == "copy-2"
    (warning,) = app.warning
    assert f"`{trusting_run.name}`: `copy-1`, `copy-2`" in warning.value
    assert list(app.dataframe[0].value["folder"]) == ["copy-2", "copy-1"]
    for page in PAGES[1:5]:
        app = open_page(tmp_path, monkeypatch, page, {"run": "copy-1"})
        no_exception(app)
        assert app.selectbox(key="cd_run").value == "copy-1"
        assert not [e.value for e in app.error if "Failure mode" not in e.value]
    app = open_page(tmp_path, monkeypatch, PAGES[5], {"a": "copy-1", "b": "copy-2"})
    no_exception(app)
    assert (app.selectbox(key="cd_compare_a").value, app.selectbox(key="cd_compare_b").value) == ("copy-1", "copy-2")
    assert not app.error and len(app.dataframe) == 3  # two folders, compared (every difference zero)
    assert files(first) == files(second)  # nothing written into either


@pytest.mark.slow
def test_compare_names_a_run_the_url_asks_for_that_is_not_there(
    compare_results: Path, trusting_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = open_page(compare_results, monkeypatch, PAGES[5], {"a": "../etc", "b": trusting_run.name})
    no_exception(app)
    assert [w.value for w in app.warning] == ["There is no readable run group `../etc` (`a`); pick one below."]
    assert app.selectbox(key="cd_compare_a").value != "../etc"


@pytest.mark.slow
def test_a_folder_whose_name_is_not_utf8_is_named_and_the_rest_browsable(
    tmp_path: Path, trusting_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs.copy_run(trusting_run, tmp_path)
    shutil.copytree(trusting_run, os.fsdecode(bytes(tmp_path) + b"/copy-\xff"))  # a name Linux allows
    for page in PAGES:
        app = open_page(tmp_path, monkeypatch, page, {"run": trusting_run.name})
        no_exception(app)
        if page == PAGES[0]:
            (warning,) = app.warning
            assert "their names are not UTF-8 text" in warning.value and "`b'copy-\\xff'`" in warning.value
        if page in PAGES[:5]:
            assert app.selectbox(key="cd_run").options == [trusting_run.name]


@pytest.mark.slow
def test_an_episode_id_with_a_lone_surrogate_makes_its_run_malformed_not_a_traceback(
    tmp_path: Path, trusting_run: Path, unsafe_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs.copy_run(unsafe_run, tmp_path)
    damaged = runs.copy_run(trusting_run, tmp_path)
    raw = damaged / "raw_runs.jsonl"
    lines = raw.read_text().splitlines(keepends=True)
    record = json.loads(lines[0])
    record["run_id"] = "edited-\ud800"
    raw.write_text(json.dumps(record) + "\n" + "".join(lines[1:]))
    for page in PAGES[1:5]:
        app = open_page(tmp_path, monkeypatch, page, {"run": trusting_run.name})
        no_exception(app)
        (error,) = app.error
        assert f"Run directory `{trusting_run.name}` is malformed" in error.value
        assert "raw_runs.jsonl: episode 'edited-\\ud800' has a run_id with a lone UTF-16 surrogate" in error.value
        app = open_page(tmp_path, monkeypatch, page, {"run": unsafe_run.name})  # the rest is still browsable
        no_exception(app)
        assert not [e.value for e in app.error if "Failure mode" not in e.value]


@pytest.mark.slow
def test_a_changed_run_in_a_renamed_folder_names_the_verify_command_of_its_folder(
    tmp_path: Path, trusting_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "renamed"
    shutil.copytree(trusting_run, folder)
    with (folder / "task_results.csv").open("a") as handle:
        handle.write("an,edited,line\n")
    app = open_page(tmp_path, monkeypatch, PAGES[1], {"run": "renamed"})
    no_exception(app)
    (warning,) = [w.value for w in app.warning if "was changed after its run" in w.value]
    assert f"Run `{trusting_run.name}` was changed" in warning
    assert "`contextdelta verify renamed` names every change" in warning  # the RUN_ID verify takes: the folder
