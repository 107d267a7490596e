"""Loading cached numba kernels without numba's whole compiler around them.

Before it looks into its on-disk cache, numba refreshes its target context: it imports
every module of implementations it could lower (NumPy, ``typed``, random, linear algebra,
about 60 of them) and installs their registries. A kernel found in the cache needs none of
that -- only the runtime (NRT) its machine code calls into -- yet a ``graphcep run`` paid
it on its critical path: on S2's triangle the first kernel loaded in 0.15 s, 0.08 s of it
the refresh.

:func:`lean_cache_loads` makes a cache hit skip the refresh and initialise the runtime
alone. A cache miss is unchanged: numba's compiler refreshes the context itself before it
compiles (``CompilerBase.__init__``), so a kernel compiled after a lean load is compiled
exactly as before. The ``graphcep`` command turns it on in the thread that loads the
kernels; a program importing graphcep as a library keeps numba's own behaviour unless it
calls this. When numba's cache class has not the shape this relies on (another numba
version), nothing is changed.

Examples
--------
>>> lean_cache_loads()
True
>>> lean_cache_loads()  # once per process
True
"""

from __future__ import annotations

import threading

_lock = threading.Lock()
_done: bool | None = None


def lean_cache_loads() -> bool:
    """Make numba's cache hits skip the target-context refresh; True when in effect."""
    global _done
    with _lock:
        if _done is None:
            _done = _install()
        return _done


def _install() -> bool:
    from numba.core import caching
    from numba.core.runtime import nrt

    cache = caching.Cache
    needed = ("load_overload", "_load_overload", "_guard_against_spurious_io_errors")
    if not all(hasattr(cache, name) for name in needed) or not hasattr(nrt, "rtsys"):
        return False

    def load_overload(self, sig, target_context):
        # what numba's own load_overload does, less the refresh: the runtime is the
        # one part of the context that loaded machine code needs
        nrt.rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)
        return None  # the guard swallowed an I/O error: numba then compiles

    cache.load_overload = load_overload
    return True
