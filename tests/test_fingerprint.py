"""The compile cache's key of a kernel module covers its in-tree sources and nothing installed."""

from __future__ import annotations

from pathlib import Path

from suite.core import fingerprint


def test_an_in_tree_kernel_module_is_keyed_by_its_tree_and_never_by_installed_packages():
    sources = fingerprint._sources("backends.triton.elementwise_chain", (fingerprint.ROOT,))
    paths = [Path(p) for p in sources]
    assert fingerprint.ROOT / "backends" / "triton" / "elementwise_chain.py" in paths
    assert fingerprint.ROOT / "scenarios" / "elementwise_chain" / "ops.py" in paths  # imported from the tree
    assert not [p for p in paths if {"site-packages", "dist-packages"} & set(p.parts)]  # .nox/ lies in the tree
    assert not [p for p in paths if p.parts[len(fingerprint.ROOT.parts)] == "suite"]  # the harness is left out


def test_a_virtual_environment_inside_the_repository_is_not_the_tree(tmp_path):
    installed = tmp_path / ".nox" / "tests" / "lib" / "python3.11" / "site-packages" / "torch" / "__init__.py"
    mine = tmp_path / "backends" / "mine.py"
    assert fingerprint._within(mine, (tmp_path,))
    assert not fingerprint._within(installed, (tmp_path,))
    assert not fingerprint._within(Path("/elsewhere/backends/mine.py"), (tmp_path,))
