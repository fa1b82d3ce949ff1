"""numba kernels: plain functions over NumPy arrays, one small module per job."""
