"""graphcep: online pattern matching over streaming temporal graphs.

The Python API (:mod:`graphcep.api`) is here, loaded on first use so that ``import
graphcep`` (and the command line's start-up) stays cheap::

    import graphcep
    q = graphcep.load("triangle.sal")            # or graphcep.parse(text, kind="sal")
    print(q.explain())
    matches = q.match(df, src="sender", dst="receiver", time="ts")
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

from graphcep import timing as _timing  # noqa: E402,F401 -- its clock starts at the first import

__all__ = ["Query", "load", "parse", "__version__"]

_API = frozenset({"Query", "load", "parse"})


def __getattr__(name: str) -> Any:
    """``graphcep.load``, ``graphcep.parse`` and ``graphcep.Query``, imported on first use."""
    if name in _API:
        # by name: the package is fully imported by now, so the API's own imports (which
        # go through this package) form no circle
        import importlib

        return getattr(importlib.import_module("graphcep.api"), name)
    raise AttributeError(f"module 'graphcep' has no attribute {name!r}")
