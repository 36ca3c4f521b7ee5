"""The README's quick start is what CI runs: keep the two in step."""

from __future__ import annotations

import re

from tests.support.paths import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
CI_RUN = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")


def _quick_start_commands() -> list[str]:
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S)]


def test_quick_start_has_two_commands() -> None:
    commands = _quick_start_commands()
    assert len(commands) == 2, commands
    assert all("\n" not in c for c in commands), commands


def test_ci_runs_the_readme_test_command() -> None:
    test_command = _quick_start_commands()[1]
    ci_lines = [line.strip() for line in CI_RUN.splitlines()]
    assert test_command in ci_lines, "`.ci/run` must run the README's test command to the letter"
