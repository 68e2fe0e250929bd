"""The two kernels the CUDA timer launches itself, as PTX the driver compiles for whichever GPU is there.

- `fusebench_read_flush` reads a buffer twice the size of L2 (`ld.global.cg`: through L2, not L1), so the next
  repetition starts with an L2 holding only clean lines of that buffer. A memset would also evict the kernel's
  data, but leave L2 full of dirty lines that the timed kernel then pays to write back: a small kernel right
  after a memset flush measures the write-back, not itself.
- `fusebench_spin` waits on the GPU's global timer for a given number of nanoseconds. Queued before the start
  event, it keeps the GPU busy while the host enqueues a variant's kernels, so the events time the kernels and
  not Python's dispatch between them (an unfused chain of many short kernels would otherwise measure the host).

Both are tiny and have no dependencies beyond the driver: they are checked by ptxas for sm_90 in the tests,
without a GPU.
"""

from __future__ import annotations

READ_FLUSH = "fusebench_read_flush"
SPIN = "fusebench_spin"
SINK_MAGIC = 0x9E3779B9
"""The read flush stores its checksum only if it equals this; the buffer is zeros, so it never does, but the
compiler cannot know that and must keep every load."""

PTX = f"""
.version 7.0
.target sm_80
.address_size 64

.visible .entry {READ_FLUSH}(
    .param .u64 buf,
    .param .u64 vectors,
    .param .u64 sink
)
{{
    .reg .pred %p<3>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<12>;

    ld.param.u64 %rd1, [buf];
    ld.param.u64 %rd2, [vectors];
    ld.param.u64 %rd3, [sink];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %nctaid.x;
    mul.wide.u32 %rd4, %r1, %r2;
    cvt.u64.u32 %rd5, %r3;
    add.u64 %rd4, %rd4, %rd5;
    mul.wide.u32 %rd6, %r4, %r2;
    mov.u32 %r5, 0;
    setp.ge.u64 %p1, %rd4, %rd2;
    @%p1 bra DONE;
LOOP:
    shl.b64 %rd7, %rd4, 4;
    add.u64 %rd8, %rd1, %rd7;
    ld.global.cg.v4.u32 {{%r6, %r7, %r8, %r9}}, [%rd8];
    xor.b32 %r5, %r5, %r6;
    xor.b32 %r5, %r5, %r7;
    xor.b32 %r5, %r5, %r8;
    xor.b32 %r5, %r5, %r9;
    add.u64 %rd4, %rd4, %rd6;
    setp.lt.u64 %p2, %rd4, %rd2;
    @%p2 bra LOOP;
DONE:
    setp.ne.u32 %p1, %r5, {SINK_MAGIC};
    @%p1 bra END;
    cvta.to.global.u64 %rd9, %rd3;
    st.global.u32 [%rd9], %r5;
END:
    ret;
}}

.visible .entry {SPIN}(
    .param .u64 ns
)
{{
    .reg .pred %p<2>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [ns];
    mov.u64 %rd2, %globaltimer;
SPIN_LOOP:
    mov.u64 %rd3, %globaltimer;
    sub.u64 %rd4, %rd3, %rd2;
    setp.lt.u64 %p1, %rd4, %rd1;
    @%p1 bra SPIN_LOOP;
    ret;
}}
"""

FLUSH_THREADS = 256
FLUSH_BLOCKS_PER_SM = 4


def flush_grid(vectors: int, sms: int) -> int:
    """Blocks of the read flush: enough to fill every SM a few times over, no more than there are vectors."""
    per_block = FLUSH_THREADS
    return max(1, min(sms * FLUSH_BLOCKS_PER_SM, -(-vectors // per_block)))
