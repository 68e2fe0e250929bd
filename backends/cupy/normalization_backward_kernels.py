"""The CUDA C of CuPy's normalization training step: the forward that also writes the row statistics, the fused
backward row pass with its float32 partial rows, their sum, and the unfused backward's step templates.

Kernel text apart from the entries that compile and launch it (`backends.cupy.normalization_backward`), in the
forward's conventions (`backends.cupy.normalization_kernels`): a block of THREADS threads owns a row and a chunk
of BLOCK columns, ITEMS = BLOCK / THREADS values per thread in registers (compile-time constants),
`__launch_bounds__(THREADS, 1)`, the forward's warp-shuffle block reductions and float16 conversions, 64-bit
offsets. Templates are `string.Template`s ($NAME), so the C braces stay as they are.

The fused backward runs one block per block of rows (`partials(rows)`): dweight (dbias) over every row cannot
be summed in one kernel without atomics, so each block keeps the sum over its own rows as a float32 partial row
and the second, small kernel (`SUM_PARTIALS`) adds the partial rows up — the partials' bytes are in the ledger.
A row of one chunk keeps its partial in registers and stores it once; a wider row adds into the block's own
partial row in memory chunk by chunk (each column always the same thread's: no atomics, no race). g = dy·w is
an explicitly rounded product (__fmul_rn): contracted into g − Σg/n as an FMA, the exact product would leave
g's rounding in a difference that is 0 for one column.
"""

from __future__ import annotations

from string import Template

from backends.cupy.device import CONVERSIONS, CTYPES
from backends.cupy.normalization_kernels import REDUCTIONS
from suite.kit.launch import cdiv

ROW_MACROS = r"""
    #define VALID(k, start) (threadIdx.x + (k) * $THREADS < $BLOCK && (start) + threadIdx.x + (k) * $THREADS < cols)
    #define COL(k, start) ((start) + threadIdx.x + (k) * $THREADS)
    #define EACH for (int k = 0; k < $ITEMS; ++k)
    const long long chunks = (cols + $BLOCK - 1) / $BLOCK;
"""
"""Item k of the chunk at `start`: whether it is in the row, its column; the row's chunks."""


def _row_template(text: str) -> Template:
    """A row kernel's template, with ROW_MACROS where it says $ROW_MACROS."""
    return Template(text.replace("$ROW_MACROS", ROW_MACROS))


FORWARD_SAVING = _row_template(r"""
#define CENTRED $CENTRED
extern "C" __global__ void __launch_bounds__($THREADS, 1)
$name(const $T* __restrict__ x, const $T* __restrict__ w, const $T* __restrict__ b, $T* __restrict__ y,
      float* __restrict__ mean_out, float* __restrict__ rstd_out, long long cols) {
    __shared__ float smem[32];
    const long long row = (long long)blockIdx.x * cols;
    float v[$ITEMS];
$ROW_MACROS
    float mean = 0.0f, m2 = 0.0f, count = 0.0f;
    for (long long i = 0; i < chunks; ++i) {  // one chunk when cols <= BLOCK: then v[] is the row
        const long long start = i * $BLOCK;
        float s = 0.0f, q = 0.0f;
        #pragma unroll
        EACH { v[k] = VALID(k, start) ? load(x + row + COL(k, start)) : 0.0f; s += v[k]; q += v[k] * v[k]; }
#if CENTRED
        const float n = (float)min((long long)$BLOCK, cols - start);
        const float mean_c = block_sum(s, smem) / n;
        q = 0.0f;
        #pragma unroll
        EACH { const float d = VALID(k, start) ? v[k] - mean_c : 0.0f; q += d * d; }
        const float m2_c = block_sum(q, smem), total = count + n, delta = mean_c - mean;
        mean += delta * (n / total);  // Chan et al.; exact for the first chunk
        m2 += m2_c + delta * delta * (count * n / total);
        count = total;
#else
        m2 += block_sum(q, smem);
#endif
    }
    const float rstd = 1.0f / sqrtf(m2 / (float)cols + EPS);
    if (threadIdx.x == 0) {
        rstd_out[blockIdx.x] = rstd;
#if CENTRED
        mean_out[blockIdx.x] = mean;
#endif
    }
#if CENTRED
    #define OUT(val, c) (((val) - mean) * rstd * load(w + (c)) + load(b + (c)))
#else
    #define OUT(val, c) ((val) * rstd * load(w + (c)))
#endif
    if (chunks == 1) {
        #pragma unroll
        EACH if (VALID(k, 0)) store(y + row + COL(k, 0), OUT(v[k], COL(k, 0)));
        return;
    }
    for (long long start = 0; start < cols; start += $BLOCK) {  // the re-read
        #pragma unroll
        EACH if (VALID(k, start)) {
            const long long c = COL(k, start);
            store(y + row + c, OUT(load(x + row + c), c));
        }
    }
}
""")

BACKWARD_ROWS = _row_template(r"""
#define CENTRED $CENTRED
extern "C" __global__ void __launch_bounds__($THREADS, 1)
$name(const $T* __restrict__ x, const $T* __restrict__ dy, const $T* __restrict__ w,
      const float* __restrict__ mean, const float* __restrict__ rstd, $T* __restrict__ dx,
      float* __restrict__ pw, float* __restrict__ pb, long long rows, long long cols) {
    __shared__ float smem[32];
    float h[$ITEMS], g[$ITEMS], accw[$ITEMS], accb[$ITEMS];
$ROW_MACROS
    const long long per = (rows + gridDim.x - 1) / gridDim.x, part = (long long)blockIdx.x * cols;
    const long long first = (long long)blockIdx.x * per, last = min(rows, first + per);
    const float n = (float)cols;
    #pragma unroll
    EACH { accw[k] = 0.0f; accb[k] = 0.0f; }
    if (chunks > 1) {
        for (long long c = threadIdx.x; c < cols; c += $THREADS) {
            pw[part + c] = 0.0f;
            if (CENTRED) pb[part + c] = 0.0f;
        }
    }
    for (long long r = first; r < last; ++r) {
        const long long row = r * cols;
        const float rs = rstd[r], mu = CENTRED ? mean[r] : 0.0f;
        float s1 = 0.0f, s2 = 0.0f;
        for (long long start = 0; start < cols; start += $BLOCK) {
            #pragma unroll
            EACH if (VALID(k, start)) {
                const long long c = COL(k, start);
                const float d = load(dy + row + c);
                h[k] = (load(x + row + c) - mu) * rs;
                g[k] = __fmul_rn(d, load(w + c));
                s1 += g[k];
                s2 += g[k] * h[k];
                if (chunks == 1) {
                    accw[k] += d * h[k];
                    accb[k] += d;
                } else {
                    pw[part + c] += d * h[k];
                    if (CENTRED) pb[part + c] += d;
                }
            }
        }
        const float a = CENTRED ? block_sum(s1, smem) / n : 0.0f, m = block_sum(s2, smem) / n;
        for (long long start = 0; start < cols; start += $BLOCK) {
            #pragma unroll
            EACH if (VALID(k, start)) {
                const long long c = COL(k, start);
                if (chunks > 1) {  // the re-read
                    h[k] = (load(x + row + c) - mu) * rs;
                    g[k] = __fmul_rn(load(dy + row + c), load(w + c));
                }
                store(dx + row + c, rs * (g[k] - a - h[k] * m));
            }
        }
    }
    if (chunks == 1) {
        #pragma unroll
        EACH if (VALID(k, 0)) {
            pw[part + COL(k, 0)] = accw[k];
            if (CENTRED) pb[part + COL(k, 0)] = accb[k];
        }
    }
}
""")

SUM_PARTIALS = Template(r"""
#define CENTRED $CENTRED
extern "C" __global__ void __launch_bounds__($THREADS, 1)
$name(const float* __restrict__ pw, const float* __restrict__ pb, $T* __restrict__ dw, $T* __restrict__ db,
      long long blocks, long long cols) {
    const long long c = (long long)blockIdx.x * $THREADS + threadIdx.x;
    if (c >= cols) return;
    float accw = 0.0f, accb = 0.0f;
    for (long long b = 0; b < blocks; ++b) {
        accw += pw[b * cols + c];
        if (CENTRED) accb += pb[b * cols + c];
    }
    store(dw + c, accw);
    if (CENTRED) store(db + c, accb);
}
""")

SOFTMAX_BACKWARD = _row_template(r"""
extern "C" __global__ void __launch_bounds__($THREADS, 1)
$name(const $T* __restrict__ y, const $T* __restrict__ dy, $T* __restrict__ dx, long long cols) {
    __shared__ float smem[32];
    const long long row = (long long)blockIdx.x * cols;
    float yv[$ITEMS], dv[$ITEMS];
$ROW_MACROS
    float s = 0.0f;
    for (long long start = 0; start < cols; start += $BLOCK) {
        #pragma unroll
        EACH if (VALID(k, start)) {
            yv[k] = load(y + row + COL(k, start));
            dv[k] = load(dy + row + COL(k, start));
            s += yv[k] * dv[k];
        }
    }
    s = block_sum(s, smem);
    for (long long start = 0; start < cols; start += $BLOCK) {
        #pragma unroll
        EACH if (VALID(k, start)) {
            const long long c = COL(k, start);
            if (chunks > 1) {  // the re-read
                yv[k] = load(y + row + c);
                dv[k] = load(dy + row + c);
            }
            store(dx + row + c, yv[k] * (dv[k] - s));
        }
    }
}
""")

# The unfused backward's templates: one kernel per step of BACKWARD_DECOMPOSITIONS (`scale` is the forward's). --

COLUMN_SUM = Template(r"""
extern "C" __global__ void __launch_bounds__($THREADS, 1)
$name(const $T* __restrict__ a, const $T* __restrict__ b, $T* __restrict__ out, long long rows, long long cols) {
    const long long c = (long long)blockIdx.x * $THREADS + threadIdx.x;
    if (c >= cols) return;
    float acc = 0.0f;
    for (long long r = 0; r < rows; ++r) acc += $TERM;
    store(out + c, acc);
}
""")
"""out[j] = Σ_rows a (or a·b), a column per thread, down every row in float32."""

ROW_REDUCE = Template(r"""
extern "C" __global__ void __launch_bounds__($THREADS, 1)
$name(const $T* __restrict__ a, const $T* __restrict__ b, float* __restrict__ stat, long long cols) {
    __shared__ float smem[32];
    const long long row = (long long)blockIdx.x * cols;
    float acc = 0.0f;
    for (long long c = row + threadIdx.x; c < row + cols; c += $THREADS) acc += $TERM;
    acc = block_sum(acc, smem);
    if (threadIdx.x == 0) stat[blockIdx.x] = $FINISH;
}
""")
"""stat[row] = sum or mean of a (or a·b) over the row: a strided loop, then the block's."""

ELEMENTWISE = Template(r"""
extern "C" __global__ void __launch_bounds__($THREADS, 1)
$name($PARAMS, $T* __restrict__ out, long long cols) {
    const long long row = (long long)blockIdx.x * cols, start = (long long)blockIdx.y * $BLOCK;
    $PREPARE
    for (int k = 0; k < $ITEMS; ++k) {
        const long long c = start + threadIdx.x + k * $THREADS;
        if (threadIdx.x + k * $THREADS < $BLOCK && c < cols) store(out + row + c, $EXPR);
    }
}
""")
ELEMENTWISE_OPS = {
    "product": ("const $T* __restrict__ a, const $T* __restrict__ b", "", "load(a + row + c) * load(b + row + c)"),
    "layernorm_dx": (
        "const $T* __restrict__ g, const $T* __restrict__ h, const float* __restrict__ stat, "
        "const float* __restrict__ m1, const float* __restrict__ m2",
        "const float rs = 1.0f / sqrtf(stat[blockIdx.x] + EPS), a = m1[blockIdx.x], m = m2[blockIdx.x];",
        "rs * (load(g + row + c) - a - load(h + row + c) * m)",
    ),
    "rmsnorm_dx": (
        "const $T* __restrict__ g, const $T* __restrict__ h, const float* __restrict__ stat, "
        "const float* __restrict__ m2",
        "const float rs = 1.0f / sqrtf(stat[blockIdx.x] + EPS), m = m2[blockIdx.x];",
        "rs * (load(g + row + c) - load(h + row + c) * m)",
    ),
    "softmax_dx": (
        "const $T* __restrict__ y, const $T* __restrict__ dy, const float* __restrict__ s",
        "const float sr = s[blockIdx.x];",
        "load(y + row + c) * (load(dy + row + c) - sr)",
    ),
}
"""op -> (input parameters, per-row prepared values, output expression at column c) on a (rows, chunks) grid;
rstd from the row's variance (mean square) as the forward's normalise computes it."""


def _shape(dtype: str, block: int, threads: int) -> dict[str, object]:
    return {"T": CTYPES[dtype], "BLOCK": block, "THREADS": threads, "ITEMS": cdiv(block, threads)}


def _source(body: str) -> str:
    return CONVERSIONS + REDUCTIONS + body


def fused_source(kernel: str, op: str, dtype: str, block: int, threads: int) -> tuple[str, str]:
    """(CUDA source, kernel name) of a fused kernel: "forward_saving", "backward_rows" or "sum_partials" of
    layernorm (CENTRED) or rmsnorm, or softmax's "softmax_backward"."""
    name = f"{kernel if kernel.startswith(op) else f'{op}_{kernel}'}_{dtype}_b{block}_t{threads}"
    template = {"forward_saving": FORWARD_SAVING, "backward_rows": BACKWARD_ROWS, "sum_partials": SUM_PARTIALS,
                "softmax_backward": SOFTMAX_BACKWARD}[kernel]  # fmt: skip
    body = template.substitute(name=name, CENTRED=int(op == "layernorm"), **_shape(dtype, block, threads))
    return _source(body), name


def step_source(op: str, dtype: str, block: int, threads: int, pair: bool = False) -> tuple[str, str]:
    """(CUDA source, kernel name) of one step of BACKWARD_DECOMPOSITIONS other than `scale` (the forward's);
    `pair`: a column sum or row mean of a product of two matrices."""
    pair = pair and op in ("colsum", "row_mean", "row_sum")  # the elementwise steps have their inputs fixed
    name = f"{op}{'_pair' if pair else ''}_backward_step_{dtype}_b{block}_t{threads}"
    shape = {"name": name, **_shape(dtype, block, threads)}
    if op == "colsum":
        term = "load(a + r * cols + c) * load(b + r * cols + c)" if pair else "load(a + r * cols + c)"
        return _source(COLUMN_SUM.substitute(TERM=term, **shape)), name
    if op in ("row_mean", "row_sum"):
        term = "load(a + c) * load(b + c)" if pair else "load(a + c)"
        finish = "acc / (float)cols" if op == "row_mean" else "acc"
        return _source(ROW_REDUCE.substitute(TERM=term, FINISH=finish, **shape)), name
    params, prepare, expr = ELEMENTWISE_OPS[op]
    params = Template(params).substitute(shape)
    return _source(ELEMENTWISE.substitute(PARAMS=params, PREPARE=prepare, EXPR=expr, **shape)), name
