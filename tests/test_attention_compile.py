"""The attention kernels compile for sm_90 without a GPU, without spilling, within their shared memory.

CuPy's source goes through NVRTC. Triton's kernels are compiled by `triton.compile` for GPUTarget("cuda", 90)
and assembled by ptxas, in a subprocess without TRITON_INTERPRET (the interpreter replaces `triton.jit`), in
float32, float16 and bfloat16 (the 16-bit products on tensor cores); CuPy and Numba have no bfloat16 path.
Numba's kernels are compiled to PTX in a subprocess without the simulator; their register tiles must not
have been put in local memory. Tile sizes whose shared memory exceeds 48 KB are refused with a reason.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from suite.gpu.ptxas import parse_ptxas
from tests.support import json_lines, missing, run_without_emulation

DEFAULT = {"batch": 1, "heads": 1, "seq_len": 193, "head_dim": 64, "causal": True, "block_m": 64, "block_n": 64}
KERNELS = ("attn_flash", "attn_scores", "attn_softmax", "attn_pv")


@pytest.mark.compile
@pytest.mark.skipif(bool(missing("cupy")), reason=missing("cupy"))
@pytest.mark.parametrize(
    ("head_dim", "causal", "dtype", "kv_heads"),
    [(64, False, "float32", 8), (64, True, "float32", 8), (64, True, "float16", 2), (128, True, "float16", 8)],
)
def test_cupy_kernels_compile_without_spills(head_dim: int, causal: bool, dtype: str, kv_heads: int) -> None:
    """8 heads on 8 K/V heads (GROUP 1) or on 2 (grouped-query, GROUP 4): the group is compiled in."""
    from backends.cupy.attention_kernels import shared_bytes, source
    from backends.cupy.build import compile_sm90

    params = {**DEFAULT, "heads": 8, "kv_heads": kv_heads, "head_dim": head_dim, "causal": causal}
    text = source(params, dtype)
    assert f"#define GROUP {8 // kv_heads}\n" in text
    log = compile_sm90(text, "attn_flash").log  # one NVRTC program holds all four kernels
    found = parse_ptxas(log)
    for name in KERNELS:
        r = found[name]
        assert r.registers > 0 and r.spill_bytes == 0 and r.stack_bytes == 0, f"{name}: {r}"
    assert found["attn_flash"].smem_bytes == shared_bytes(64, 64) <= 48 * 1024


@pytest.mark.skipif(bool(missing("cupy")), reason=missing("cupy"))
def test_cupy_refuses_tiles_over_the_shared_memory_limit() -> None:
    from backends.cupy.attention import _compiled

    with pytest.raises(ValueError, match="shared memory"):
        _compiled({**DEFAULT, "block_m": 128, "block_n": 128}, "float32", ("attn_flash",))


@pytest.mark.skipif(bool(missing("numba_cuda")), reason=missing("numba_cuda"))
def test_numba_cuda_refuses_tiles_over_the_shared_memory_limit() -> None:
    from backends.numba.on_cuda.attention import fused
    from backends.numba.on_cuda.attention_tiles import config

    assert config(64, 64, 256).shared_bytes == config(64, 64, 16).shared_bytes <= 48 * 1024
    x = np.zeros((1, 1, 193, 64), np.float32)
    with pytest.raises(ValueError, match="shared memory"):
        fused({"q": x, "k": x, "v": x}, x.copy(), {**DEFAULT, "block_m": 128, "block_n": 128}, {})


TRITON_SCRIPT = """
import json
from backends.triton import attention as A
from tests.sm90 import aligned, compile_sm90

for dtype, ty in (("float32", "fp32"), ("float16", "fp16"), ("bfloat16", "bf16")):
    consts = A.tile_constants({"head_dim": 64, "causal": True, "block_m": 64, "block_n": 64})
    warps = A.tiled_options(consts, dtype, {})["num_warps"]  # the launcher's; NUM_WARPS names float32's and float16's
    assert A.NUM_WARPS.get(dtype, warps) == warps, (dtype, warps)
    kernels = {
        "_flash_kernel": (["Q", "K", "V", "Out"], ["seq_len", "group", "scale"], consts),
        "_scores_kernel": (["Q", "K", "S"], ["seq_len", "group", "scale"], consts),
        "_softmax_kernel": (["S", "P"], ["seq_len"], {"CAUSAL": True, "BLOCK": A.SOFTMAX_BLOCK}),
        "_pv_kernel": (["P", "V", "Out"], ["seq_len", "group"], consts),
    }
    for name, (ptrs, scalars, cx) in kernels.items():
        signature = {**{p: f"*{ty}" for p in ptrs}, **{s: "fp32" if s == "scale" else "i32" for s in scalars},
                     **dict.fromkeys(cx, "constexpr")}
        k, log = compile_sm90(getattr(A, name), signature, cx, {"num_warps": warps}, aligned(range(len(ptrs))))
        print(json.dumps({"dtype": dtype, "kernel": name, "cubin": len(k.asm.get("cubin", b"")),
                          "shared": k.metadata.shared, "mma": "mma.sync" in k.asm["ptx"] or "wgmma" in k.asm["ptx"],
                          "ptxas": log}))
"""


@pytest.mark.compile
@pytest.mark.skipif(bool(missing("triton", "torch")), reason=missing("triton", "torch"))
def test_triton_kernels_compile_for_sm90_without_spills() -> None:
    proc = run_without_emulation(TRITON_SCRIPT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = json_lines(proc.stdout)
    assert len(rows) == 12
    for row in rows:
        where = f"{row['kernel']} {row['dtype']}"
        r = parse_ptxas(row["ptxas"])[row["kernel"]]
        assert row["cubin"] > 0 and r.registers > 0, where
        assert r.spill_bytes == 0 and r.stack_bytes == 0, f"{where}: {r}"
        if row["dtype"] in ("float16", "bfloat16") and row["kernel"] != "_softmax_kernel":
            assert row["mma"], f"{where}: tl.dot did not use tensor cores"


NUMBA_SCRIPT = """
import json, sys
from backends.numba.on_cuda import attention
from backends.numba.compile import compile_kernels

variant, dtype, head_dim = sys.argv[1], sys.argv[2], int(sys.argv[3])
params = {"head_dim": head_dim, "causal": True, "block_m": 64, "block_n": 64}
print(json.dumps(compile_kernels(attention.kernel_sources(variant, params, dtype))))
"""


@pytest.mark.compile
@pytest.mark.skipif(bool(missing("numba_cuda")), reason=missing("numba_cuda"))
@pytest.mark.parametrize(("variant", "dtype", "head_dim"), [("fused", "float16", 128), ("unfused", "float32", 64)])
def test_numba_kernels_compile_for_sm90_with_tiles_in_registers(variant: str, dtype: str, head_dim: int) -> None:
    proc = run_without_emulation(NUMBA_SCRIPT, variant, dtype, str(head_dim), timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ptx = json.loads(proc.stdout.splitlines()[-1])
    assert sorted(ptx) == (["flash"] if variant == "fused" else ["pv", "scores", "softmax"])
    for name, code in ptx.items():
        assert ".target sm_90" in code and ".visible .entry" in code, name
        assert ".local" not in code, f"{name}: a register tile went to local memory"
        if dtype == "float16":
            assert "cvt.f32.f16" in code, name
