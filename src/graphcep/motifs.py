"""δ-temporal motif counts of a stream: all 36 three-event motifs on at most 3 vertices.

Paranjape, Benson, Leskovec, "Motifs in Temporal Networks" (WSDM 2017), with SNAP's
``temporalmotifs`` semantics: an instance is any 3 events of the stream (a subsequence:
equal events are distinct) on at most 3 vertices, connected, whose times satisfy
``t3 - t1 <= δ`` (inclusive); self-loops are dropped. The counts come as SNAP's 6x6
table per δ (:mod:`graphcep.engines.motifs.layout`) with the two-node, star and
triangle totals, and, on request, per-vertex counts in Raphtory's 40-count layout.

δ is in the input's time unit: seconds, unless ``time_unit`` says ``"ms"`` or ``"us"``
(the times themselves are read as exact integer microseconds). Events with equal times
are ordered by the rule of :mod:`graphcep.engines.motifs.order`; it decides the cell of
an instance whose events tie, never whether it is counted, so the group totals do not
depend on it.

>>> import pyarrow as pa
>>> edges = pa.table({"t": [0, 1_000_000, 2_000_000], "src": ["a", "b", "c"],
...                   "dst": ["b", "c", "a"]})
>>> counts = count_motifs(edges, [1, 2])
>>> counts.totals["triangles"].tolist(), int(counts.tables[1, 1, 3])
([0, 1], 1)
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np
import pyarrow as pa

from graphcep.io.formats.schema import MAX_ABS_US, ReaderOptions
from graphcep.io.readers import read_edges

_US_PER = {"s": 1_000_000, "ms": 1_000, "us": 1}


def _decimal(delta: Any, unit: str) -> Decimal:
    try:
        return Decimal(str(delta).strip())
    except InvalidOperation:
        raise ValueError(f"δ must be a number of {unit}: {delta!r}") from None


def delta_to_us(delta: Any, unit: str = "s") -> int:
    """δ in ``unit`` as integer microseconds, exactly (ValueError when it is not)."""
    if unit not in _US_PER:
        raise ValueError(f"δ's unit must be s, ms or us, not {unit!r}")
    value = _decimal(delta, unit) * _US_PER[unit]
    if not value.is_finite() or value < 0 or value != value.to_integral_value():
        raise ValueError(f"δ must be a non-negative whole number of microseconds: {delta!r} {unit}")
    if value > MAX_ABS_US:  # times are int64 microseconds
        raise ValueError(f"δ is out of range: {delta!r} {unit} (at most {MAX_ABS_US:,} µs, "
                         "about 146,000 years)")
    return int(value)


def canonical_delta(delta: Any) -> str:
    """δ as its exact decimal, without sign, exponent, underscores or trailing zeros:
    ``"1_000"``, ``"1e3"`` and ``"1000.0"`` are ``"1000"``, ``"0.50"`` is ``"0.5"``
    (ValueError when it is no number)."""
    value = _decimal(delta, "s")
    if not value.is_finite():
        raise ValueError(f"δ must be a finite number: {delta!r}")
    return "0" if value == 0 else format(value.normalize(), "f")


def _json_number(text: str) -> int | float:
    """A canonical decimal as Python's number: an int when whole."""
    return int(text) if "." not in text else float(text)


@dataclass(frozen=True)
class MotifCounts:
    """Motif counts of one stream.

    Attributes
    ----------
    deltas : list[str]
        δ in ``unit``, each as its exact decimal (:func:`canonical_delta`).
    unit : str
        Unit of δ (``s``, ``ms`` or ``us``).
    tables : numpy.ndarray
        ``(len(deltas), 6, 6)`` int64, SNAP's layout.
    totals : dict[str, numpy.ndarray]
        ``two_node``, ``stars``, ``triangles``, ``all``: one int64 per δ.
    events : int
        Events counted (self-loops excluded); ``self_loops`` those dropped;
        ``rejected`` the malformed input lines the reader skipped, and ``rejects`` those
        lines (file, line number, reason, text) when files were read.
    vertices : list[str] | None
        With ``local=True``: vertex names, one per row of ``local``.
    local : numpy.ndarray | None
        ``(vertices, len(deltas), 40)`` int64 per-vertex counts in Raphtory's layout:
        24 stars centred on the vertex (pre, mid, post blocks of 8), 8 two-node motifs
        it is in, 8 triangles it is in; directions indexed ``4 d1 + 2 d2 + d3`` with
        ``d = 1`` for an event out of the vertex.
    """

    deltas: list[str]
    unit: str
    tables: np.ndarray
    totals: dict[str, np.ndarray]
    events: int
    self_loops: int
    rejected: int = 0
    vertices: list[str] | None = None
    local: np.ndarray | None = field(default=None, repr=False)
    rejects: pa.Table | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: one entry per δ with its table and totals; ``"delta"`` is a
        number (an int when whole, else the float nearest the exact decimal)."""
        out = self._head()
        out["deltas"] = [{"delta": _json_number(delta), **self._entry(i)}
                         for i, delta in enumerate(self.deltas)]
        return out

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text (one line), each ``"delta"`` written as its exact
        decimal (``0.00005``, never ``5e-05``)."""
        entries = ['{"delta": ' + delta + ", " + json.dumps(self._entry(i))[1:]
                   for i, delta in enumerate(self.deltas)]
        return json.dumps(self._head())[:-1] + ', "deltas": [' + ", ".join(entries) + "]}"

    def _head(self) -> dict[str, Any]:
        return {"unit": self.unit, "events": self.events,
                "self_loops_dropped": self.self_loops, "rejected_lines": self.rejected}

    def _entry(self, i: int) -> dict[str, Any]:
        """δ number ``i``'s table, totals and per-vertex counts (without δ itself)."""
        entry: dict[str, Any] = {"table": self.tables[i].tolist(),
                                 "totals": {k: int(v[i]) for k, v in self.totals.items()}}
        if self.local is not None and self.vertices is not None:
            entry["local"] = {v: self.local[j, i].tolist() for j, v in enumerate(self.vertices)}
        return entry


def count_motifs(
    edges: pa.Table | str | os.PathLike | list,
    deltas: list,
    *,
    time_unit: str | None = None,
    options: ReaderOptions | None = None,
    fmt: str | None = None,
    local: bool = False,
    spark: Any = None,
) -> MotifCounts:
    """Count the 36 δ-temporal motifs of a stream for every δ, in one pass.

    Parameters
    ----------
    edges
        An edge table (graphcep's schema: ``t`` int64 µs, ``src``, ``dst``) or file(s)
        for :func:`graphcep.io.readers.read_edges`.
    deltas
        Windows in ``time_unit`` (numbers or numeric strings, at least one).
    time_unit
        Unit of δ and of the files' plain-number times: ``s``, ``ms`` or ``us``. None
        (the default): δ in seconds, and the times as :func:`~graphcep.io.readers.read_edges`
        reads them without a unit -- seconds in text, a Parquet file's own unit (its
        ``graphcep.time_unit``, else microseconds for an integer ``t``). Give ``"s"`` for
        a Parquet file of integer seconds.
    options
        How to read files (:class:`~graphcep.io.formats.ReaderOptions`: ``time_format``
        ``"iso"`` or ``"auto"`` for ISO-8601 times, ``header``, ...). Its ``time_unit``,
        if set, is the same as ``time_unit`` or stands for it.
    fmt
        Input format of files (default: from the name).
    local
        Also count per vertex (Raphtory's layout, :attr:`MotifCounts.local`), in-process
        or on Spark.
    spark
        A SparkSession: count on Spark (:mod:`graphcep.runtime.motifs_spark`), the
        groups of each counter spread over its tasks, per-vertex counts added up by the
        driver; the same counts, tie rule included.
    """
    # the counters load here, not on import: every ``graphcep`` command imports this
    # module to register ``motifs``, and numba's import alone costs a run 0.15-0.2 s
    from graphcep.engines.motifs import count_stream, motif_stream
    from graphcep.engines.motifs.layout import group_totals

    if not len(deltas):
        raise ValueError("at least one δ is needed")
    options = _with_unit(options or ReaderOptions(), time_unit)
    time_unit = options.time_unit
    us = np.array([delta_to_us(d, time_unit or "s") for d in deltas], dtype=np.int64)
    rejects = None
    if not isinstance(edges, pa.Table):
        read = read_edges(edges, fmt, options)
        edges, rejects = read.edges, read.rejects
    t = edges.column("t").to_numpy()
    stream = motif_stream(t, edges.column("src").combine_chunks(),
                          edges.column("dst").combine_chunks())
    if spark is not None:
        from graphcep.runtime.motifs_spark import count_motifs_spark

        counted = count_motifs_spark(spark, stream, us, local=local)
    else:
        counted = count_stream(stream, us, local=local)
    return MotifCounts([canonical_delta(d) for d in deltas], time_unit or "s", counted.tables,
                       group_totals(counted.tables), len(stream.t),
                       edges.num_rows - len(stream.t),
                       0 if rejects is None else rejects.num_rows,
                       stream.names if local else None, counted.local, rejects)


def _with_unit(options: ReaderOptions, time_unit: str | None) -> ReaderOptions:
    """``options`` with ``time_unit`` (ValueError when they name two units)."""
    if time_unit is None or options.time_unit == time_unit:
        return options
    if options.time_unit is not None:
        raise ValueError(f"time_unit {time_unit!r} and options.time_unit "
                         f"{options.time_unit!r} differ: δ and the times share one unit")
    return dataclasses.replace(options, time_unit=time_unit)


__all__ = ["MotifCounts", "canonical_delta", "count_motifs", "delta_to_us"]
