"""The tree is the architecture: layers that only look down, plug-ins that import only the core, no cycles.

Every import in `suite/`, `backends/` and `scenarios/` is read from the source (lazy imports inside functions
included: a lazy import still ties two modules together) and checked against the layer rules below.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("suite", "backends", "scenarios")

MAY_IMPORT = {
    "suite.core": {"suite.core"},
    "suite.kit": {"suite.core", "suite.kit"},
    "suite.gpu": {"suite.core", "suite.kit", "suite.gpu"},
    "suite.run": {"suite.core", "suite.kit", "suite.gpu", "suite.run"},
    "suite.report": {"suite.core", "suite.kit", "suite.report"},
    "suite.benchmark": {"suite.core", "suite.kit", "suite.run", "suite.benchmark"},
    "suite.sweep": {"suite.core", "suite.kit", "suite.gpu", "suite.run", "suite.report", "suite.sweep"},
    "suite": {"suite.core", "suite.kit", "suite.gpu", "suite.run", "suite.report", "suite.sweep", "suite"},
    "backends": {"suite.core", "suite.kit", "backends", "scenarios"},
    "scenarios": {"suite.core", "suite.kit", "scenarios"},
}
"""Layer -> the layers (of this tree) its modules may import. The command line (`suite/cli.py`) sits on top."""


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


def layer(module: str) -> str:
    for name in sorted(MAY_IMPORT, key=len, reverse=True):
        if module == name or module.startswith(name + "."):
            return name
    raise KeyError(module)


def imports(module: str) -> set[str]:
    """Modules of this tree that `module` imports, resolved to the longest known module name."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], base]).strip(".")
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name.split(".")[0] in PACKAGES and name != module:
                found.add(name)
    return found


GRAPH = {m: imports(m) for m in MODULES}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_only_look_down(module):
    allowed = MAY_IMPORT[layer(module)]
    upward = sorted(i for i in GRAPH[module] if layer(i) not in allowed and not module.startswith(i + "."))
    assert not upward, f"{module} ({layer(module)}) imports {upward}; it may import {sorted(allowed)}"


def test_no_import_cycles():
    """Tarjan's strongly connected components over module imports (a package's own __init__ excluded)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in GRAPH[v]:
            if v.startswith(w + "."):
                continue  # a submodule importing its own package's __init__ is how packages work
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert not cycles, f"import cycles: {cycles}"


def test_suite_names_no_backend_library():
    """The machinery asks backends through the protocol; only the core's emulation switches name libraries."""
    libraries = ("triton", "cupy", "numba", "torch")
    offenders = []
    for module, path in MODULES.items():
        if not module.startswith("suite"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{module}: {n}" for n in names if n.split(".")[0] in libraries]
    assert not offenders, offenders
