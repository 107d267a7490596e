"""What the three DDST engines share: the query and a window as arrays, label fits,
Algorithm DDST on a window graph, and a pushed batch as engine columns.

The semantics (labels, Definitions 1-2, windows, reporting) are stated once, in
:mod:`graphcep.engines.ddst.baseline`; the report rows in :mod:`graphcep.engines.ddst.reports`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.engines.base import numbered_batch
from graphcep.engines.ddst import kernel
from graphcep.patterns.ddst import DDSTQuery

LABEL_COLUMNS = ("label", "src_label", "dst_label")
INT_MIN = np.iinfo(np.int64).min
INT_MAX = np.iinfo(np.int64).max


# -- the query and the window as arrays ------------------------------------------------


@dataclass(frozen=True)
class IndexedQuery:
    """A :class:`DDSTQuery` as index arrays: query vertices ``0..nv-1``, edges ``0..ne-1``."""

    vnames: tuple[str, ...]
    enames: tuple[str, ...]
    vlabels: tuple[str | None, ...]
    elabels: tuple[str | None, ...]
    qsrc: np.ndarray
    qdst: np.ndarray
    out_q: tuple[tuple[int, ...], ...]
    in_q: tuple[tuple[int, ...], ...]
    topo: tuple[int, ...]
    pre: tuple[tuple[int, ...], ...]
    post: tuple[tuple[int, ...], ...]
    arrays: tuple[np.ndarray, ...] = ()  #: the above for the compiled kernel (kernel.ddst)


def index_query(query: DDSTQuery) -> IndexedQuery:
    vidx = {n: i for i, n in enumerate(query.vertex_names)}
    eidx = {n: i for i, n in enumerate(query.edge_names)}
    qsrc = np.array([vidx[e.src] for e in query.edges], dtype=np.int64)
    qdst = np.array([vidx[e.dst] for e in query.edges], dtype=np.int64)
    pre_names, post_names = query.predecessors(), query.successors()
    pre = tuple(tuple(eidx[p] for p in pre_names[e]) for e in query.edge_names)
    post = tuple(tuple(eidx[s] for s in post_names[e]) for e in query.edge_names)
    out_q = tuple(tuple(np.flatnonzero(qsrc == u).tolist()) for u in range(len(vidx)))
    in_q = tuple(tuple(np.flatnonzero(qdst == u).tolist()) for u in range(len(vidx)))
    topo = tuple(eidx[e] for e in query.topological_order())
    arrays = (qsrc, qdst, np.array(topo, dtype=np.int64),
              *kernel.csr(pre), *kernel.csr(post), *kernel.csr(out_q), *kernel.csr(in_q))
    return IndexedQuery(
        vnames=query.vertex_names,
        enames=query.edge_names,
        vlabels=tuple(v.label for v in query.vertices),
        elabels=tuple(e.label for e in query.edges),
        qsrc=qsrc,
        qdst=qdst,
        out_q=out_q,
        in_q=in_q,
        topo=topo,
        pre=pre,
        post=post,
        arrays=arrays,
    )


@dataclass(frozen=True)
class WindowGraph:
    """A window's edges; vertices, ``(id, label)`` pairs, are numbered ``0..n-1``."""

    src: np.ndarray  #: int64 vertex numbers
    dst: np.ndarray
    t: np.ndarray  #: int64 µs
    seq: np.ndarray
    label: np.ndarray  #: object: edge label or None
    vlabel: np.ndarray  #: object, per vertex number: its label or None
    names: np.ndarray  #: object, per vertex number: the stream vertex id

    @property
    def n(self) -> int:
        return len(self.names)

    def select(self, keep: np.ndarray) -> WindowGraph:
        """The edges where ``keep``; vertices (and their labels) unchanged."""
        kept = (self.src, self.dst, self.t, self.seq, self.label)
        return WindowGraph(*(col[keep] for col in kept), self.vlabel, self.names)


def number_vertices(ids: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                   np.ndarray]:
    """Number the distinct ``(id, label)`` pairs of two parallel arrays, in order of first
    appearance: ``(number of each element, id of each pair, label of each pair or None)``.

    By hashing: ids are Python strings, and sorting them (``np.unique``) costs a Python
    comparison per step -- it was most of a verification's time on real streams.
    """
    id_code, id_names = pd.factorize(ids)
    label_code, label_names = pd.factorize(labels)  # None: -1
    width = len(label_names) + 1
    number, pairs = pd.factorize(id_code.astype(np.int64) * width + label_code + 1)
    label_of = np.empty(width, dtype=object)  # code 0: no label
    label_of[1:] = label_names
    names = np.asarray(id_names, dtype=object)[pairs // width]
    return number.astype(np.int64), names, label_of[pairs % width]


class PartGraphs:
    """Window graphs of parts of an engine's window (the signature and coloring engines).

    A part's edges carry the engine's own vertex numbers (indexes into its ``names`` /
    ``labels``); :meth:`graph` renumbers them ``0..n-1`` in order of first appearance.
    Integers: no string hashing per verification. A scratch array of -1 as long as the
    engine's numbering is kept between calls, so that each costs the part's edges only (a
    verification renumbers a few hundred edges of a window of thousands).
    """

    def __init__(self) -> None:
        self._scratch = np.empty(0, dtype=np.int64)

    def graph(self, src: np.ndarray, dst: np.ndarray, t: np.ndarray, seq: np.ndarray,
              label: np.ndarray, names: np.ndarray,
              labels: np.ndarray) -> tuple[WindowGraph, np.ndarray]:
        """The part's graph, and per new vertex number the engine's."""
        if len(self._scratch) < len(names):
            self._scratch = np.full(len(names), -1, dtype=np.int64)
        new_src, new_dst, kept = kernel.renumber(src, dst, self._scratch)
        return WindowGraph(new_src, new_dst, t, seq, label, labels[kept], names[kept]), kept


def window_graph(cols: Mapping[str, np.ndarray]) -> WindowGraph:
    """Number the vertices, ``(id, label)`` pairs, of a window's columns."""
    m = len(cols["t"])
    number, names, vlabel = number_vertices(np.concatenate([cols["src"], cols["dst"]]),
                                            np.concatenate([cols["src_label"], cols["dst_label"]]))
    return WindowGraph(number[:m], number[m:], cols["t"], cols["seq"], cols["label"], vlabel, names)



# -- Algorithm DDST ----------------------------------------------------------------------


def label_compat(q: IndexedQuery, g: WindowGraph) -> tuple[np.ndarray, np.ndarray]:
    """Label compatibility: vertices ``(nv, n)`` and edges with their endpoints ``(ne, m)``."""
    vl = [np.ones(g.n, bool) if lab is None else g.vlabel == lab for lab in q.vlabels]
    vc = np.array(vl, dtype=bool).reshape(len(q.vlabels), g.n)
    el = [np.ones(len(g.t), bool) if lab is None else g.label == lab for lab in q.elabels]
    ec = np.array(el, dtype=bool).reshape(len(q.elabels), len(g.t))
    return vc, ec & vc[q.qsrc][:, g.src] & vc[q.qdst][:, g.dst]


def components(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Weakly connected components: per vertex, the smallest vertex number in its part."""
    return kernel.components(n, src, dst)


def run_ddst(q: IndexedQuery, g: WindowGraph, vc: np.ndarray, ec: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm DDST on one window: the maximal ``(S, Se)`` as boolean matrices (compiled:
    :func:`graphcep.engines.ddst.kernel.ddst`)."""
    return kernel.ddst(*q.arrays, g.src, g.dst, g.t, np.ascontiguousarray(vc),
                       np.ascontiguousarray(ec))



def label_fit(wanted: str | None, given: np.ndarray) -> np.ndarray:
    """A query label (``None``: any) against an object array of stream labels."""
    if wanted is None:
        return np.ones(len(given), dtype=bool)
    return np.asarray(given == wanted, dtype=bool).reshape(len(given))


def edge_fit(cols: Mapping[str, np.ndarray], src_label: str | None, label: str | None,
             dst_label: str | None) -> np.ndarray:
    """Which edges of ``cols`` fit a query edge's labels (its source's, its own, its
    destination's; ``None`` is any). Shared by the signature and coloring engines."""
    return (label_fit(src_label, cols["src_label"]) & label_fit(label, cols["label"])
            & label_fit(dst_label, cols["dst_label"]))  # fmt: skip



def component_of(g: WindowGraph, sim: np.ndarray, se: np.ndarray, e: int) -> tuple[np.ndarray, ...]:
    """Restrict ``(S, Se)`` to the match component holding stream edge ``e``."""
    active = se.any(axis=0)
    comp = components(g.n, g.src[active], g.dst[active])
    mine = comp == comp[g.src[e]]
    return sim & mine[None, :], se & mine[g.src][None, :]



def _labels(table: pa.Table, name: str) -> np.ndarray:
    """A label column as an object array of str/None (all None when absent)."""
    if name not in table.column_names:
        return np.full(table.num_rows, None, dtype=object)
    col = table.column(name)
    if not pa.types.is_string(col.type):
        col = pc.cast(col, pa.string())
    return strings(col)


def strings(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A string column as a 1-d object array of str/None (half the cost of ``to_pylist``)."""
    if pa.types.is_dictionary(col.type):
        col = col.cast(pa.string())
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=object).reshape(len(col))


def engine_columns(table: pa.Table, ends: bool = True) -> dict[str, np.ndarray]:
    """The columns the engine keeps, as NumPy arrays (without ``src`` and ``dst`` when
    not ``ends``: an engine that numbers them from Arrow's columns)."""
    cols = {
        "t": table.column("t").to_numpy().astype(np.int64),
        "seq": table.column("seq").to_numpy().astype(np.int64),
    }
    if ends:
        cols["src"], cols["dst"] = strings(table.column("src")), strings(table.column("dst"))
    cols.update({name: _labels(table, name) for name in LABEL_COLUMNS})
    return cols



# -- the engine --------------------------------------------------------------------------


def batch_columns(batch: pa.Table | pa.RecordBatch, next_seq: int) -> dict[str, np.ndarray] | None:
    """A pushed batch as engine columns (``None`` when empty); without a ``seq`` column the
    edges are numbered on from ``next_seq``. Shared by the three DDST engines."""
    table = numbered_batch(batch, next_seq)
    return None if table is None else engine_columns(table)

