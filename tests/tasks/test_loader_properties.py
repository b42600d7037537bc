"""Property: whatever text a task file holds, the loader answers with a task or with named problems (one line
each), within a time and memory bound; never an exception, a hang or a memory blow-up.

Inputs are shipped task files mutated at random (characters, spans, lines, YAML anchors, aliases, tags, huge
numbers, deep brackets spliced in) and random YAML documents and text.
"""

from __future__ import annotations

import signal
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextdelta.tasks.loader import load_directory, load_task_text
from tests.tasks.helpers import SUITE

TIME_BOUND_S = 20
"""Per example; a normal load takes milliseconds, the anchor bomb this guards against never ends."""
MEMORY_BOUND_BYTES = 64 * 1024 * 1024

SHIPPED = sorted(SUITE.glob("*/*.yaml"))
TEXTS = [p.read_text(encoding="utf-8") for p in SHIPPED]

SNIPPETS = [
    "&a ",
    "*a",
    "<<: *a\n",
    "x: &a [1, 2, 3]\n",
    "y: [*a, *a, *a, *a]\n",
    "!!int ",
    "!!float ",
    "!!bool ",
    "!!binary ",
    "!!set ",
    "!!omap ",
    "!!timestamp ",
    "!!python/object/apply:os.system ['true']",
    "!!str ",
    "9" * 400,
    "-" + "9" * 30,
    "0x" + "f" * 40,
    "1e400",
    ".nan",
    ".inf",
    "[" * 60,
    "]" * 60,
    "{a: " * 60,
    '"22"',
    "'x'",
    "? ",
    ": ",
    "- ",
    "\t",
    "\n---\n",
    "\n...\n",
    "%YAML 1.1\n",
    "%TAG ! tag:x,2000:\n",
    "|\n  x\n",
    ">-\n  y\n",
    "\ufeff",
    "\x00",
    "\u2028",
    "😀",
    "#",
    "null",
    "~",
    "on",
    "12:30:00",
    "2026-03-11",
]


@st.composite
def mutated_task(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(TEXTS))
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["char", "delete", "snippet", "line", "indent"]))
        at = draw(st.integers(0, len(text)))
        if kind == "char":
            text = text[:at] + draw(st.characters(codec="utf-8")) + text[at + 1 :]
        elif kind == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 200)) :]
        elif kind == "snippet":
            text = text[:at] + draw(st.sampled_from(SNIPPETS)) + text[at:]
        elif kind == "line":
            lines = text.splitlines(keepends=True)
            if lines:
                i = draw(st.integers(0, len(lines) - 1))
                lines.insert(draw(st.integers(0, len(lines))), lines[i])
                text = "".join(lines)
        else:
            lines = text.splitlines(keepends=True)
            if lines:
                i = draw(st.integers(0, len(lines) - 1))
                lines[i] = " " * draw(st.integers(0, 5)) + lines[i].lstrip(" ")
                text = "".join(lines)
    return text


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=40,
)


@st.composite
def random_yaml(draw: st.DrawFn) -> str:
    if draw(st.booleans()):
        return draw(st.text(max_size=400))
    value = draw(JSONISH)
    return yaml.safe_dump(value, allow_unicode=draw(st.booleans()), default_flow_style=draw(st.booleans()))


@contextmanager
def bounded() -> Iterator[None]:
    """Fail the example if it runs past TIME_BOUND_S or allocates past MEMORY_BOUND_BYTES at its peak."""

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"the loader ran past {TIME_BOUND_S} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(TIME_BOUND_S)
    tracemalloc.start()
    try:
        yield
        _, peak = tracemalloc.get_traced_memory()
        assert peak < MEMORY_BOUND_BYTES, f"peak {peak:,} bytes"
    finally:
        tracemalloc.stop()
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def check(text: str) -> None:
    with bounded():
        task, problems = load_task_text("fuzz.yaml", text)
    if task is None:
        assert problems, "no task and no problem"
        for problem in problems:
            rendered = problem.render()
            assert rendered.startswith("fuzz.yaml") and "\n" not in rendered and "Traceback" not in rendered
    else:
        assert problems == []


PROPERTY = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@pytest.mark.slow
@PROPERTY
@given(mutated_task())
def test_mutated_task_files_load_or_fail_by_name(text: str) -> None:
    check(text)


@PROPERTY
@given(random_yaml())
def test_random_yaml_loads_or_fails_by_name(text: str) -> None:
    check(text)


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.one_of(mutated_task(), random_yaml()))
def test_many_more_inputs_load_or_fail_by_name(text: str) -> None:
    check(text)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(files=st.lists(st.tuples(st.sampled_from(["order", "calendar", "x"]), st.binary(max_size=300)), max_size=4))
def test_a_folder_of_arbitrary_bytes_never_crashes(
    tmp_path_factory: pytest.TempPathFactory, files: list[tuple[str, bytes]]
) -> None:
    root: Path = tmp_path_factory.mktemp("fuzz")
    for i, (world, data) in enumerate(files):
        (root / world).mkdir(exist_ok=True)
        (root / world / f"t{i}.yaml").write_bytes(data)
    with bounded():
        loaded, problems = load_directory(root)
    assert loaded == [] and problems
    assert all("\n" not in p.render() for p in problems)
