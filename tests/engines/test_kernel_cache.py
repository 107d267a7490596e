"""Lean loads of cached numba kernels: a cache hit skips numba's context refresh, a cache
miss still compiles, and both give the kernel's true results."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.paths import ROOT

SRC = ROOT / "src"

KERNEL = textwrap.dedent("""
    import numba as nb
    import numpy as np

    @nb.njit(cache=True)
    def cumulative(values):
        out = np.empty_like(values)  # allocates: needs numba's runtime
        total = 0
        for i in range(values.size):
            total += values[i]
            out[i] = total
        return out
""")

CALLER = textwrap.dedent("""
    import sys
    import numpy as np
    from graphcep.engines.kernel_cache import lean_cache_loads
    if sys.argv[1] == "lean":
        assert lean_cache_loads()
    import kernel_under_test
    values = np.arange(1, 200_001, dtype=np.int64) % 97
    got = kernel_under_test.cumulative(values)
    assert got.tolist() == np.cumsum(values).tolist()
    print(len(kernel_under_test.cumulative.stats.cache_hits),
          len(kernel_under_test.cumulative.stats.cache_misses),
          "numba.np.linalg" in sys.modules)
""")


def _call(tmp_path: Path, mode: str) -> list[str]:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(SRC)])}
    done = subprocess.run([sys.executable, "-c", CALLER, mode], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_miss_compiles_and_a_hit_loads_without_the_refresh(tmp_path: Path) -> None:
    (tmp_path / "kernel_under_test.py").write_text(KERNEL)
    # a lean process meeting an empty cache compiles (with numba's full context)
    assert _call(tmp_path, "lean") == ["0", "1", "True"]
    # the next lean process loads the machine code alone: no implementation modules
    assert _call(tmp_path, "lean") == ["1", "0", "False"]
    # numba's own load refreshes the context: the difference is the lean load's doing
    assert _call(tmp_path, "plain") == ["1", "0", "True"]
