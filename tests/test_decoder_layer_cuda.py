"""decoder_layer on the CUDA backends (Triton, CuPy, Numba CUDA), without a GPU: each layer variant builds the
backend's own kernel of each op in the variant it picks, a wrong op is caught by the check in the interpreter,
CuPy's compiled-only layer says it needs a GPU, and the layout copies of Triton and Numba CUDA swap a strided
view's first two axes. Every variant's numerics against the float64 chain are tests/test_kernels.py's (each in
the interpreter and compiled for sm_90, one in the simulator)."""

from __future__ import annotations

import numpy as np
import pytest

from scenarios.decoder_layer import OPS, op_variants
from suite.core import numerics, registry, targets
from suite.core import scenario as scenarios
from suite.core.registry import KernelKey

pytestmark = pytest.mark.emulated

registry.discover()
LAYER = scenarios.get("decoder_layer")
CHECK = LAYER.checks[0]
BACKENDS = ("triton", "cupy", "numba")


def _target(backend: str) -> targets.Target:
    target = targets.TARGETS[(backend, "cuda")]
    if (avail := target.probe()).mode == targets.UNAVAILABLE:
        pytest.skip(avail.reason)
    return target


def _build(backend: str, variant: str, inputs: dict[str, np.ndarray]) -> tuple[registry.Launch, object]:
    target = _target(backend)
    out = target.empty(LAYER.output_shape(CHECK), "float32")
    target.poison(out)
    entry = registry.REGISTRY.get(KernelKey("decoder_layer", backend, variant, "cuda"))
    return registry.as_launch(entry({k: target.asarray(v) for k, v in inputs.items()}, out, CHECK, {})), out


@pytest.mark.parametrize("variant", ["unfused", "fused_rope"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_each_variant_builds_the_backends_kernel_of_each_op_in_its_variant(
    backend: str, variant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The layer looks its ops up among the backend's CUDA kernels when it is built: each op's entry built once
    per run of it (add_rmsnorm twice), in the variant the layer's variant picks, and none of another backend."""
    built: list[tuple[str, str, str]] = []
    for key in [k for k in registry.REGISTRY.keys(device="cuda") if k.scenario in OPS]:
        entry = registry.REGISTRY.kernels[key]

        def recorded(inputs, out, params, opts, key=key, entry=entry):  # type: ignore[no-untyped-def]
            built.append((key.scenario, key.variant, key.backend))
            return entry(inputs, out, params, opts)

        monkeypatch.setitem(registry.REGISTRY.kernels, key, recorded)
    _build(backend, variant, LAYER.make_inputs(CHECK, "float32", np.random.default_rng(0)))
    picked = op_variants(variant, CHECK)
    want = [(f, picked[f], backend) for f in ("add_rmsnorm", *OPS)]  # add_rmsnorm runs twice
    assert sorted(built) == sorted(want), built


def test_a_wrong_op_is_caught_in_the_interpreter() -> None:
    """The check sees one op's mistake on Triton too: the layer with rope's tables swapped fails by far."""
    inputs = LAYER.make_inputs(CHECK, "float32", np.random.default_rng(3))
    ref = LAYER.reference(inputs, CHECK)
    tol = LAYER.tolerance(inputs, CHECK, "float32", ref)
    launch, out = _build("triton", "fused", dict(inputs, sin=-inputs["sin"]))
    launch()
    got = np.asarray(targets.TARGETS[("triton", "cuda")].to_host(out))
    assert numerics.rel_err(got, ref) > 100 * tol
    launch, out = _build("triton", "fused", inputs)
    launch()
    _err, problem = numerics.judge(np.asarray(targets.TARGETS[("triton", "cuda")].to_host(out)), ref, tol)
    assert problem == ""


def test_the_compiled_only_layer_says_it_needs_a_gpu() -> None:
    """Without a GPU CuPy's layer builds (its ops' kernels compiled for sm_90) and its launch says why it cannot run."""
    target = _target("cupy")
    if target.probe().mode != targets.COMPILE:
        pytest.skip("CuPy runs on a GPU here")
    launch, _out = _build("cupy", "fused", LAYER.make_inputs(CHECK, "float32", np.random.default_rng(0)))
    with pytest.raises(targets.NotRunnable, match="sm_90"):
        launch()


def test_the_layout_copy_swaps_a_strided_views_first_two_axes() -> None:
    """The chain's `Copy` on the backends that run here: dst[j, i] = src[i, j] from a slice of a wider buffer (the
    chain's q and k are slices of rope's output), every value of dst written."""
    import torch

    from backends.numba.on_cuda.decoder_layer import swap_launcher
    from backends.triton.decoder_layer import _copy

    wide = np.random.default_rng(5).standard_normal((7, 5, 16)).astype(np.float32)
    want = wide[:, :3].transpose(1, 0, 2)
    dst = torch.full((3, 7, 16), float("nan"))
    _copy(dst, torch.from_numpy(wide)[:, :3])()
    assert np.array_equal(dst.numpy(), want)
    numba = _target("numba")
    dst = numba.empty((3, 7, 16), "float32")
    numba.poison(dst)
    swap_launcher(dst, numba.asarray(wide)[:, :3])()
    assert np.array_equal(numba.to_host(dst), want)
