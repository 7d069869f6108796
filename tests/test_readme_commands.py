"""The commands the READMEs give work as written on a fresh clone: every script they tell you to run
is executable in git (a clone gets its mode from there), and the test command is the one CI runs."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
READMES = [ROOT / "README.md", ROOT / "readme" / "README_zh_Hans.md"]
TEST_COMMAND = ["python3 -m venv .venv && . .venv/bin/activate", "pip install -r requirements-dev.txt",
                "python -m pytest -q"]


def commands(readme: Path) -> list[str]:
    """Each code span and each line of a fenced block: what a reader types."""
    text = readme.read_text(encoding="utf-8")
    fenced = re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M)
    lines = [line.strip() for block in fenced for line in block.splitlines() if line.strip()]
    spans = re.findall(r"(?<!`)`([^`\n]+)`(?!`)", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M))
    return lines + spans


def run_directly(command: str) -> str | None:
    """The script a command starts with (after VAR=value assignments), if it names one: a shell
    script, a file without a suffix or one with a #! line (not a file merely named, like a .txt)."""
    words = [w for w in command.split() if not re.fullmatch(r"[A-Z_]+=\S*", w)]
    path = ROOT / words[0] if words else None
    if path is None or not path.is_file():
        return None
    if path.suffix in ("", ".sh") or path.read_bytes().startswith(b"#!"):
        return str(path.relative_to(ROOT))
    return None


@pytest.mark.skipif(shutil.which("git") is None, reason="git is needed to read the modes git keeps")
@pytest.mark.parametrize("readme", READMES, ids=lambda p: p.name)
def test_every_script_the_readme_runs_is_executable_in_git(readme: Path):
    scripts = {path for path in map(run_directly, commands(readme)) if path}
    assert {"scripts/dev-host.sh", "scripts/build.sh"} <= scripts, scripts
    for script in sorted(scripts):
        listed = subprocess.run(["git", "ls-files", "-s", "--", script], cwd=ROOT, capture_output=True,
                                text=True).stdout.split()
        if not listed:
            pytest.skip("not a git checkout")
        assert (ROOT / script).read_bytes().startswith(b"#!"), f"{script} has no #! line"
        assert listed[0] == "100755", f"{script} is {listed[0]} in git: `git update-index --chmod=+x {script}`"


@pytest.mark.parametrize("readme", READMES, ids=lambda p: p.name)
def test_the_test_command_starts_from_python3_as_a_fresh_debian_has_it(readme: Path):
    text = readme.read_text(encoding="utf-8")
    assert "```bash\n" + "\n".join(TEST_COMMAND) + "\n```" in text
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^python -m pytest -q$", ci, flags=re.M), "CI runs another test command"
