"""A fingerprint of a kernel factory's source, so that editing a kernel recompiles it and nothing else does.

A recorded kernel made by a module-level factory is named by reference, not by its code, so its cached compile
result must be keyed by the code too: the source of the factory's module and of every module it imports from
the same tree, transitively. The harness (`suite`) is left out: kernels are not built from it, and editing it
must not throw away every cached compile.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import importlib.util
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository: in-tree backends and scenarios live under it."""
INSTALLED = {"site-packages", "dist-packages"}
"""Folders of installed distributions: never part of the tree, even where a virtual environment lies inside the
repository (nox's .nox/): otherwise every import of torch or Triton would be read and hashed, for minutes."""


def _within(path: Path, roots: tuple[Path, ...]) -> bool:
    """Whether `path` is under one of `roots` and not inside an installed distribution below that root."""
    return any(path.is_relative_to(r) and not INSTALLED & set(path.relative_to(r).parts) for r in roots)


def _origin(module: str) -> str | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError, AttributeError):
        return None
    origin = getattr(spec, "origin", None) if spec else None
    return origin if origin and origin.endswith(".py") else None


def _imports(tree: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                with contextlib.suppress(ImportError, ValueError):
                    base = importlib.util.resolve_name("." * node.level + base, package)
            if base:
                yield base
                yield from (f"{base}.{alias.name}" for alias in node.names)


def _sources(module: str, roots: tuple[Path, ...]) -> dict[str, str]:
    """path -> sha256 of `module` and of the modules it imports, transitively, from under `roots`."""
    seen: dict[str, str] = {}
    stack = [module]
    while stack:
        name = stack.pop()
        if name.split(".")[0] == "suite":
            continue
        top_origin = _origin(name.split(".")[0])
        if top_origin is None or not _within(Path(top_origin).resolve(), roots):
            continue
        path = _origin(name)
        if path is None or path in seen or not _within(Path(path).resolve(), roots):
            continue
        try:
            text = Path(path).read_text(encoding="utf-8")
            tree = ast.parse(text)
        except (OSError, SyntaxError, ValueError):
            continue
        seen[path] = hashlib.sha256(text.encode()).hexdigest()
        stack.extend(_imports(tree, name, path.endswith("__init__.py")))
    return seen


@functools.cache
def module_fingerprint(module: str) -> str:
    """A hash of the source of `module` and of every module it imports, transitively, from the same tree
    (the repository, or the factory module's own top-level package): editing any of them recompiles."""
    origin = _origin(module)
    if origin is None:
        return "unknown"
    top = Path(origin).resolve().parents[module.count(".")]
    digest = hashlib.sha256()
    for path, sha in sorted(_sources(module, (ROOT, top)).items()):
        resolved = Path(path).resolve()
        shown = resolved.relative_to(top) if resolved.is_relative_to(top) else path
        digest.update(f"{shown}:{sha}\n".encode())
    return digest.hexdigest()[:16]
