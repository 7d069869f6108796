"""The folders show the architecture: imports run down the wings, never back up, and no module
imports one that imports it. Reads every import statement (function-level ones too)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "lucidrag"

# lower number = lower wing; a module may import its own wing and the wings below it
WING_LEVEL = {"base": 0, "vectors": 1, "index": 1, "state": 2, "ingestion": 3, "retrieval": 3, "": 4, "agent": 5}
# siblings on one level stay independent of each other
SIBLINGS_APART = ({"vectors", "index"}, {"ingestion", "retrieval"})


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Absolute lucidrag module names imported by ``path`` (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("lucidrag"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("lucidrag"):
                continue
            found.add(target)
            for alias in node.names:  # `from lucidrag.state import kbstate` names a module
                candidate = f"{target}.{alias.name}"
                if (ROOT / (candidate.replace(".", "/") + ".py")).exists():
                    found.add(candidate)
    return found


def _wing(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in WING_LEVEL else ""


def _modules() -> dict[str, set[str]]:
    return {_module_name(p): _imports(p) for p in PACKAGE.rglob("*.py")}


def test_the_code_is_in_wings_with_nothing_left_flat():
    flat = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in {"__init__.py", "engine.py", "console.py"})
    assert flat == [], f"modules outside a wing: {flat}"
    assert {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"} == set(WING_LEVEL) - {""}


def test_no_import_runs_from_a_lower_wing_back_up():
    upward = []
    for module, imported in _modules().items():
        own = _wing(module)
        for target in imported:
            other = _wing(target)
            if target in ("lucidrag",) or other == own:
                continue
            if WING_LEVEL[other] > WING_LEVEL[own] or (
                    WING_LEVEL[other] == WING_LEVEL[own] and any({own, other} <= s for s in SIBLINGS_APART)):
                upward.append(f"{module} -> {target}")
    assert upward == []


def test_no_module_imports_one_that_imports_it():
    modules = _modules()
    graph = {m: sorted(t for t in imported if t in modules and t != m) for m, imported in modules.items()}
    cycles: list[str] = []
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:  # depth-first; a node on the path is a cycle
        for nxt in graph[node]:
            if nxt in path:
                cycles.append(" -> ".join(path[path.index(nxt):] + [nxt]))
            elif nxt not in done:
                visit(nxt, path + [nxt])
        done.add(node)

    for start in graph:
        if start not in done:
            visit(start, [start])
    assert cycles == []
