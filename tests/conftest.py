"""Test set-up: without a GPU, CUDA kernels run in the Triton interpreter and the Numba CUDA simulator.

The switches must be set before Triton decorates a kernel or `numba.cuda` is first imported, so here,
before any test module imports a backend. Inductor's cache (torch.compile rows) is one folder for the session.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from suite.core.threads import quiet_thread_pools

quiet_thread_pools()  # before NumPy loads OpenBLAS, as `python -m suite` does: the front door times too

import pytest  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from suite.core.targets import configure_emulation  # noqa: E402
from suite.gpu import resources  # noqa: E402

ON_GPU = os.environ.get("FUSEBENCH_GPU_TESTS") == "1"
"""Set by `nox -s gpu`: the kernels run natively on the GPU, so neither the interpreter nor the simulator is on."""
configure_emulation(not ON_GPU)
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="fusebench-inductor-"))
"""One Inductor cache for the whole session (torch.compile rows of many tests share graphs), fresh each session."""

CONF = Path(__file__).resolve().parent.parent / "conf"


def make_config(*overrides: str) -> DictConfig:
    from suite.core import scenario
    from suite.run.config import register_configs

    register_configs()
    scenario.register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return compose(config_name="config", overrides=list(overrides))


@pytest.fixture
def config():
    return make_config


@pytest.fixture
def fresh_resource_cache(tmp_path, monkeypatch):
    """A resource cache of the test's own on disk, and an empty one in memory: what the test measures is a compile."""
    monkeypatch.setenv("FUSEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    resources.clear_memory_cache()
    yield
    resources.clear_memory_cache()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`gpu` tests run only where `nox -s gpu` runs them: on a CUDA device, with emulation off."""
    from suite.core.targets import cuda_device_count

    if ON_GPU and cuda_device_count() > 0:
        return
    why = "needs a CUDA device (nox -s gpu)" if not ON_GPU else "FUSEBENCH_GPU_TESTS=1 but no CUDA device answers"
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=why))
