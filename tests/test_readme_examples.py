"""The documentation's plug-in examples are code that runs: the backend block (docs/adding-a-backend.md) and the
family block (docs/adding-a-family.md) are executed here, the family selected by its name and run end to end, so
the documents cannot drift from what the suite accepts. Each block is found by its section's heading in README.md
or any docs/*.md, wherever the section lives."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from scenarios.elementwise_chain import OPS
from suite.core import backend, registry, scenario, targets
from suite.run import validate
from suite.run.runner import run
from tests.conftest import make_config

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def python_blocks(section: str) -> list[str]:
    """The ```python blocks of the section headed `section` (any level), up to the next heading of its level or
    above, in whichever document holds it; exactly one document must. A `#` line inside a fence is code."""
    found = []
    for path in DOCUMENTS:
        body, level, fenced = None, 0, False
        for line in path.read_text(encoding="utf-8").splitlines():
            fenced ^= line.startswith("```")
            head = None if fenced else re.match(r"(#+) (.*)$", line)
            if head and body is None and head.group(2) == section:
                body, level = [], len(head.group(1))
            elif head and body is not None and len(head.group(1)) <= level:
                break
            elif body is not None:
                body.append(line)
        if body is not None:
            found.append(re.findall(r"```python\n(.*?)```", "\n".join(body) + "\n", flags=re.S))
    assert len(found) == 1, f"section {section!r} is in {len(found)} documents"
    return found[0]


def execute(block: str, name: str, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Run `block` as the module `name` (dataclasses look their module up), returning its namespace."""
    module = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, name, module)
    exec(compile(block, f"<{name}>", "exec"), module.__dict__)
    return module.__dict__


@pytest.fixture
def isolated():
    """Whatever a block registers is taken out again, so no other test sees it. Everything the suite discovers
    is discovered first: the run below would otherwise register it inside the snapshot, and taking it out would
    leave later tests with no backends (discovery happens once a process)."""
    validate.discover_backends()
    tables = (scenario.SCENARIOS, registry.REGISTRY.kernels, backend.BACKENDS, targets.TARGETS)
    before = [set(t) for t in tables]
    yield
    for table, keys in zip(tables, before, strict=True):
        for key in set(table) - keys:
            del table[key]


def test_the_family_example_runs_selected_by_its_name(isolated, tmp_path, monkeypatch) -> None:
    (block,) = python_blocks("Adding a scenario family")
    execute(block, "readme_family", monkeypatch)
    cfg = make_config("scenario=axpby", "preset=S", "backends=[axpby_numpy]", "device=cpu", "timing=quick",
                      "dtype=float32", "isolate=false")  # fmt: skip
    frame = run(cfg, tmp_path, show_progress=False).table
    assert sorted(frame["variant"]) == ["fused", "unfused"] and set(frame["status"]) == {"ok"}, frame["reason"]
    assert (frame.loc[frame["variant"] == "fused", "bytes_saved"] == 2 * 4096 * 4).all()
    assert frame["command"].str.contains("scenario=axpby ").all()


def test_the_backend_example_defines_everything_it_uses(isolated, monkeypatch) -> None:
    (block,) = python_blocks("Adding a backend")
    monkeypatch.delitem(backend.BACKENDS, "plugged", raising=False)
    namespace = execute(block, "readme_backend", monkeypatch)
    x = np.linspace(-1, 1, 10_000, dtype=np.float32)
    out = np.empty_like(x)
    namespace["fused"]({"x": x}, out, {"ops": ["scale", "gelu"]}, {"chunk": 4096})()
    expected = OPS["gelu"](OPS["scale"](x).astype(np.float32)).astype(np.float32)
    assert np.allclose(out, expected)
    with pytest.raises(registry.Unsupported):
        namespace["fused"]({"x": x.astype(np.float64)}, out, {"ops": ["scale"]}, {"chunk": 4096})
