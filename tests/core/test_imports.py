"""The layout's promises (docs/design.md, "Import rules"), checked: the core is pure, layers point
down, and no module of the package is in an import cycle."""

import ast
import pathlib
import re
import subprocess
import sys

import networkx as nx
import pytest

import scalpel_executor

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "scalpel_executor"
DESIGN = PACKAGE.parent / "docs" / "design.md"
# The package root re-exports names from any layer (loading each module on first use).
REEXPORTS = {"scalpel_executor"}
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


def _imports(path: pathlib.Path, *, type_only: bool = False) -> set[str]:
    """Every module a file of the package imports when it runs (see _imports_in)."""
    return _imports_in(path.read_text(), _module_name(path), path.stem == "__init__", type_only=type_only)


def _imports_in(source: str, module_name: str, is_package: bool, *, type_only: bool = False) -> set[str]:
    """Every module ``source`` imports when it runs, at module level or inside a function, as absolute
    names (a relative import resolved against its package); ``from m import x`` gives m and m.x.
    With ``type_only``, those under ``if TYPE_CHECKING:`` too."""
    found = set()
    tree = ast.parse(source)
    skipped = set() if type_only else _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                package = module_name.split(".")[:None if is_package else -1]
                module = ".".join([*package[:len(package) - node.level + 1], *filter(None, [node.module])])
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def test_the_core_exists_and_holds_the_decisions():
    for name in ("units", "cpulist", "domains", "tasks", "grouping", "policies", "scheduler", "batching",
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


def _layers_of_the_design() -> dict[str, int]:
    """Each subpackage's rank in docs/design.md's "Layers point down: `cli` → ... → `core`" (core 0)."""
    rule = re.search(r"Layers point down:(.*?)\.\s", DESIGN.read_text(), re.S)
    assert rule, f"{DESIGN} no longer states the layer order as 'Layers point down: `cli` → ... → `core`.'"
    levels = rule.group(1).split("→")
    return {name: rank for rank, level in enumerate(reversed(levels)) for name in re.findall(r"`(\w+)`", level)}


def _layer(module: str, layers: dict[str, int]) -> int | None:
    return layers.get(module.split(".")[1]) if module.count(".") else None


def _imported_module(name: str, modules: dict) -> str | None:
    """The package module an imported name loads: itself, the module it is a name of, or for a name
    of the package root the module the root loads it from on first use (None: the root's own)."""
    if name in modules:
        return name
    parent, _, attribute = name.rpartition(".")
    if parent == "scalpel_executor":
        return scalpel_executor._LAZY.get(attribute)
    return parent if parent in modules else None


def test_the_design_names_every_subpackage_in_its_layer_order():
    subpackages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    layers = _layers_of_the_design()
    assert set(layers) == subpackages, f"docs/design.md's layers {sorted(layers)}, the package's {sorted(subpackages)}"
    below_experiments = [name for name, rank in layers.items() if rank < layers["experiments"]]
    assert layers["core"] == 0 and sorted(below_experiments) == ["core", "host", "learning", "runtime", "workloads"]


def test_every_import_points_to_the_same_or_a_lower_layer():
    layers = _layers_of_the_design()
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    upward = []
    for name, path in sorted(modules.items()):
        if name in REEXPORTS:
            continue
        own = _layer(name, layers)
        assert own is not None, f"{name} is in no layer of docs/design.md's import rules"
        for imported in sorted(_imports(path)):
            target = _imported_module(imported, modules) if imported.startswith("scalpel_executor.") else None
            if target is None:
                continue
            if _layer(target, layers) > own:
                upward.append(f"{name} ({target.split('.')[1]} is above {name.split('.')[1]}) imports {imported}")
    assert not upward, "imports against docs/design.md's layer order (move the piece down):\n" + "\n".join(upward)


def test_the_layer_check_sees_an_upward_import_wherever_it_is():
    # Inside a function, relative, or a name the package root loads from the runtime on first use;
    # not under TYPE_CHECKING, which never runs.
    layers = _layers_of_the_design()
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from scalpel_executor.cli import main\n"
              "def f():\n    from ..experiments import plans\n    from scalpel_executor import ScalpelExecutor\n")
    imports = _imports_in(source, "scalpel_executor.core.upward", is_package=False)
    targets = {_imported_module(i, modules) for i in imports if i.startswith("scalpel_executor.")} - {None}
    assert targets == {"scalpel_executor.experiments", "scalpel_executor.experiments.plans",
                       "scalpel_executor.runtime.driver.executor"}, targets
    assert all(_layer(t, layers) > layers["core"] for t in targets)


def _processes_of_the_design() -> dict[str, int]:
    """Each runtime package's rank in docs/design.md's "processes point down: `driver` → ... → `runtime`"
    (`runtime`, the package's top, 0)."""
    rule = re.search(r"processes point down:(.*?)\.\s", DESIGN.read_text(), re.S)
    assert rule, f"{DESIGN} no longer states the runtime's process order as 'processes point down: `driver` → ...'"
    levels = rule.group(1).split("→")
    return {name: rank for rank, level in enumerate(reversed(levels)) for name in re.findall(r"`(\w+)`", level)}


def _process(module: str) -> str | None:
    """The runtime package ``module`` runs in ("runtime" for the top's shared modules); None outside the runtime."""
    parts = module.split(".")
    if parts[:2] != ["scalpel_executor", "runtime"]:
        return None
    return parts[2] if len(parts) > 3 or (len(parts) == 3 and (PACKAGE / "runtime" / parts[2]).is_dir()) else "runtime"


def _process_crossings(name: str, imports: set[str], modules: dict, ranks: dict[str, int]) -> list[str]:
    own = _process(name)
    crossings = []
    for imported in sorted(imports):
        target = _imported_module(imported, modules) if imported.startswith("scalpel_executor.runtime.") else None
        if own is not None and target is not None and ranks[_process(target)] > ranks[own]:
            crossings.append(f"{name} ({own}) imports {imported} ({_process(target)})")
    return crossings


def test_the_design_names_every_runtime_package_in_its_process_order():
    packages = {p.parent.name for p in (PACKAGE / "runtime").glob("*/__init__.py")}
    ranks = _processes_of_the_design()
    assert set(ranks) == packages | {"runtime"}, f"docs/design.md's processes {sorted(ranks)}, the runtime's {sorted(packages)}"
    assert ranks["runtime"] == 0 and ranks["driver"] == max(ranks.values())


def test_every_runtime_import_points_to_the_same_or_a_lower_process():
    """Type-only imports included: a node manager that names a driver's type already depends on it."""
    ranks = _processes_of_the_design()
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    runtime = [name for name in modules if _process(name) is not None]
    assert len(runtime) > 20
    crossings = [c for name in sorted(runtime)
                 for c in _process_crossings(name, _imports(modules[name], type_only=True), modules, ranks)]
    assert not crossings, "imports against docs/design.md's process order:\n" + "\n".join(crossings)


def test_the_process_check_sees_a_node_loading_the_driver_and_a_worker_loading_the_node():
    ranks = _processes_of_the_design()
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    node = _imports_in("def f():\n    from ..driver import report\n", "scalpel_executor.runtime.node.pool",
                       is_package=False)
    worker = _imports_in("from scalpel_executor.runtime.node.fit import never_fits\n",
                         "scalpel_executor.runtime.worker.main", is_package=False)
    shared = _imports_in("from scalpel_executor.runtime.wire import channel\n", "scalpel_executor.runtime.options",
                         is_package=False)
    assert _process_crossings("scalpel_executor.runtime.node.pool", node, modules, ranks)
    assert _process_crossings("scalpel_executor.runtime.worker.main", worker, modules, ranks)
    assert _process_crossings("scalpel_executor.runtime.options", shared, modules, ranks)
    driver = _imports_in("from scalpel_executor.runtime.node.pool import WorkerPool\n",
                         "scalpel_executor.runtime.driver.executor", is_package=False)
    assert not _process_crossings("scalpel_executor.runtime.driver.executor", driver, modules, ranks)


def _stress_crossings(name: str, imports: set[str], modules: dict) -> list[str]:
    """The imports of module ``name`` that break docs/design.md's rule for the stress harnesses:
    a module outside ``stress`` importing it, or ``stress`` importing ``experiments``."""
    inside = _subpackage(name) == "stress"
    crossings = []
    for imported in sorted(imports):
        target = _imported_module(imported, modules) if imported.startswith("scalpel_executor.") else None
        if target is not None and _subpackage(target) == ("experiments" if inside else "stress"):
            crossings.append(f"{name} imports {imported}")
    return crossings


def _subpackage(module: str) -> str | None:
    return module.split(".")[1] if module.count(".") else None


def test_the_stress_harnesses_are_imported_by_no_other_module_and_import_no_experiment():
    """Type-only imports included: the harnesses serve the tests and benchmarks, never the package."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    assert any(_subpackage(name) == "stress" for name in modules)
    crossings = [c for name, path in sorted(modules.items()) if name not in REEXPORTS
                 for c in _stress_crossings(name, _imports(path, type_only=True), modules)]
    assert not crossings, "imports against docs/design.md's rule for stress:\n" + "\n".join(crossings)


def test_the_stress_check_sees_both_directions():
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    into = _imports_in("def f():\n    from ..stress import faults\n", "scalpel_executor.cli.demo", is_package=False)
    out_of = _imports_in("from scalpel_executor.experiments.plans import DEMO\n", "scalpel_executor.stress.soak",
                         is_package=False)
    assert _stress_crossings("scalpel_executor.cli.demo", into, modules)
    assert _stress_crossings("scalpel_executor.stress.soak", out_of, modules)
    assert not _stress_crossings("scalpel_executor.stress.soak", {"scalpel_executor.runtime.driver.executor"}, modules)


def test_no_module_of_the_package_is_part_of_an_import_cycle():
    """Type-only imports included: a cycle that only a type checker follows is still one."""
    graph = nx.DiGraph()
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    for name, path in modules.items():
        graph.add_node(name)
        for imported in _imports(path, type_only=True):
            # "from scalpel_executor.core import tasks" names a module; "from x import Name" names x
            target = imported if imported in modules else imported.rsplit(".", 1)[0]
            if target in modules and target != name and not name.startswith(target + "."):
                graph.add_edge(name, target)
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not cycles, f"import cycles: {cycles}"


def _core_modules_loaded_by(modules: str) -> list[str]:
    """The core modules a fresh interpreter has loaded after ``import <modules>``, with the package
    root kept out: its root loads the core's public names for every import of the package, which is
    the root's choice."""
    code = ("import sys, types; root = types.ModuleType('scalpel_executor'); "
            f"root.__path__ = [{str(PACKAGE)!r}]; sys.modules['scalpel_executor'] = root; "
            f"import {modules}; "
            "print(' '.join(m.rsplit('.', 1)[1] for m in sorted(sys.modules) if m.startswith('scalpel_executor.core.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_opening_the_profile_store_loads_neither_the_scheduler_nor_the_simulator():
    """The store (learning.store, learning.exchange) alone."""
    loaded = _core_modules_loaded_by("scalpel_executor.learning.store")
    assert not {"scheduler", "simulate", "planning", "policies"} & set(loaded), loaded


def test_the_scheduler_and_the_simulator_load_no_fit():
    """The hot path reads the models' formulas (core.contention, core.interference), never their fits
    (core.contention_fit, core.interference_fit), which serve the learning side."""
    loaded = _core_modules_loaded_by("scalpel_executor.core.scheduler, scalpel_executor.core.simulate")
    assert "interference" in loaded and not [m for m in loaded if m.endswith("_fit")], loaded


@pytest.mark.parametrize("module", ["scalpel_executor.runtime.node.manager", "scalpel_executor.runtime.worker.main"])
def test_a_node_manager_and_a_worker_start_without_parsl(module):
    """The node side loads Parsl only where a task fails with one of its subclasses (runtime.lost)
    or a worker runs a task: at a manager's start it delayed every run's first result by 0.8 s."""
    code = f"import sys, {module}; assert 'parsl' not in sys.modules, sorted(m for m in sys.modules if 'parsl' in m)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_errors_that_subclass_parsls_are_read_from_the_errors_module():
    from parsl.app.errors import AppTimeout
    from parsl.executors.high_throughput.errors import ManagerLost, WorkerLost

    from scalpel_executor.runtime import errors, lost
    assert (errors.WorkerDied, errors.WalltimeExceeded, errors.NodeManagerLost) == (
        lost.WorkerDied, lost.WalltimeExceeded, lost.NodeManagerLost)
    assert issubclass(errors.WorkerDied, WorkerLost) and issubclass(errors.WalltimeExceeded, AppTimeout)
    assert issubclass(errors.NodeManagerLost, ManagerLost)
    with pytest.raises(AttributeError, match="Lost"):
        errors.Lost  # noqa: B018 - the name is the test
