"""Rope's backward pass: the upstream gradient rotated back by −θ into dq and dk; cos and sin get none.

Rope is linear in q and k: y = x·cos + rotate(x)·sin, and rotate's transpose is −rotate (rotate turns each pair by
90°), so dx = dy·cos − rotate(dy·sin) = dy·cos + rotate(dy)·(−sin): each pair (g₁, g₂) of the upstream gradient
becomes (g₁·cos + g₂·sin, g₂·cos − g₁·sin), the forward's rotation by the opposite angle. The gradient of the
forward's one output (q' and k' side by side, `Rope.output_shape`) therefore arrives as one `dy` whose heads
[0, heads) give dq and [heads, heads + kv_heads) give dk. The tables are positions' angles made once per model
step, not parameters, so they get no gradient (`grads` = dq, dk).

What each variant keeps for the backward pass: since the op is linear, its backward needs only the tables, never
q, k or any intermediate, so every variant keeps cos and sin (2 · seq_len · head_dim/2 values, the inputs it
already holds) and nothing else — a fused kernel has nothing to recompute and saves exactly what the unfused steps
do, so `Launch.saves` is the same for both.
- `fused`: one kernel reads dy and the tables once and writes dq and dk once (the forward's kernel with −sin).
- `unfused`: the forward's steps differentiated one kernel each, for q and then for k: u = dy·sin, v = rotateᵀ(u)
  (= −rotate(u): the materialised rotation), w = dy·cos, dx = w + v (`BACKWARD_STEPS`). u, v and w are stored in
  the case's dtype; w takes u's buffer (u is dead once v is made), so two tensors of q's size are alive at once.
- `eager`: torch autograd through `backends.torch.rope_training.rope` (Hugging Face's rotate_half: a cat of the
  negated and plain halves). MulBackward saves only the table it multiplied by (the input's storage, not a copy);
  neg, cat, add save no tensor. Its backward runs the kernels `EAGER_BACKWARD` lists, as torch's profiler shows:
  the two products, then each slice of x that fed the rotation gets its gradient through SliceBackward (zeros of
  x's size, a copy into the slice) added into x's gradient — 9 kernels per tensor.
- `compiled`: torch.compile's AOTAutograd keeps the same two tables (the primals; nothing to recompute) and
  Inductor fuses the pointwise backward graph into one call (a loop writing dq, one writing dk, in its generated
  CPU code): the fused kernel's traffic. Its forward stores rotate(x) on the CPU (`RopeBackward.forward_ledger`).
- `library`: Liger's rope (CUDA, registered later) saves cos and sin and rotates the upstream gradient in place,
  so, as in the forward, the gradient is first copied into dq and dk.
"""

from __future__ import annotations

import numpy as np

from scenarios.rope.decomposition import RopeStep, rope_ledger, sizes
from suite.core.ledger import Intermediate, KernelTraffic, VariantLedger, live_peak
from suite.core.numerics import rel_err
from suite.core.phases import Backward
from suite.core.scenario import Params, Scenario

BACKWARD_STEPS = (
    RopeStep("dy·sin", "mul_sin", ("dy", "sin"), "u", 1),
    RopeStep("rotate back", "unrotate", ("u",), "v", 0.5),
    RopeStep("dy·cos", "mul_cos", ("dy", "cos"), "w", 1),
    RopeStep("add", "add", ("w", "v"), "dx", 1),
)
"""The unfused backward of `decomposition.STEPS`, one kernel per step over q's part of dy, then k's: the add's
backward passes dy to both products, each product's backward multiplies by its table, rotate's backward is its
transpose (−rotate: half the values negated, 0.5 FLOP an element), and the two paths to x are summed. In this
order u dies as v is made, so w reuses u's buffer (`live_peak` gives two of q's size)."""
BACKWARD_INTERMEDIATES = tuple(st.writes for st in BACKWARD_STEPS if st.writes != "dx")

EAGER_BACKWARD = (
    # (kernel, elements read per element of x, table read, elements written per element of x, FLOPs per element)
    ("dy·sin", 1.0, True, 1.0, 1.0),
    ("dy·cos", 1.0, True, 1.0, 1.0),
    ("neg", 0.5, False, 0.5, 0.5),
    ("zeros for x₁'s gradient", 0.0, False, 1.0, 0.0),
    ("copy into x₁'s half", 0.5, False, 0.5, 0.0),
    ("add", 2.0, False, 1.0, 1.0),
    ("zeros for x₂'s gradient", 0.0, False, 1.0, 0.0),
    ("copy into x₂'s half", 0.5, False, 0.5, 0.0),
    ("add_ (in place)", 2.0, False, 1.0, 1.0),
)
"""The aten kernels eager autograd runs per tensor for the torch decomposition (torch 2.x's profiler on CPU,
`tests/test_rope_backward.py` checks the list): cat's backward is two slices of dr = dy·sin (views); x₂'s goes
through neg; each member of x's pairs reaches x's gradient through slice_backward (a zero-filled tensor of x's
size, a copy into the slice) and an add. The interleaved pairing adds the two slices' gradients first and then
dy·cos: the same kernels and bytes in another order."""
EAGER_ACCESSES = (
    (("dy", "sin"), ("dr",)),
    (("dy", "cos"), ("dxa",)),
    (("dr",), ("ndr",)),
    ((), ("g1",)),
    (("dr",), ("g1",)),
    (("dxa", "g1"), ("dx",)),
    ((), ("g2",)),
    (("ndr",), ("g2",)),
    (("dx", "g2"), ("dx",)),
)
EAGER_FORWARD = (
    # (kernel, reads, writes, FLOPs per element); the last kernel joins q' and k' into y
    ("neg", ("x",), "nx", 0.5),
    ("cat (rotate)", ("nx", "x"), "r", 0.0),
    ("x·cos", ("x", "cos"), "a", 1.0),
    ("rotate(x)·sin", ("r", "sin"), "b", 1.0),
    ("add", ("a", "b"), "yx", 1.0),
)
"""The eager forward of a training step as `backends.torch.rope_training.rope` runs it: the rotation as a neg of
one half and a cat (Hugging Face's rotate_half), then a cat of q' and k' into y — autograd has no `out=`."""
HALF = {"nx": 0.5}


def _pairs(x: np.ndarray, pairing: str) -> tuple[np.ndarray, np.ndarray]:
    """The two members of every pair, each (..., head_dim/2). (scenario.py, which attaches this module's class,
    has the forward's own helpers; importing them back would make a cycle.)"""
    h = x.shape[-1] // 2
    return (x[..., :h], x[..., h:]) if pairing == "half" else (x[..., 0::2], x[..., 1::2])


def _joined(a: np.ndarray, b: np.ndarray, pairing: str) -> np.ndarray:
    if pairing == "half":
        return np.concatenate([a, b], axis=-1)
    return np.stack([a, b], axis=-1).reshape(*a.shape[:-1], 2 * a.shape[-1])


def backward_rotation(g: np.ndarray, cos: np.ndarray, sin: np.ndarray, pairing: str) -> np.ndarray:
    """Each pair (g₁, g₂) to (g₁·cos + g₂·sin, g₂·cos − g₁·sin), the tables (seq_len, head_dim/2) broadcast over
    batch and heads, in g's dtype's arithmetic."""
    (g1, g2), c, s = _pairs(g, pairing), cos[:, None, :], sin[:, None, :]
    return _joined(g1 * c + g2 * s, g2 * c - g1 * s, pairing)


def emulate_backward(inputs: dict[str, np.ndarray], params: Params, dtype: str) -> dict[str, np.ndarray]:
    """The unfused steps in float32, u = dy·sin, w = dy·cos and the sum w + rotateᵀ(u) rounded to `dtype`
    (rotateᵀ only moves and negates: exact)."""
    pairing, heads = params["pairing"], params["heads"]
    c, s = (inputs[t].astype(np.float32)[:, None, :] for t in ("cos", "sin"))
    dy = inputs["dy"].astype(np.float32)
    out = {}
    for name, g in (("dq", dy[:, :, :heads]), ("dk", dy[:, :, heads:])):
        g1, g2 = _pairs(g, pairing)
        u1, u2, w1, w2 = ((a * t).astype(dtype).astype(np.float32) for a, t in ((g1, s), (g2, s), (g1, c), (g2, c)))
        out[name] = _joined(w1 + u2, w2 - u1, pairing).astype(dtype)
    return out


class RopeBackward(Backward):
    grads = ("dq", "dk")

    def reference(self, scn: Scenario, inputs: dict[str, np.ndarray], params: Params) -> dict[str, np.ndarray]:
        heads, pairing = params["heads"], params["pairing"]
        dy = np.asarray(inputs["dy"], np.float64)
        cos, sin = (np.asarray(inputs[t], np.float64) for t in ("cos", "sin"))
        return {
            "dq": backward_rotation(dy[:, :, :heads], cos, sin, pairing),
            "dk": backward_rotation(dy[:, :, heads:], cos, sin, pairing),
        }

    def tolerance(
        self, scn: Scenario, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: dict[str, np.ndarray]
    ) -> dict[str, float]:
        """Four times the error of the unfused backward steps in `dtype` storage, within the family's limits, as the
        forward's: every gradient is two rounded products and a rounded sum, elementwise (no reduction grows it)."""
        own = emulate_backward(inputs, params, dtype)
        return {name: scn.limits.clip(dtype, 4.0 * rel_err(own[name], ref[name])) for name in ref}

    def saved(self, scn: Scenario, params: Params, dtype: str) -> dict[str, dict[str, int]]:
        """cos and sin, each seq_len · head_dim/2 values, for every variant (see the module's docstring)."""
        table = sizes(params)[2] * np.dtype(dtype).itemsize
        return {v: {"cos": table, "sin": table} for v in ("fused", "unfused", "eager", "compiled", "library")}

    def backward_ledger(self, scn: Scenario, params: Params, dtype: str) -> dict[str, VariantLedger]:
        s = np.dtype(dtype).itemsize
        nq, nk, table = sizes(params)
        held = (2 * (nq + nk) + 2 * table) * s  # dy, dq, dk and both tables, alive throughout
        unfused, eager, removed = [], [], []
        accesses, eager_accesses, between, eager_between = [], [], {}, {}
        for x, n in (("q", nq), ("k", nk)):
            for st in BACKWARD_STEPS:
                read = sum(table if t in ("cos", "sin") else n for t in st.reads) * s
                unfused.append(KernelTraffic(f"{st.name} ({x})", read, n * s, int(st.flops_per_element * n)))
                names = [f"{t}{x}" if t in BACKWARD_INTERMEDIATES else t for t in (*st.reads, st.writes)]
                accesses.append((names[:-1], names[-1:]))
            removed += [Intermediate(f"{t} ({x})", n, s) for t in BACKWARD_INTERMEDIATES]
            between |= {f"{t}{x}": n * s for t in BACKWARD_INTERMEDIATES}
            for name, per_read, tabled, per_write, flops in EAGER_BACKWARD:
                read = int(per_read * n + (table if tabled else 0)) * s
                eager.append(KernelTraffic(f"{name} ({x})", read, int(per_write * n) * s, int(flops * n)))
            local = ("dr", "dxa", "g1", "ndr", "g2")
            for reads, writes in EAGER_ACCESSES:
                eager_accesses.append(
                    tuple(tuple(f"{t}{x}" if t in local else t for t in ts) for ts in (reads, writes))
                )
            eager_between |= {f"{t}{x}": (n // 2 if t == "ndr" else n) * s for t in local}
        flops = sum(k.flops for k in unfused)
        read, written = (nq + nk + 2 * table) * s, (nq + nk) * s
        fused = KernelTraffic("rope backward dq and dk (fused)", read, written, flops)
        compiled = KernelTraffic("rope backward dq and dk (compiled)", read, written, flops)
        copy = KernelTraffic("copy dy into dq and dk", written, written, 0)
        in_place = KernelTraffic("rope backward in place (library)", read, written, flops)
        return {
            "fused": VariantLedger("fused", (fused,), tuple(removed), held),
            "unfused": VariantLedger("unfused", tuple(unfused), peak_bytes=live_peak(held, accesses, between)),
            "eager": VariantLedger("eager", tuple(eager), peak_bytes=live_peak(held, eager_accesses, eager_between)),
            "compiled": VariantLedger("compiled", (compiled,), tuple(removed), held),
            "library": VariantLedger("library", (copy, in_place), tuple(removed), held),
        }

    def forward_ledger(self, scn: Scenario, params: Params, dtype: str) -> dict[str, VariantLedger]:
        """The forward's ledger (no variant writes anything extra to save), with the torch rivals as the
        autograd-ready forward runs: eager its `EAGER_FORWARD` kernels, two for the rotation and a cat of q' and k'
        into y; compiled one call in which Inductor materialises rotate(x) for q and k (on the CPU it lowers every
        cat to a ConcatKernel, torch/_inductor/lowering.py `cat`) and then reads x, rotate(x) and the tables
        into y's heads (that cat's NonOwningLayout: no copy)."""
        s = np.dtype(dtype).itemsize
        nq, nk, table = sizes(params)
        kernels, accesses, between = [], [], {}
        for x, n in (("q", nq), ("k", nk)):
            for name, reads, writes, flops in EAGER_FORWARD:
                read = sum(table if t in ("cos", "sin") else int(HALF.get(t, 1) * n) for t in reads) * s
                kernels.append(KernelTraffic(f"{name} ({x})", read, int(HALF.get(writes, 1) * n) * s, int(flops * n)))
                named = [x if t == "x" else t if t in ("cos", "sin") else f"{t}{x}" for t in (*reads, writes)]
                accesses.append((named[:-1], named[-1:]))
            between |= {f"{t}{x}": int(HALF.get(t, 1) * n) * s for t in ("nx", "r", "a", "b", "yx")}
        kernels.append(KernelTraffic("cat q' and k' into y", (nq + nk) * s, (nq + nk) * s, 0))
        accesses.append((("yxq", "yxk"), ("y",)))
        held = (2 * (nq + nk) + 2 * table) * s  # q, k, y and both tables
        ledgers = dict(rope_ledger(params, dtype))
        ledgers["eager"] = VariantLedger("eager", tuple(kernels), peak_bytes=live_peak(held, accesses, between))
        n, flops = nq + nk, ledgers["fused"].flops
        compiled = KernelTraffic("rope q and k (compiled, rotate(x) stored)", (3 * n + 2 * table) * s, 2 * n * s, flops)
        ledgers["compiled"] = VariantLedger("compiled", (compiled,), peak_bytes=held + n * s)
        return ledgers
