"""Loading task files: YAML with line numbers, pydantic validation, and problems that name file, field, value.

YAML is read with a safe loader that keeps timestamps as strings (a task's times are the world's local times,
not YAML datetimes) and refuses duplicate keys, which plain YAML silently resolves to the last one.
"""

from __future__ import annotations

import json
import math
import os
import stat
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from contextdelta.canonical import has_lone_surrogate
from contextdelta.tasks.schema import Task

TASK_SUFFIX = ".yaml"
LOCK_NAME = "SUITE.lock"
"""A suite's lock file; a folder holding one is a suite of its own (see :func:`task_files`)."""

_NO_VALUE: Any = object()


@dataclass(frozen=True)
class TaskProblem:
    """One problem found in a task file (or the suite lock): where it is, what is wrong, the offending value."""

    file: str
    field: str
    message: str
    value: Any = _NO_VALUE
    line: int | None = None

    @property
    def has_value(self) -> bool:
        """Whether the problem names an offending value."""
        return self.value is not _NO_VALUE

    def render(self) -> str:
        """``file[:line]: field: message (value: ...)`` on one line."""
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        message = " ".join(self.message.split())  # one line, whatever the message quoted
        field = self.field if self.field.isprintable() else self.field.encode("unicode_escape").decode("ascii")
        text = f"{where}: {field}: {message}" if field else f"{where}: {message}"
        if self.has_value:
            text += f" (value: {_short(self.value)})"
            if isinstance(self.value, str):
                text += non_ascii_note(self.value)
        return text


def non_ascii_note(text: str) -> str:
    """`` [...]`` naming the first non-ASCII characters of ``text`` by code point and name (a Cyrillic ``е`` in an
    id looks exactly like the ASCII ``e`` it replaced, and a problem that quotes it alone shows nothing wrong);
    ``""`` for ASCII text."""
    if text.isascii():
        return ""
    found: list[str] = []
    for position, char in enumerate(text):
        if not char.isascii() and len(found) < 3:
            name = unicodedata.name(char, "unnamed")
            found.append(f"{char!r} at position {position} is U+{ord(char):04X} {name}")
    more = sum(1 for char in text if not char.isascii()) - len(found)
    return f" [not ASCII: {'; '.join(found)}{f'; and {more} more' if more > 0 else ''}]"


def _short(value: Any, limit: int = 100) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


MAX_FILE_BYTES = 1 << 20
"""Largest task (or lock) file read: 1 MiB. The shipped tasks are under 7 KB; a bigger file is a mistake."""
MAX_DEPTH = 40
"""Deepest YAML nesting accepted (the task schema itself is about 8 levels deep)."""
MAX_NODES = 100_000
"""Most YAML nodes a file may expand to, every use of an alias counted in full (the anchor-bomb bound)."""
MAX_INT = 2**63 - 1
"""Integers must lie within a signed 64-bit range (what every database and JSON reader holds exactly)."""
_MAX_INT_TEXT = 32
"""Longest integer literal converted at all (Python refuses over 4,300 digits with a traceback)."""


class YamlLimitError(yaml.MarkedYAMLError):
    """A YAML document beyond one of the loader's limits (nesting, aliases, integers)."""


def _construct_int(loader: Any, node: yaml.ScalarNode) -> int:  # either loader class below
    """Integers range-checked before conversion (the constructor of both loaders below)."""
    text = str(node.value)
    if len(text.replace("_", "")) > _MAX_INT_TEXT:
        raise YamlLimitError(None, None, f"integer with {len(text)} characters is out of range", node.start_mark)
    value: int = loader.construct_yaml_int(node)
    if not -MAX_INT - 1 <= value <= MAX_INT:
        raise YamlLimitError(None, None, f"integer {_short(value, 40)} is outside the 64-bit range", node.start_mark)
    return value


class _TaskLoader(yaml.SafeLoader):
    """SafeLoader without the implicit timestamp type, with duplicate-key detection, and with limits.

    Nesting is bounded while composing (PyYAML's composer recurses once per level, so 5,000 levels would end in
    a RecursionError); the expanded size of the composed node graph is bounded before anything is constructed
    (a few KB of anchors and aliases can stand for billions of nodes); integers are range-checked before
    conversion.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise YamlLimitError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
            return super().compose_node(parent, index)  # type: ignore[no-any-return]
        finally:
            self._depth -= 1


_TaskLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _mapping_without_duplicates(loader: _TaskLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            repeated = key in seen
            seen.add(key)
        except TypeError:  # an unhashable key (a mapping used as a key): reported as a non-string key later
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark, "found an unhashable key", key_node.start_mark
            ) from None
        if repeated:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark, f"found duplicate key {key!r}", key_node.start_mark
            )
    return loader.construct_mapping(node, deep=True)


_TaskLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)
_TaskLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)

_FastTaskLoader: Any = None
if yaml.__with_libyaml__:  # PyYAML built with libyaml: the same loader on the C parser, ten times faster

    class _CTaskLoader(yaml.CSafeLoader):
        """:class:`_TaskLoader` on libyaml's parser and composer (same resolvers and constructors). Used only for
        documents it accepts within the limits; anything else goes through :class:`_TaskLoader`, so every error
        and every refusal reads exactly as before."""

    _CTaskLoader.yaml_implicit_resolvers = _TaskLoader.yaml_implicit_resolvers
    _CTaskLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)
    _CTaskLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
    _FastTaskLoader = _CTaskLoader


def _shallow(text: str) -> bool:
    """libyaml's events stay well inside :data:`MAX_DEPTH` (its composer recurses per level, so nesting is
    checked on the flat event stream before composing). False for anything libyaml refuses."""
    parser = yaml.CBaseLoader(text)
    depth = 0
    try:
        while (event := parser.get_event()) is not None:
            if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
                depth += 1
                if depth >= MAX_DEPTH - 1:
                    return False
            elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                depth -= 1
        return True
    except yaml.YAMLError:
        return False
    finally:
        parser.dispose()


def expanded_size(root: yaml.Node, limit: int = MAX_NODES) -> int:
    """How many nodes ``root`` stands for with every alias expanded, counted without expanding (each distinct
    node once, memoised); stops counting above ``limit``. Raises YamlLimitError for a recursive alias."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            total = 1 + sum(sizes[id(child)] for child in _children(node))
            sizes[key] = min(total, limit + 1)
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise YamlLimitError(None, None, "a recursive alias (a node that contains itself)", node.start_mark)
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in on_path:
                raise YamlLimitError(None, None, "a recursive alias (a node that contains itself)", child.start_mark)
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _compose_bounded(text: str) -> tuple[Any, yaml.Node | None]:
    """The composed document and the loader to construct it with; YAMLError (YamlLimitError for a limit) for
    anything refused. Accepted documents are composed by libyaml when available (the Python parser costs most
    of the time of every ``run-benchmark`` and ``validate-tasks`` start); refusals always by the Python
    loader, so they read the same either way."""
    if _FastTaskLoader is not None and _shallow(text):
        fast = _FastTaskLoader(text)
        try:
            node = fast.get_single_node()
            if node is None or expanded_size(node) <= MAX_NODES:
                return fast, node
        except yaml.YAMLError:
            pass
        fast.dispose()
    loader = _TaskLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None and expanded_size(node) > MAX_NODES:
            raise YamlLimitError(
                None, None, f"aliases expand to more than {MAX_NODES:,} nodes (an anchor bomb?)", node.start_mark
            )
    except BaseException:
        loader.dispose()
        raise
    return loader, node


def parse_yaml(text: str) -> Any:
    """Parse task YAML within the loader's limits (timestamps stay strings; duplicate keys are an error).

    Raises yaml.YAMLError (YamlLimitError for a limit, with the line) for anything it refuses.
    """
    loader, node = _compose_bounded(text)
    try:
        return None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()


_SURROGATE_FIX = (
    "holds a lone UTF-16 surrogate (a \\uD800-\\uDFFF escape without its pair), which UTF-8 cannot encode: write the "
    "character itself, or the escaped pair, or remove it"
)


def _escaped(text: str) -> str:
    """``text`` with each surrogate written as its ``\\udXXX`` escape, so it can be printed and named."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _non_json(value: Any, path: tuple[int | str, ...]) -> Iterator[tuple[tuple[int | str, ...], str, Any]]:
    """Values canonical JSON cannot hold faithfully: non-finite numbers, non-string keys, YAML sets, bytes, and
    strings holding a lone UTF-16 surrogate (a ``"\\ud800"`` escape without its pair), which UTF-8 cannot encode."""
    if isinstance(value, dict):
        for key, child in value.items():
            if not isinstance(key, str):
                yield (*path, str(key)), "mapping keys must be strings (quote it)", key
            elif has_lone_surrogate(key):
                yield (*path, key), _SURROGATE_FIX, _escaped(key)
            else:
                yield from _non_json(child, (*path, key))
    elif isinstance(value, str):
        if has_lone_surrogate(value):
            yield path, _SURROGATE_FIX, _escaped(value)
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _non_json(child, (*path, index))
    elif isinstance(value, float) and not math.isfinite(value):
        yield path, "not a finite number", value
    elif value is not None and not isinstance(value, str | int | float | bool):
        yield path, f"not a JSON value ({type(value).__name__})", value


def _compose(text: str) -> yaml.Node | None:
    try:
        loader, node = _compose_bounded(text)
    except yaml.YAMLError:
        return None
    loader.dispose()
    return node


def _key_is(key_node: yaml.Node, part: int | str) -> bool:
    """Whether a mapping key node is the key ``part`` (plain scalars compared as YAML reads them: ``on`` is True)."""
    text = getattr(key_node, "value", None)
    if not isinstance(text, str):
        return False
    if text == str(part):
        return True
    if isinstance(key_node, yaml.ScalarNode) and not key_node.style:  # plain: None (Python parser) or "" (libyaml)
        try:
            return str(parse_yaml(text)) == str(part)
        except yaml.YAMLError:
            return False
    return False


def _line_of(root: yaml.Node | None, path: Sequence[int | str]) -> int | None:
    """1-based line of the YAML node at ``path`` (or of its deepest existing ancestor)."""
    node = root
    line = node.start_mark.line + 1 if node is not None else None
    for part in path:
        if isinstance(node, yaml.MappingNode):
            match = next((pair for pair in node.value if _key_is(pair[0], part)), None)
            if match is None:
                return line
            key_node, node = match
            line = key_node.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line


_NUMBER_TYPES = frozenset({"int_type", "float_type", "int_parsing", "float_parsing", "literal_error"})


def _message(error: Any) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required field is missing"
    value = error.get("input")
    if kind in _NUMBER_TYPES and isinstance(value, str) and _is_number(value):
        return f"{error['msg']}: a number is expected, not the quoted string {value!r} (remove the quotes)"
    return str(error["msg"]).removeprefix("Value error, ") + unquoted_text_hint(error)


def unquoted_text_hint(error: Any) -> str:
    """For a pydantic error where text was expected and YAML read an unquoted scalar as a boolean or a number
    (``reason: no`` is ``false``, ``postal_code: 02139`` a number): the hint to quote it; else ``""``."""
    value = error.get("input")
    if error["type"] != "string_type" or not isinstance(value, bool | int | float):
        return ""
    names = [str(p) for p in error.get("loc", ()) if isinstance(p, str)]
    quoted = f'{names[-1] if names else "field"}: "..."'
    if isinstance(value, bool):
        return (
            f": YAML reads an unquoted yes, no, on, off, true or false as the boolean {str(value).lower()}; "
            f"quote the text as you wrote it ({quoted})"
        )
    return f": YAML read the unquoted value as the number {value!r}; quote the text as you wrote it ({quoted})"


def _is_number(text: str) -> bool:
    try:
        float(text.strip())
    except ValueError:
        return False
    return bool(text.strip())


def validation_problems(file: str, text: str, exc: ValidationError, root: yaml.Node | None = None) -> list[TaskProblem]:
    """One problem per pydantic error, with the dotted field path, its line and the offending value."""
    root = root if root is not None else _compose(text)
    problems = []
    for error in exc.errors(include_url=False):
        path = [p for p in error["loc"] if not isinstance(p, str) or not p.startswith(("function-", "literal["))]
        field = ".".join(str(p) for p in path)
        value = _NO_VALUE if error["type"] == "missing" else error.get("input", _NO_VALUE)
        problems.append(TaskProblem(file, field, _message(error), value, _line_of(root, path)))
    return problems


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _yaml_problem(file: str, exc: yaml.YAMLError, text: str) -> TaskProblem:
    if isinstance(exc, yaml.reader.ReaderError):
        at = text.count("\n", 0, exc.position) + 1
        return TaskProblem(file, "", f"invalid YAML: character {exc.character!r} is not allowed in YAML", line=at)
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        detail = _one_line(" ".join(p for p in (exc.context, exc.problem) if p))
        kind = "YAML beyond the loader's limits" if isinstance(exc, YamlLimitError) else "invalid YAML"
        return TaskProblem(file, "", f"{kind}: {detail}", line=line)
    return TaskProblem(file, "", f"invalid YAML: {_one_line(str(exc))}")


def load_task_text(file: str, text: str) -> tuple[Task | None, list[TaskProblem]]:
    """Parse and validate one task file's text; returns the task or the problems that prevent it.

    Validation is strict: a value must already have the type its field expects (``max_steps: "22"`` is an
    error, not silently the number 22); enum values and ISO times are written as strings, as in JSON.
    """
    try:
        loader, root = _compose_bounded(text)
    except yaml.YAMLError as exc:
        return None, [_yaml_problem(file, exc, text)]
    try:
        data = None if root is None else loader.construct_document(root)
    except yaml.YAMLError as exc:
        return None, [_yaml_problem(file, exc, text)]
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
        # an explicit tag on a value it cannot convert (``!!int abc``, ``!!bool maybe``): PyYAML's constructors
        # raise plain Python errors for these
        return None, [TaskProblem(file, "", f"invalid YAML: a tagged value cannot be converted ({type(exc).__name__})")]
    finally:
        loader.dispose()
    if data is None:  # nothing but whitespace and comments: a NoneType "value" would name nothing the author wrote
        return None, [
            TaskProblem(file, "", "the file is empty: a task file is a YAML mapping (schema_version: 1, id, ...)")
        ]
    if not isinstance(data, dict):
        return None, [TaskProblem(file, "", "a task file must be a YAML mapping", type(data).__name__)]
    strange = list(_non_json(data, ()))
    if strange:
        return None, [
            TaskProblem(file, _escaped(".".join(map(str, path))), message, value, _line_of(root, path))
            for path, message, value in strange
        ]
    try:
        # strict JSON-mode validation: no str->number coercion, while enums and datetimes still read from strings
        task = Task.model_validate_json(json.dumps(data, ensure_ascii=False), strict=True)
    except ValidationError as exc:
        return None, validation_problems(file, text, exc, root)
    return task, []


class FileReadError(ValueError):
    """A file the loader refuses to read: too large, not UTF-8, or a link out of its folder."""


def read_text_file(path: Path, root: Path | None = None, *, limit: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of ``path``, refusing a file over ``limit`` bytes, undecodable bytes (with the line), and,
    when ``root`` is given, a path that resolves outside ``root`` (a symlink leaving the folder).

    Raises FileReadError with a one-line reason.
    """
    if root is not None:
        try:
            target = path.resolve()
        except (RuntimeError, OSError):  # RuntimeError before Python 3.13, OSError (ELOOP) from 3.13 on
            raise FileReadError(
                "a symlink loop (the link leads back to itself): replace it with the task file, or remove it"
            ) from None
        if not target.is_relative_to(root.resolve()):
            raise FileReadError(f"a symlink to {target}, outside the tasks folder (copy the file in instead)")
    try:
        regular = stat.S_ISREG(path.stat().st_mode)
    except OSError as exc:
        raise FileReadError(f"cannot read: {exc.strerror or exc}") from None
    if not regular:  # opening a FIFO would wait for a writer forever
        if path.is_dir():
            raise FileReadError("a folder, not a file: put the file itself in its place")
        raise FileReadError("not a regular file (a FIFO, socket or device): task files are plain files")
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise FileReadError(f"cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise FileReadError(f"larger than the {limit:,}-byte limit for task files")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise FileReadError(f"line {line}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def load_task(path: Path) -> Task:
    """Load one task file; raises ValueError listing every problem."""
    try:
        text = read_text_file(path)
    except FileReadError as exc:
        raise ValueError(f"{path}: {exc}") from None
    task, problems = load_task_text(str(path), text)
    if task is None:
        raise ValueError("\n".join(p.render() for p in problems))
    return task


OTHER_YAML_SUFFIXES = (".yml",)


@dataclass(frozen=True)
class FolderListing:
    """What a tasks folder holds: candidate task files, and the entries the loader refuses outright."""

    files: list[Path]
    refused: list[tuple[Path, str]]


def list_folder(directory: Path) -> FolderListing:
    """Every ``*.yaml`` file below ``directory`` (sorted, symlinked folders not followed), plus the entries that
    are refused: ``.yml`` files and other spellings of the suffix (``.YAML``; the suite's files end in ``.yaml``),
    folders named like task files, and symlinked folders.

    A subfolder holding its own ``SUITE.lock`` is a suite of its own (``tasks/horizon/`` beside the hand-written
    ``tasks/<world>/``): it is validated and run on its own, never as part of the folder above it."""
    files: list[Path] = []
    refused: list[tuple[Path, str]] = []
    for folder, dirs, names in os.walk(directory, followlinks=False):
        base = Path(folder)
        if base != directory and LOCK_NAME in names:
            dirs.clear()  # a nested suite: skip it and everything below it
            continue
        for name in sorted(dirs):
            if (base / name).is_symlink():
                refused.append((base / name, "a symlinked folder (task folders are read without following links)"))
            elif name.lower().endswith((TASK_SUFFIX, *OTHER_YAML_SUFFIXES)):
                refused.append(
                    (base / name, "a folder named like a task file; task files are files: remove or rename it")
                )
        for name in names:
            path = base / name
            if name.endswith(TASK_SUFFIX):
                files.append(path)
            elif name.lower().endswith((TASK_SUFFIX, *OTHER_YAML_SUFFIXES)):  # .yml, and .YAML or .Yml on any system
                refused.append((path, f"task files end in {TASK_SUFFIX}; rename it to {Path(name).stem}{TASK_SUFFIX}"))
    return FolderListing(sorted(files), sorted(refused))


def task_files(directory: Path) -> list[Path]:
    """Every ``*.yaml`` below ``directory``, sorted (symlinked folders are not followed, nested suites skipped)."""
    return list_folder(directory).files


@dataclass
class LoadedTask:
    """A task file that validated, with its path."""

    path: Path
    task: Task

    @property
    def file(self) -> str:
        """The path as problems show it."""
        return display_path(self.path)


def located(problems: list[TaskProblem], path: Path) -> list[TaskProblem]:
    """``problems`` of the task file at ``path`` with the line of each one that has a field but no line yet (the
    checks that run on a loaded task, which has no YAML left: a resource of the initial state, a trigger): the line
    of that field, or of its deepest ancestor in the file. Unchanged where the file cannot be read (a task not yet
    written)."""
    if all(p.line is not None or not p.field for p in problems):
        return problems
    try:
        root = _compose(read_text_file(path))
    except (OSError, FileReadError):
        return problems
    if root is None:
        return problems
    return [
        p
        if p.line is not None or not p.field
        else replace(p, line=_line_of(root, [int(x) if x.isdigit() else x for x in p.field.split(".")]))
        for p in problems
    ]


def display_path(path: Path) -> str:
    """The path relative to the working directory when it lies below it. A symlink is named by its own path in its
    folder, never by its target: only the folders above it are resolved."""
    absolute = path.resolve() if path.name in ("", ".", "..") else path.parent.resolve() / path.name
    try:
        return str(absolute.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def load_directory(directory: Path) -> tuple[list[LoadedTask], list[TaskProblem]]:
    """Load every task file under ``directory``: ``<world>/<id>.yaml``.

    Checks per file: size, encoding, links, YAML, schema, the id matching the file name, the world matching
    the folder; and across files: duplicate ids, and that there is at least one task file. Returns the tasks
    that loaded and every problem found.
    """
    loaded: list[LoadedTask] = []
    problems: list[TaskProblem] = []
    by_id: dict[str, LoadedTask] = {}
    listing = list_folder(directory)
    for path, why in listing.refused:
        problems.append(TaskProblem(display_path(path), "", why))
    if not listing.files:
        problems.append(
            TaskProblem(display_path(directory), "", f"no task files: expected <world>/<id>{TASK_SUFFIX} below it")
        )
    for path in listing.files:
        file = display_path(path)
        relative = path.relative_to(directory)
        if len(relative.parts) != 2:
            problems.append(TaskProblem(file, "", "task files live in <world>/<id>.yaml below the tasks folder"))
            continue
        try:
            text = read_text_file(path, directory)
        except FileReadError as exc:
            problems.append(TaskProblem(file, "", str(exc)))
            continue
        task, found = load_task_text(file, text)
        problems.extend(found)
        if task is None:
            continue
        if task.id != path.stem:
            named = f"does not match the file name {path.name!r}{non_ascii_note(path.name)}"
            problems.append(
                TaskProblem(
                    file, "id", f"{named}: rename the file to {task.id}{TASK_SUFFIX}, or change the id", task.id
                )
            )
            continue
        if task.world != relative.parts[0]:
            problems.append(TaskProblem(file, "world", f"does not match the folder {relative.parts[0]!r}", task.world))
            continue
        if task.id in by_id:
            problems.append(TaskProblem(file, "id", f"duplicate id, also defined in {by_id[task.id].file}", task.id))
            continue
        entry = LoadedTask(path, task)
        by_id[task.id] = entry
        loaded.append(entry)
    return loaded, problems
