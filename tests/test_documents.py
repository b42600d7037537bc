"""The documents people look for before they contribute or report a problem, kept true to the code."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])


def test_the_changelog_has_an_entry_for_the_current_version_and_states_the_policy() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    entries = re.findall(r"^## (\d+\.\d+\.\d+) \(\d{4}-\d{2}-\d{2}\)$", text, flags=re.MULTILINE)
    assert entries, "no '## X.Y.Z (YYYY-MM-DD)' entry in CHANGELOG.md"
    assert entries[0] == _version(), f"newest changelog entry {entries[0]}, pyproject.toml says {_version()}"
    assert "## Version policy" in text
    for recorded in (
        "suite_sha256",
        "system_prompt_sha256",
        "tool_schemas_sha256",
        "harness_sha256",
        "analysis_sha256",
    ):
        assert recorded in text, f"the version policy does not say where a run records {recorded}"


def test_the_contributor_documents_exist_and_the_license_is_the_declared_one() -> None:
    for name in ("LICENSE", "CONTRIBUTING.md", "SECURITY.md", "CHANGELOG.md", "README.zh-CN.md"):
        assert (ROOT / name).is_file(), name
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["license"]
    assert declared == "Apache-2.0"
    assert "Apache License" in (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Report a vulnerability" in (ROOT / "SECURITY.md").read_text(encoding="utf-8")


def _commands(text: str) -> list[str]:
    """Every command line of the fenced shell blocks, comments and continuation breaks removed."""
    commands: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            command = re.sub(r"\s+#.*$", "", line).strip()
            if command and not command.startswith("#"):
                commands.append(" ".join(command.split()))
    return commands


def test_the_chinese_readme_gives_the_same_commands_as_the_readme() -> None:
    english = _commands((ROOT / "README.md").read_text(encoding="utf-8"))
    chinese = _commands((ROOT / "README.zh-CN.md").read_text(encoding="utf-8"))
    assert english, "README.md has no command blocks"
    assert sorted(set(chinese)) == sorted(set(english)), (
        f"only in README.md: {sorted(set(english) - set(chinese))}; "
        f"only in README.zh-CN.md: {sorted(set(chinese) - set(english))}"
    )
