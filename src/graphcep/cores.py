"""How many cores this process may use.

``os.cpu_count()`` counts the machine's cores; a process pinned to fewer (``taskset``, a
container's CPU set, a batch scheduler) that starts a thread per counted core only makes
them queue. Every engine, pool and Spark session graphcep sizes from the machine asks
:func:`usable_cores` instead.

>>> usable_cores() >= 1
True
"""

from __future__ import annotations

import os


def usable_cores() -> int:
    """The cores in this process's affinity mask (``os.cpu_count()`` where the OS keeps
    none), at least 1."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1
