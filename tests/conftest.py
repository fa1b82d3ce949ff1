import os
import sys

# Tests must not depend on how many cores the machine has.
os.environ.setdefault("NUMBA_NUM_THREADS", "2")
# `import naive` and `from . import naive` both find tests/naive.py.
sys.path.insert(0, os.path.dirname(__file__))


def pytest_addoption(parser):
    parser.addoption("--record-golden", action="store_true",
                     help="rewrite tests/golden_models.json from this code's models (test_golden_models.py)")
