"""The shape of the package: every doctest runs, no import circle, runtimes never ask
which semantics they run, and the layers import downwards only."""

from __future__ import annotations

import ast
import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import graphcep

SRC = Path(graphcep.__file__).resolve().parent
MODULES = sorted(m.name for m in pkgutil.walk_packages([str(SRC)], "graphcep."))


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert result.failed == 0, name


def _imports(path: Path, *, top_level_only: bool) -> set[str]:
    """The graphcep modules ``path`` imports (module level, or anywhere)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("graphcep"):
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("graphcep"))
    return found


def _module_files() -> dict[str, Path]:
    files = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        files[name] = path
    return files


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in state and (found := visit(w)):
                return found
        stack.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state and (found := visit(v)):
            return found
    return None


def test_no_import_circle_even_through_function_level_imports():
    files = _module_files()
    graph = {name: {m for m in _imports(path, top_level_only=False) if m in files and m != name}
             for name, path in files.items()}
    assert _cycle(graph) is None


#: layer -> the layers it may import (ARCHITECTURE: arrows point down only)
LAYERS = {
    "timing": set(),
    "text_encoding": set(),
    "events": {"hashing"},
    "hashing": set(),
    "patterns": {"events"},
    "lang": {"patterns", "events", "text_encoding"},
    "features": {"events", "patterns", "hashing"},
    "io": {"events", "hashing", "text_encoding"},
    "engines": {"events", "patterns", "features", "hashing"},
    "jobs": {"engines", "patterns", "lang", "features", "io", "events", "hashing"},
    "pictures": {"jobs", "io", "events"},
    "monitor": {"pictures", "io", "events"},
    "runtime": {"jobs", "engines", "patterns", "lang", "features", "io", "events", "hashing",
                "timing"},
}


def test_layers_import_downwards_only():
    for name, path in _module_files().items():
        parts = name.split(".")
        layer = parts[1] if len(parts) > 1 else ""
        if layer not in LAYERS:
            continue  # the API and the command line may use every layer
        for target in _imports(path, top_level_only=False):
            other = target.split(".")[1] if target.count(".") else ""
            if other and other != layer and other in {*LAYERS, "cli"}:
                assert other in LAYERS[layer], f"{name} imports {target}"


def test_the_command_line_is_a_layer_over_the_rest():
    """Nothing but the command line's own modules (and ``python -m graphcep``) imports
    ``graphcep.cli``: the API and the runtimes never reach up into it."""
    for name, path in _module_files().items():
        if name.startswith("graphcep.cli") or name == "graphcep.__main__":
            continue
        for target in _imports(path, top_level_only=False):
            assert target != "graphcep.cli" and not target.startswith("graphcep.cli."), \
                f"{name} imports {target}"


def test_no_isinstance_on_job_kinds_outside_jobs():
    kinds = {"SubgraphJob", "DDSTJob"}
    for name, path in _module_files().items():
        if name.startswith("graphcep.jobs"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
                named = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                assert not named & kinds, f"{name}:{node.lineno} asks a job's kind"
