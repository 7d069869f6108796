"""docs/DESIGN.md's layout section names the repository file for file: every tracked file is in
it (a folder listed without children stands for everything inside it; `*` patterns such as
`test_*.py` name a family), and everything it names exists."""

from __future__ import annotations

import fnmatch
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DESIGN = ROOT / "docs" / "DESIGN.md"
DESCRIPTION_COLUMN = 30  # a line whose text starts this far in continues the description above
ALWAYS_ALLOWED = ("__init__.py", ".gitignore")


def layout_entries() -> list[str]:
    """Paths (folders end with "/") named by the code block under "## Layout"."""
    text = DESIGN.read_text(encoding="utf-8")
    block = re.search(r"^## Layout\n.*?```\n(.*?)```", text, flags=re.S | re.M)
    assert block, "docs/DESIGN.md has no code block under '## Layout'"
    entries: list[str] = []
    parents: list[tuple[int, str]] = []  # (indent, folder path) of the enclosing folders
    for line in block.group(1).splitlines():
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        if not stripped or indent >= DESCRIPTION_COLUMN:
            continue
        names = re.split(r"\s{2,}", stripped, maxsplit=1)[0]
        while parents and parents[-1][0] >= indent:
            parents.pop()
        base = parents[-1][1] if parents else ""
        for name in (n.strip() for n in names.split(" / ")):
            entries.append(base + name)
            if name.endswith("/"):
                parents.append((indent, base + name))
    return entries


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [f for f in out.stdout.splitlines() if (ROOT / f).exists()]


def _covered(path: str, entries: list[str]) -> bool:
    if Path(path).name in ALWAYS_ALLOWED:
        return True
    for entry in entries:
        if entry == path or fnmatch.fnmatch(path, entry) and "*" in entry:
            return True
        if entry.endswith("/") and path.startswith(entry):
            listed_inside = [e for e in entries if e != entry and e.startswith(entry)]
            if not listed_inside:
                return True
    return False


def test_every_file_of_the_repository_is_in_the_design_layout():
    entries = layout_entries()
    missing = [f for f in tracked_files() if not _covered(f, entries)]
    assert not missing, "add these to docs/DESIGN.md's layout: " + ", ".join(missing)


def test_everything_the_design_layout_names_exists():
    gone = [e for e in layout_entries() if "*" not in e and not (ROOT / e).exists()]
    assert not gone, "docs/DESIGN.md's layout names what is not in the tree: " + ", ".join(gone)
