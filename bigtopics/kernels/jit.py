"""How the per-document kernels are compiled.

numba's runtime counts references to every array a function holds. Where its pruning pass
cannot prove a pair of count updates redundant (a helper that takes arrays and branches or
loops, inlined or not) it emits an atomic increment and decrement for each array at every call:
in the samplers' token loop that was 22 pairs per draw, on arrays that all worker threads share,
and it cost more than the draw itself (440 ns per draw before, 200 ns after, Reuters, K = 100).

`document_kernel` compiles a function without the runtime (numba's `_nrt=False`, as numba does
for its own string kernels). Such a function cannot allocate or return arrays: it borrows the
arrays its caller (a driver compiled with the runtime, which allocates the scratch) owns, and
may only read, write and slice them.
"""

from numba import njit

document_kernel = njit(cache=True, _nrt=False)
