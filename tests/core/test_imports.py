"""The layout's promises, checked: the core is pure, and no module of the package is in an import cycle."""

import ast
import pathlib
import subprocess
import sys

import networkx as nx
import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "scalpel_executor"
CORE_MODULES = sorted(f"scalpel_executor.core.{p.stem}" for p in (PACKAGE / "core").glob("*.py") if p.stem != "__init__")

# What a pure decision may use: data structures and arithmetic. No os, pathlib, time, threading,
# subprocess, socket, sqlite3, logging (it writes files), numpy or parsl.
CORE_MAY_IMPORT = {
    "__future__", "abc", "bisect", "collections", "dataclasses", "enum", "functools", "heapq", "itertools",
    "math", "numbers", "operator", "random", "re", "statistics", "typing",
}


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:``, which never run."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            skipped.update(id(child) for statement in node.body for child in ast.walk(statement))
    return skipped


def _imports(path: pathlib.Path) -> set[str]:
    """Every module a file imports when it runs, at module level or inside a function, as absolute names."""
    found = set()
    tree = ast.parse(path.read_text())
    skipped = _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_the_core_exists_and_holds_the_decisions():
    for name in ("units", "cpulist", "topology", "tasks", "grouping", "policies", "scheduler", "batching",
                 "contention", "simulate"):
        assert f"scalpel_executor.core.{name}" in CORE_MODULES


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_modules_import_only_pure_standard_modules_and_the_core(module):
    path = PACKAGE.parent / (module.replace(".", "/") + ".py")
    for name in _imports(path):
        top = name.split(".")[0]
        if top == "scalpel_executor":
            assert name.startswith("scalpel_executor.core"), f"{module} imports {name}, outside the core"
        else:
            assert top in CORE_MAY_IMPORT, f"{module} imports {name}: I/O, a clock or a heavy library in the core"


@pytest.mark.parametrize("module", ["scalpel_executor", "scalpel_executor.core", *CORE_MODULES])
def test_importing_the_core_in_a_fresh_interpreter_loads_neither_numpy_nor_parsl(module):
    code = (f"import sys, {module}; heavy = sorted(m for m in ('numpy', 'parsl', 'psutil', 'sqlite3', 'networkx') "
            f"if m in sys.modules); assert not heavy, heavy")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_no_module_of_the_package_is_part_of_an_import_cycle():
    graph = nx.DiGraph()
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    for name, path in modules.items():
        graph.add_node(name)
        for imported in _imports(path):
            # "from scalpel_executor.core import tasks" names a module; "from x import Name" names x
            target = imported if imported in modules else imported.rsplit(".", 1)[0]
            if target in modules and target != name and not name.startswith(target + "."):
                graph.add_edge(name, target)
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not cycles, f"import cycles: {cycles}"
