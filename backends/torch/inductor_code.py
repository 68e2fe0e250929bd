"""What Inductor made of a decomposition, read from the Python module it generated for the compiled graph.

The module Inductor writes (its "output code") defines one function per generated kernel (C++/OpenMP on the
CPU, `async_compile.cpp_pybinding`; Triton on CUDA, `async_compile.triton`) and a `call` that launches them,
calls library kernels (`extern_kernels.mm`, an aten op) and allocates the buffers that live between kernels
(`empty_strided_cpu` / `empty_strided_cuda`). Counting those answers the question a performance engineer asks
of the compiler: how many kernels did it launch, and did a full-size intermediate still reach memory?

A buffer counts as full-size when it holds at least as many elements as the case's largest tensor (its
largest input or its output, `Compiled.full_elements`): a stored elementwise intermediate, a normalised matrix,
attention's L×L scores. Row statistics, a per-token loss or max beside cross-entropy's tokens×vocab logits, and
other small buffers are listed but not counted.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

DEFINED = re.compile(r"^(\w+) = async_compile\.(?:cpp_pybinding|cpp|triton)\(", re.M)
EXTERN = re.compile(r"\b(extern_kernels\.\w+|torch\.ops\.\w+\.\w+(?:\.\w+)?|aten\.\w+(?:\.\w+)?)\(")
ALLOC = re.compile(r"^\s*(buf\w*) = empty_strided_\w+\(\(([\d, ]*)\),")


@dataclass(frozen=True)
class Generated:
    """The kernels and buffers of one or more generated modules (a graph break makes more than one)."""

    kernels: tuple[str, ...] = ()
    """Inductor's own kernels, in the order `call` launches them."""
    extern: tuple[str, ...] = ()
    """Library kernels `call` invokes (a matmul, a convolution, an aten fallback)."""
    buffers: tuple[tuple[int, ...], ...] = field(default=())
    """Shapes of the buffers `call` allocates between kernels (the output the caller passed is not one)."""

    def full_size(self, full_elements: int) -> list[tuple[int, ...]]:
        return [shape for shape in self.buffers if math.prod(shape) >= full_elements]

    def notes(self, full_elements: int) -> dict[str, Any]:
        """The row's `extra.compiler` record; `full_elements`: the case's largest tensor's elements."""
        full = self.full_size(full_elements)
        largest = max(self.buffers, key=math.prod, default=None)
        return {
            "kernels": len(self.kernels) + len(self.extern),
            "generated": list(self.kernels),
            "extern": list(self.extern),
            "full_size_intermediates": len(full),
            "largest_intermediate": list(largest) if largest is not None else [],
            "buffer_elements": sum(math.prod(shape) for shape in self.buffers),
        }


def read(codes: Iterable[str]) -> Generated:
    """The kernels launched, library calls made and buffers allocated by the `call` of each module in `codes`."""
    kernels: list[str] = []
    extern: list[str] = []
    buffers: list[tuple[int, ...]] = []
    for code in codes:
        defined = set(DEFINED.findall(code))
        body = _call_body(code)
        for line in body.splitlines():
            if alloc := ALLOC.match(line):
                buffers.append(tuple(int(d) for d in alloc.group(2).replace(" ", "").split(",") if d))
                continue
            launched = re.match(r"\s*(\w+)(?:\.run)?\(", line)
            if launched and launched.group(1) in defined:
                kernels.append(launched.group(1))
            extern += EXTERN.findall(line)
    return Generated(tuple(kernels), tuple(extern), tuple(buffers))


def _call_body(code: str) -> str:
    """The source of the generated `call` (a method of `Runner` in newer torch, a module function before)."""
    start = re.search(r"^([ \t]*)def call\((?:self, )?args\):\n", code, re.M)
    if start is None:
        return ""
    indent, lines = len(start.group(1)), []
    for line in code[start.end() :].splitlines():
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        lines.append(line)
    return "\n".join(lines)
