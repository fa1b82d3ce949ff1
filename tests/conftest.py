import os

# Tests must not depend on how many cores the machine has.
os.environ.setdefault("NUMBA_NUM_THREADS", "2")
