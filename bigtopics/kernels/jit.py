"""How the per-document kernels are compiled.

numba's runtime counts references to every array a function holds. Where its pruning pass
cannot prove a pair of count updates redundant (a helper that takes arrays and branches or
loops, inlined or not) it emits an atomic increment and decrement for each array at every call:
in the samplers' token loop that was 22 pairs per draw, on arrays that all worker threads share,
and it cost more than the draw itself (440 ns per draw before, 200 ns after, Reuters, K = 100).

`document_kernel` compiles a function without the runtime (numba's `_nrt=False`, as numba does
for its own string kernels). Such a function cannot allocate or return arrays: it borrows the
arrays its caller owns (a per-worker function compiled with the runtime, which allocates the
scratch of kernels/doc_state.py), and may only read, write and slice them.

Above the per-worker functions sit Python drivers that cut the documents into pieces and hand
them to the threads of kernels/pieces.py; a per-worker function is one piece, compiled
njit(cache=True, nogil=True), so it is cached like everything below it and runs without the GIL
(another Python thread, the trainer's read-ahead, runs while documents are sampled). The
drivers' own Python code between the pieces holds the GIL.
"""

from numba import njit

document_kernel = njit(cache=True, _nrt=False)
