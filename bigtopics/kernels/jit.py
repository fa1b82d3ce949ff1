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

The drivers above the per-worker functions are njit(parallel=True), one prange loop over static
ranges of documents (one per worker), with no nogil=True and no cache; everything below them is
cached. They release the GIL all the same while their prange loops run: numba's wrapper of a
parallel loop calls PyEval_SaveThread before it hands the loop to the worker threads, and takes
the GIL back after. So another Python thread (the trainer's read-ahead) runs while documents are
sampled; a driver's serial code outside its prange loops holds the GIL.
"""

from numba import njit

document_kernel = njit(cache=True, _nrt=False)
