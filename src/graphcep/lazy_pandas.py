"""pyarrow without pandas until something needs pandas.

pyarrow imports pandas (a sixth of a second) the first time it converts any Python or
NumPy value -- ``pa.array``, ``pa.scalar``, ``fill_null`` -- only to ask whether the value
is a pandas object. A SAL run never hands it one, so the ``graphcep`` command answers that
first question with "no pandas" (:func:`defer_pandas`), and tells pyarrow that pandas is
there as soon as anything imports it (DDST reports, vertex features, PySpark): pyarrow then
treats pandas objects exactly as it would have.

Examples
--------
>>> import sys
>>> defer_pandas()  # does nothing once pandas is imported (as under the doctests)
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType


class _NoPandas(importlib.abc.MetaPathFinder):
    """Refuses ``import pandas`` while installed: pyarrow's first probe finds none."""

    def find_spec(self, name: str, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas deferred")
        return None


class _TellArrow(importlib.abc.MetaPathFinder):
    """On the first ``import pandas``: import it as usual, then let pyarrow know."""

    def find_spec(self, name: str, path=None, target=None):
        if name != "pandas":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            sys.modules[name] = module
            _arrow_sees_pandas()

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _arrow_sees_pandas() -> None:
    """pyarrow retries its pandas import when asked for pandas itself (``.pd``)."""
    import pyarrow as pa

    pa.lib._pandas_api.pd  # noqa: B018 -- the property access does the import


def defer_pandas() -> None:
    """Let pyarrow's first conversion run without importing pandas (see the module
    docstring); nothing when pandas is imported already."""
    if "pandas" in sys.modules:
        return
    import numpy as np
    import pyarrow as pa

    blocker = _NoPandas()
    sys.meta_path.insert(0, blocker)
    try:
        # pyarrow's probes, each made once: is a NumPy value a pandas object; which
        # pandas scalars (NA, NaT, Timestamp) a Python sequence may hold. graphcep never
        # hands pyarrow pandas scalars in a sequence, so the second answer stays "none"
        pa.array(np.zeros(0, np.int64))
        pa.array([0])
    finally:
        sys.meta_path.remove(blocker)
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _TellArrow())
