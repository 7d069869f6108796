"""tests/mutation/equivalents.toml, which tests/mutation/run.py reads to leave equivalent mutants out
of a module's score, names only modules the script mutates and functions those modules define."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _mutation_script():
    spec = importlib.util.spec_from_file_location("mutation_script", ROOT / "tests" / "mutation" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _functions(path: Path) -> set[str]:
    """Names as mutmut spells them: `name` for a function, `ǁClassǁmethod` for a method."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.update(f"ǁ{node.name}ǁ{item.name}" for item in node.body
                         if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return names


def test_every_equivalent_mutant_names_a_mutated_module_and_a_function_it_defines():
    mutation = _mutation_script()
    equivalent = mutation.equivalent_mutants()
    assert len(equivalent) > 400
    modules = {mutation.slug(m): m for m in mutation.MODULES + list(mutation.TESTS)}
    unknown = []
    for name, why in equivalent.items():
        assert why.strip(), name
        found = re.fullmatch(r"(lucidrag(?:\.\w+)+?)\.x_?(ǁ\w+ǁ\w+|\w+?)__mutmut_\d+", name)
        assert found, f"not a mutmut name: {name}"
        module, function = found.groups()
        assert module in modules, f"{name}: {module} is not a module tests/mutation/run.py mutates"
        if function not in _functions(ROOT / modules[module]):
            unknown.append(name)
    assert not unknown, ("equivalent mutants of functions that no longer exist (drop them, or rename them "
                         "after the function and check them again): " + ", ".join(unknown))
