import os
import sys

# Tests must not depend on how many cores the machine has.
os.environ.setdefault("NUMBA_NUM_THREADS", "2")
# `import naive` and `from . import naive` both find tests/naive.py.
sys.path.insert(0, os.path.dirname(__file__))
