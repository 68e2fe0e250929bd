"""The core helpers every backend shares: launch geometry, family registration, the decomposition walk.

They replace code each backend once carried its own copy of, so a slip here would move every backend at once;
these pin what the copies computed.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from suite.core import registry
from suite.core.decomposition import walk
from suite.kit.launch import MAX_ITEMS, cdiv, chunk_columns, next_power_of_two, row_threads


def test_grid_arithmetic_matches_the_formulas_it_replaced() -> None:
    for n in range(1, 300):
        for d in (1, 7, 32, 256):
            assert cdiv(n, d) == (n + d - 1) // d
        assert next_power_of_two(n) == 1 << max(0, n - 1).bit_length() >= n
    assert next_power_of_two(1) == 1 and next_power_of_two(64) == 64 and next_power_of_two(65) == 128


def test_row_chunks_and_threads() -> None:
    assert chunk_columns(193, 64) == 64 and chunk_columns(300, 512) == 512 and chunk_columns(1, 64) == 1
    assert row_threads(64, 256) == 32  # at most a quarter of the chunk, at least a warp
    assert row_threads(16384, 128) == 16384 // MAX_ITEMS  # more threads where items would exceed MAX_ITEMS
    assert row_threads(65536, 1024, max_items=1) == 1024  # never over a block's limit


@dataclass(frozen=True)
class _Step:
    writes: str


def test_walk_allocates_each_written_tensor_once_and_keeps_given_ones() -> None:
    env = {"x": "X", "y": "Y"}
    made = []

    def make(kind: str) -> str:
        made.append(kind)
        return f"{kind}{len(made)}"

    steps = [_Step("mean"), _Step("xc"), _Step("mean"), _Step("y")]
    seen = [(st.writes, env[st.writes]) for st in walk(steps, env, stats={"mean"}, stat=lambda: make("s"),
                                                       matrix=lambda: make("m"))]  # fmt: skip
    assert seen == [("mean", "s1"), ("xc", "m2"), ("mean", "s1"), ("y", "Y")]
    assert made == ["s", "m"]


def test_register_each_binds_the_scenario_under_explicit_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "REGISTRY", registry.Registry())

    def entry(scenario: str, inputs: dict, out: object, params: dict, opts: dict) -> registry.Launcher:
        """A family entry."""
        return lambda: None

    registry.register_each(("a", "b"), backend="fam", devices=("cpu", "cuda"), fused=entry, unfused=entry)
    keys = registry.REGISTRY.keys(backend="fam")
    assert len(keys) == 8 and registry.KernelKey("b", "fam", "unfused", "cpu") in keys
    bound = registry.REGISTRY.get(registry.KernelKey("a", "fam", "fused", "cuda"))
    assert bound.args == ("a",) and bound.__doc__ == "A family entry."
    with pytest.raises(ValueError, match="registered twice"):
        registry.register_each(("a",), backend="fam", fused=entry)


def test_one_decorator_registers_every_combination_bound_to_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "REGISTRY", registry.Registry())
    seen: list[tuple[str, str]] = []

    @registry.kernel(scenario=("a", "b"), backend="fam", variant=("tiled", "fused"), device=("cpu", "cuda"))
    def entry(scenario: str, inputs: dict, out: object, params: dict, opts: dict, *, variant: str) -> registry.Launch:
        """Serves every scenario and variant."""
        return registry.Launch(lambda: seen.append((scenario, variant)))

    assert len(registry.REGISTRY.keys(backend="fam")) == 8
    registry.REGISTRY.get(registry.KernelKey("b", "fam", "fused", "cpu"))({}, None, {}, {})()
    assert seen == [("b", "fused")]


def test_a_launch_carries_its_notes_and_a_bare_launcher_still_reports_its_own() -> None:
    made = registry.Launch(lambda: None, notes={"launch": {"grid": [4]}}, allocates={"mid": 64})
    assert registry.notes(made) == {"launch": {"grid": [4]}} and registry.as_launch(made) is made
    made.notes["compiler"] = "filled on the first call"  # the launcher's dict, never replaced
    assert "compiler" in registry.notes(made)

    def legacy() -> None:
        pass

    legacy.notes = {"stages": 2}  # type: ignore[attr-defined]  # a plug-in written against the old API
    assert registry.notes(legacy) == {"stages": 2} and registry.notes(lambda: None) == {}
    with pytest.raises(TypeError, match="must be a dict"):
        registry.Launch(lambda: None, notes=None)  # type: ignore[arg-type]
