"""A bench script (`bench/<name>.py`) loaded as a module, for the tests of its pure parts."""

import importlib.util
import os
import sys
import types

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")


def load_bench(name: str) -> types.ModuleType:
    """A fresh module of `bench/<name>.py`; `bench/` is on the path while it loads, as when the
    script runs, since it imports its siblings (load.py, baseline.py) by name."""
    sys.path.insert(0, BENCH)
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}",
                                                      os.path.join(BENCH, f"{name}.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(BENCH)
    return module
