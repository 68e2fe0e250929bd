"""Launch settings of the Triton kernels, chosen from the case's shape as Triton's tutorials choose them.

- Elementwise chain (`chain_config`): BLOCK = 1024 elements per program and 4 warps, 8 per thread, as in the
  vector-add tutorial; where n is too small to give every SM a program at that block, BLOCK halves (down to
  128, one warp of 4-element vectors) until it does, and a tiny n gets one program of next_power_of_two(n).
  num_warps = BLOCK / 256 (1..4): 8 elements per thread at every block.
- Row kernels (`row_warps`): TILE (the columns a program holds) is the case's, min(tile, next_power_of_two(cols))
  as in the softmax and layernorm tutorials; num_warps = TILE / 256 within 1..16, the layernorm tutorial's
  rule (min(max(BLOCK // 256, 1), 8)) with the softmax tutorial's 16 warps from 4096 columns: 8 values per
  thread for a row of one tile.
- Attention (`attention_config`): BLOCK_M and BLOCK_N are the case's (the ledger counts K and V re-reads per
  query tile). With float16 or bfloat16 the products run on tensor cores: 4 warps, 8 from a 128×128 tile (the fused-attention
  tutorial keeps 8 warps only there) and 4 pipeline stages for head_dim ≤ 64, 3 above (its fixed choice before
  it autotuned). float32 in "ieee" precision runs on FMA units and holds the score tile, q and the accumulator
  in registers: warps grow with BLOCK_M·(BLOCK_N + 2·BLOCK_D) so a thread keeps about 64 of those values (8 warps
  at 64×64×64, as before), and 3 stages. Stages drop while the K and V tiles they buffer would pass
  `SMEM_BUDGET`. That counts no Q, score or converted P tiles, so on a GPU the launcher holds the compiled
  kernel's shared memory against the block's opt-in limit (`smem_optin`, `shared_memory_problem`) and drops
  further stages there, or refuses the tiles at one. The unfused softmax takes the row rule on its chunk.

`backend_options.triton.block` and `num_warps`, where set, win over the rules; every launcher records what it
chose in its notes (`suite.kit.launch_shape.launch_notes`). The rules are plain functions of the shape, so they
run without a GPU and the interpreter checks every configuration they can pick.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from suite.kit.launch import cdiv, next_power_of_two
from suite.kit.launch_shape import NOMINAL, Device

MAX_BLOCK, MIN_BLOCK = 1024, 128
"""Elementwise programs: the vector-add tutorial's block, and the smallest before a program falls below a warp
of 16-byte float32 vectors."""
MAX_ROW_WARPS = 16
SMEM_BUDGET = 160 * 1024
"""Shared memory the attention pipeline's K and V buffers may take (sm_90 gives a block up to 227 KiB)."""
SMEM_OPTIN = 227 * 1024
"""The most shared memory one block may opt in to on sm_90 (H100, H200): 232,448 bytes, the limit where no GPU
answers (the occupancy table's `smem_per_block` for sm_90)."""
VALUES_PER_THREAD = 64
"""float32 attention: tile values a thread holds in registers before ptxas would spill (see `attention_config`)."""


def device() -> Device:
    """The GPU's SMs where Triton runs on one, else the nominal sm_90 (interpreter, compile-only)."""
    from backends.triton import TARGET

    if TARGET.probe().mode != "native":
        return NOMINAL
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    per_sm = getattr(props, "max_threads_per_multi_processor", NOMINAL.threads_per_sm)  # older torch lacks it
    return Device(int(props.multi_processor_count), int(per_sm), props.name)


def smem_optin() -> int:
    """Shared memory a block may opt in to on the GPU Triton runs on (the limit Triton's loader enforces when
    it first launches a kernel), else sm_90's."""
    from backends.triton import TARGET

    if TARGET.probe().mode != "native":
        return SMEM_OPTIN
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return int(getattr(props, "shared_memory_per_block_optin", SMEM_OPTIN))  # older torch lacks it


def shared_memory_problem(shared: int, limit: int, stages: int) -> str | None:
    """Why a compiled kernel that needs `shared` bytes per block cannot be loaded where a block may opt in to
    `limit`, or None where it fits. The stages are named because they multiply the K and V buffers; the tiles
    are the remedy a user has (the stages follow from them, `attention_config`)."""
    if shared <= limit:
        return None
    return (
        f"needs {shared:,} bytes of shared memory per block at num_stages={stages}, over the {limit:,} a block "
        f"can opt in to on this GPU; use smaller block_m or block_n"
    )


def _warps_for_block(block: int) -> int:
    return max(1, min(4, block // 256))


def chain_config(n: int, opts: Mapping[str, Any], sms: int | None = None) -> dict[str, int]:
    """{"block", "num_warps"} of the elementwise chain for `n` elements; options, where set, win."""
    sms = NOMINAL.sms if sms is None else sms
    block = opts.get("block")
    if block is None:
        block = MAX_BLOCK
        while block > MIN_BLOCK and cdiv(n, block) < sms:
            block //= 2
        block = max(16, min(block, next_power_of_two(n)))
    warps = opts.get("num_warps") or _warps_for_block(int(block))
    return {"block": int(block), "num_warps": int(warps)}


def row_warps(tile: int, opts: Mapping[str, Any]) -> int:
    """Warps of a program holding `tile` columns of a row: 8 values a thread, 1..16 warps; the option wins."""
    return int(opts.get("num_warps") or max(1, min(MAX_ROW_WARPS, tile // 256)))


def attention_config(block_m: int, block_n: int, block_d: int, dtype: str, opts: Mapping[str, Any]) -> dict[str, int]:
    """{"num_warps", "num_stages"} of the tiled attention kernels for the case's tiles and dtype."""
    half = dtype in ("float16", "bfloat16")  # 16-bit products run on tensor cores alike
    if half:
        warps = 8 if block_m * block_n >= 128 * 128 else 4
        stages = 4 if block_d <= 64 else 3
    else:
        values = block_m * (block_n + 2 * block_d)
        warps = max(4, min(16, next_power_of_two(cdiv(values, 32 * VALUES_PER_THREAD))))
        stages = 3
    size = 2 if half else 4
    while stages > 1 and stages * 2 * block_n * block_d * size > SMEM_BUDGET:
        stages -= 1
    return {"num_warps": int(opts.get("num_warps") or warps), "num_stages": stages}
