"""tl.dot on bfloat16 tiles in Triton's interpreter, multiplied as numbers rather than as bit patterns.

The interpreter stores bfloat16 as uint16 (NumPy has no bfloat16) and its `create_dot` hands those arrays to
np.matmul as they are, widening only 8-bit floats first: a bfloat16 tile is multiplied as the integers its bits
spell, and every kernel with a tl.dot (matmul, attention) gives results ~1e13 off. On a GPU the same kernels use
bfloat16 tensor-core MMAs with float32 accumulation. `install` widens bfloat16 operands to float32 (exact: a
bfloat16 is the top half of a float32) before the interpreter's own dot, so their numerics can be checked in
emulation like float16's. Installed only where the interpreter runs, and only over the method it was written
for: a Triton whose builder differs is left as it is (its bfloat16 dot rows then show the mismatch).
"""

from __future__ import annotations

import inspect

import numpy as np


def install() -> bool:
    """Wrap the interpreter builder's create_dot; True where it was wrapped (or already had been)."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return False
    builder = getattr(interpreter, "InterpreterBuilder", None)
    original = getattr(builder, "create_dot", None)
    if original is None or not hasattr(interpreter, "TensorHandle"):
        return False
    if getattr(original, "_widens_bfloat16", False):
        return True
    if list(inspect.signature(original).parameters)[:4] != ["self", "a", "b", "d"]:
        return False

    def widened(handle):
        if handle.dtype.scalar != tl.bfloat16:
            return handle
        bits = np.asarray(handle.data).astype(np.uint32) << 16
        return interpreter.TensorHandle(bits.view(np.float32), tl.float32)

    def create_dot(self, a, b, d, *args, **kwargs):
        return original(self, widened(a), widened(b), d, *args, **kwargs)

    create_dot._widens_bfloat16 = True
    builder.create_dot = create_dot
    return True
