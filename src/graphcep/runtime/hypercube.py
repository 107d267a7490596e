"""HyperCube (shares) partitioning of an edge stream for one subgraph query, exactly once.

Method
------
A query with vertex variables ``x_1 .. x_n`` is evaluated on a grid of
``s_1 * ... * s_n`` *cells*; ``s_i`` is the *share* of ``x_i``, and a cell is a coordinate
vector ``(c_1, ..., c_n)`` with ``0 <= c_i < s_i``. Along ``x_i`` a vertex ``v`` has the
coordinate ``h(v) mod s_i``, for a fixed 64-bit vertex hash ``h`` (below). A stream edge
``u -> v`` that may play the query edge ``x -> y`` (its predicates hold) is sent to every
cell with ``c_x = h(u) mod s_x`` and ``c_y = h(v) mod s_y``, all other coordinates free:
``cells / (s_x * s_y)`` cells. An edge that may play several query edges goes to the union
of their cell sets. Each cell is then replayed by the ordinary engine, independently.

This is the HyperCube or *shares* algorithm: F. N. Afrati and J. D. Ullman, "Optimizing
joins in a map-reduce environment", EDBT 2010; P. Beame, P. Koutris and D. Suciu,
"Communication steps for parallel query processing", PODS 2013 -- here with one relation,
the stream, playing every atom of the query.

*Keyed partitioning* is the special case where one variable touches every query edge: all
the share goes on it. When that variable is the source of every query edge (or the target
of every one), as the centre of a star, every edge goes to exactly one cell, its key
vertex's; a variable in the middle, as in a path ``x -> y -> z``, puts an edge in at most
two.

Exactly once
------------
Take a match with bindings ``b``. Its *home cell* has the coordinates ``h(b(x)) mod s_x``.
Each of its edges plays some query edge ``x -> y`` from ``b(x)`` to ``b(y)``, so it was sent
to every cell agreeing with the home cell on ``x`` and ``y``, the home cell among them.
The home cell therefore holds all of the match's edges, and its engine finds the match: a
match depends on its own edges only (temporal constraints, predicates and the extent
window look at nothing else), and stream order ``(t, seq)`` is kept because ``seq`` is
numbered before the stream is split. Other cells may find the match too, when they happen
to hold all its edges; :func:`home_filter` keeps a match only in the cell equal to its
home, a function of the match alone. So every match is reported by exactly one cell, with
no deduplication across cells.

Vertex features (``x in Top1000``) count the whole stream, which no cell sees: queries
using them cannot be split into cells and run as one partition.

Replication
-----------
The price is replication: the number of cells a stream edge is copied to. The cost model
routes a random edge between two distinct vertices, eligible for every query edge, with
independent uniform hashes. Its expected number of copies is exact by inclusion--exclusion
over the query's distinct endpoint pairs: the cells common to a set ``S`` of them number
``cells / prod(s_z for z in vars(S))`` and exist only when
``h(u) = h(v) mod lcm(s_z for z both a source and a destination in S)``, which has
probability ``1 / lcm(...)``. The expected load of each single cell is exact too (a system
of congruences per term, solved by the Chinese remainder theorem), and it is not uniform:
cells on the "diagonal" receive fewer edges. :func:`choose_shares` tries every grid with
product at most ``partitions`` and keeps the least expected load per cell
(``copies / cells``), skipping grids in which one cell receives every edge (never faster
than one cell). Copies per edge, and the busiest cell's share of the stream:

=============================  ===============  ===============  ===============  ================
query                          2 partitions     4                8                16
=============================  ===============  ===============  ===============  ================
triangle ``x1->x2->x3->x1``    1 cell: 1, 1     1 cell: 1, 1     2,2,2: 5, 0.75   4,2,2: 7, 0.5
watering hole (a 2-edge star)  keyed: 1, 0.5    keyed: 1, 0.25   keyed: 1, 0.125  keyed: 1, 0.0625
=============================  ===============  ===============  ===============  ================

The triangle's 2 x 2 x 1 grid is skipped at 4 partitions: two of its cells receive every
edge. Real streams add vertex skew: a vertex with many edges loads its cells beyond the
model's figures (the hash spreads vertices, not edges).

The vertex hash
---------------
``h`` is XXH64 with seed 42 of the vertex's UTF-8 bytes, read as a signed 64-bit integer,
and coordinates use the non-negative modulo: exactly Spark SQL's
``pmod(xxhash64(v), s)``. So the JVM, Spark's Python workers and the driver all agree, and
unlike Python's salted ``hash()`` it is the same in every process. It is computed in numpy
over the Arrow string buffers, once per distinct vertex, with no Python call per string.

On Spark
--------
The Spark runtime's ``"cells"`` strategy runs this algorithm
(:func:`graphcep.runtime.spark.run_spark`): Spark SQL computes :func:`route` in the JVM
(``pmod(xxhash64(v), s)`` per split variable, :func:`graphcep.runtime.spark.route_spark`),
each cell is shuffled onto a partition of its own, and each task replays its cell in
stream order and keeps :func:`home_filter`'s matches -- :func:`replay_cell`, with
:func:`replay_cells` the in-process reference.

Example
-------
>>> import pyarrow as pa
>>> from graphcep.lang.sal import parse_query
>>> triangle = parse_query('''{ x1 e1 x2; x2 e2 x3; x3 e3 x1;
...     starttime(e3) - starttime(e1) <= 10;
...     starttime(e1) < starttime(e2); starttime(e2) < starttime(e3); }''')
>>> shares = choose_shares(triangle, 8)
>>> shares.shares, shares.cells, shares.expected_copies
((2, 2, 2), 8, 5.0)
>>> edges = pa.table({"t": [0, 1_000_000, 2_000_000], "src": ["a", "b", "c"],
...                   "dst": ["b", "c", "a"]})
>>> cells, rows = route(edges, triangle, shares)
>>> np.bincount(rows).tolist()  # cells each edge is copied to
[6, 6, 4]
>>> matches = replay_cells(triangle, edges, 8)
>>> matches.num_rows, matches.column("bindings").to_pylist()[0]
(1, [('x1', 'a'), ('x2', 'b'), ('x3', 'c')])
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import combinations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.engines.subgraph.plan import ROLES
from graphcep.events import empty_matches, max_duration_of, normalize_edges
from graphcep.hashing import vertex_hash
from graphcep.jobs import as_job
from graphcep.jobs.base import ReplayJob
from graphcep.jobs.subgraph import SubgraphJob
from graphcep.patterns.subgraph import QueryError, SubgraphQuery
from graphcep.runtime.local import replay_job

__all__ = [
    "Shares",
    "choose_shares",
    "expected_cell_loads",
    "expected_copies",
    "free_offsets",
    "home_cells",
    "home_filter",
    "key_variable",
    "keyed_copies",
    "partitioning_lines",
    "replay_cell",
    "replay_cells",
    "route",
    "role_work",
    "route_roles",
    "with_roles",
]


#: Above this many distinct query edges the 2^k-term inclusion--exclusion is replaced by
#: the union bound (the sum of the query edges' cell counts).
MAX_EXACT_PATTERNS = 10


# -- shares --------------------------------------------------------------------------


@dataclass(frozen=True)
class Shares:
    """A HyperCube grid: one share per query vertex variable.

    Cell ids are mixed-radix numbers over the variables in ``variables`` order (the first
    variable is the most significant digit). ``expected_copies`` and ``max_load`` are the
    cost model's figures (see :func:`choose_shares`).
    """

    variables: tuple[str, ...]
    shares: tuple[int, ...]
    expected_copies: float = 1.0
    max_load: float = 1.0
    #: each cell's share of the matching work when its engine is told the roles of its
    #: edges (:func:`route_roles`, :func:`role_work`); None: the grid was chosen for
    #: cells that are not (:func:`choose_shares` without ``roles``)
    work: float | None = None

    def __post_init__(self) -> None:
        if len(self.variables) != len(self.shares) or any(s < 1 for s in self.shares):
            raise ValueError(f"one share >= 1 per variable, got {self.variables} {self.shares}")

    @property
    def cells(self) -> int:
        return math.prod(self.shares)

    @property
    def strides(self) -> np.ndarray:
        """int64[n]: how much one step along each variable adds to a cell id."""
        after = np.cumprod((self.shares[1:] + (1,))[::-1])[::-1]
        return np.asarray(after, dtype=np.int64)

    def share(self, variable: str) -> int:
        return self.shares[self.variables.index(variable)]

    def keyed_on(self, query: SubgraphQuery) -> str | None:
        """The key variable when this is keyed partitioning (all the share on a variable
        that touches every query edge), else None."""
        split = [v for v, s in zip(self.variables, self.shares, strict=True) if s > 1]
        if len(split) != 1:
            return None
        key = split[0]
        return key if all(key in (e.src, e.dst) for e in query.edges) else None

    def __str__(self) -> str:
        grid = " x ".join(f"{v}:{s}" for v, s in zip(self.variables, self.shares, strict=True))
        work = "" if self.work is None else f", each cell {self.work:.3g} of the matching work"
        return (f"{grid} = {self.cells} cells, {self.expected_copies:.4g} copies per edge, "
                f"busiest cell {self.max_load:.3g} of the stream{work}")


def choose_shares(query: SubgraphQuery, partitions: int, roles: bool = False) -> Shares:
    """The grid with product at most ``partitions`` with the least expected load per cell;
    then the fewest copies per edge; then larger shares on earlier variables.

    The load depends on what a cell's engine does with its edges. Without ``roles`` (the
    batch runtime's cells: every edge tries every query edge, :func:`home_filter` drops the
    other cells' matches) it is the cell's share of the stream, ``copies / cells``, the
    quantity HyperCube minimises; grids in which some cell expects every edge are skipped,
    as that cell redoes all the work of a single cell. It happens: for the triangle on
    2 x 2 x 1 cells, two of the four cells receive every edge (an edge ``u -> v`` reaches
    cell ``(0, 1)`` as ``e1`` when ``h(u), h(v)`` are even and odd, as ``e2`` when
    ``h(u)`` is odd, as ``e3`` when ``h(v)`` is even), so with 4 partitions the triangle
    runs as one cell.

    With ``roles`` (the streaming cells: each edge plays only the query edges it was sent
    for, :func:`route_roles`) the load is :func:`role_work`, the same in every cell: an
    edge a cell receives for one query edge costs it that query edge's share of the work,
    not all of it. The triangle's 2 x 1 x 1 grid sends every edge to both cells, yet each
    cell plays a third of its edges' roles as ``e2`` only and does two thirds of the work.

    >>> from graphcep.lang.sal import parse_query
    >>> triangle = parse_query("{ a e1 b; b e2 c; c e3 a; starttime(e1) < starttime(e2); "
    ...                        "starttime(e2) < starttime(e3); }")
    >>> [choose_shares(triangle, n).shares for n in (2, 4, 8)]
    [(1, 1, 1), (1, 1, 1), (2, 2, 2)]
    >>> [choose_shares(triangle, n, roles=True).shares for n in (2, 4, 8)]
    [(2, 1, 1), (2, 2, 1), (2, 2, 2)]
    >>> round(choose_shares(triangle, 2, roles=True).work, 3)
    0.667
    """
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, got {partitions}")
    _check_partitionable(query, partitions)
    variables = query.vertices
    model = _EdgeModel.of(query, variables)
    candidates = _share_vectors(len(variables), partitions)
    copies = model.copies(candidates)
    cells = candidates.prod(axis=1)
    load = role_work(query, variables, candidates) if roles else copies / cells
    # rounded so that float noise cannot break an exact tie between two grids
    keys = [-candidates[:, i] for i in reversed(range(len(variables)))]
    order = np.lexsort([*keys, np.round(copies, 9), np.round(load, 9)])
    for i in order:
        grid = tuple(int(s) for s in candidates[i])
        busiest = float(model.cell_loads(grid).max())
        if cells[i] == 1 or roles or busiest < 1 - 1e-9:
            return Shares(variables, grid, float(copies[i]), busiest,
                          float(load[i]) if roles else None)
    raise AssertionError("the one-cell grid is always acceptable")


def role_work(query: SubgraphQuery, variables: tuple[str, ...],
              candidates: np.ndarray) -> np.ndarray:
    """float[m]: each cell's expected share of the matching work on each grid (row of
    ``candidates``) when cells screen roles (:func:`route_roles`).

    A stream edge plays query edge ``x -> y`` in the cells that agree with its ends on
    ``x`` and ``y``: with uniform hashes, a given cell with probability
    ``1 / (s_x * s_y)`` (``1 / s_x`` for a loop ``x -> x``), the same for every cell. The
    work of a query edge -- keeping the edge as a candidate for it, and the searches that
    start or pass there -- falls with the edges playing it, so a cell's share is the mean
    of those probabilities over the query edges (one cell: 1).
    """
    index = {v: i for i, v in enumerate(variables)}
    plays = [(index[e.src], index[e.dst]) for e in query.edges]
    if any(x != y for x, y in plays):
        plays = [(x, y) for x, y in plays if x != y]  # a non-loop edge plays no loop
    total = np.zeros(len(candidates))
    for x, y in plays:
        share = candidates[:, x].astype(np.float64)
        if x != y:
            share = share * candidates[:, y]
        total += 1 / share
    return total / len(plays)


def expected_copies(query: SubgraphQuery, shares: Shares) -> float:
    """Expected cells an edge is copied to under ``shares``: an edge between two distinct
    vertices, eligible for every query edge, with uniform hashes (the module's cost model)."""
    grid = np.asarray([shares.shares], dtype=np.int64)
    return float(_EdgeModel.of(query, shares.variables).copies(grid)[0])


def expected_cell_loads(query: SubgraphQuery, shares: Shares) -> np.ndarray:
    """float[cells]: the probability that such an edge is copied to each cell (they sum to
    :func:`expected_copies`)."""
    return _EdgeModel.of(query, shares.variables).cell_loads(shares.shares)


def _check_partitionable(query: SubgraphQuery, cells: int) -> None:
    if cells > 1 and query.vertex_constraints:
        names = sorted({c.feature for c in query.vertex_constraints})
        raise ValueError(
            f"query {query.name!r} uses vertex features {names}, which count the whole "
            "stream: it cannot be split into cells; run it with one partition"
        )


def _share_vectors(n: int, limit: int) -> np.ndarray:
    """int64[m, n]: every vector of positive integers with product at most ``limit``."""
    vectors: list[tuple[int, ...]] = [()]
    products = [1]
    for _ in range(n):
        grown = [(v + (s,), p * s) for v, p in zip(vectors, products, strict=True)
                 for s in range(1, limit // p + 1)]
        vectors = [v for v, _ in grown]
        products = [p for _, p in grown]
    return np.asarray(vectors, dtype=np.int64).reshape(len(vectors), n)


_Term = tuple[tuple[int, ...], tuple[int, ...], int]


@dataclass(frozen=True)
class _EdgeModel:
    """The edge the cost model routes: ``u -> v`` between distinct vertices whose hashes
    are independent and uniform, eligible for every query edge (for a query made of loops
    only, a loop ``u -> u``).

    It goes to the union of the cell sets of the query's distinct endpoint pairs, counted by
    inclusion--exclusion: ``terms`` holds ``(sources, targets, coefficient)`` for every set
    ``S`` of pairs, ``sources``/``targets`` being the variables ``h(u)``/``h(v)`` fix in
    ``S``. Above :data:`MAX_EXACT_PATTERNS` pairs only the single pairs are kept, which
    bounds the union from above.
    """

    terms: tuple[_Term, ...]
    loops: bool

    @classmethod
    def of(cls, query: SubgraphQuery, variables: tuple[str, ...]) -> _EdgeModel:
        index = {v: i for i, v in enumerate(variables)}
        pairs = sorted({(index[e.src], index[e.dst]) for e in query.edges if e.src != e.dst})
        loops = not pairs  # a non-loop edge can play no loop x -> x
        if loops:
            pairs = sorted({(index[e.src], index[e.dst]) for e in query.edges})
        largest = len(pairs) if len(pairs) <= MAX_EXACT_PATTERNS else 1
        terms: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}
        for size in range(1, largest + 1):
            for subset in combinations(pairs, size):
                sources = {a for a, _ in subset}
                targets = {b for _, b in subset}
                if loops:  # u = v: one hash fixes every variable of S
                    sources = targets = sources | targets
                key = (tuple(sorted(sources)), tuple(sorted(targets)))
                terms[key] = terms.get(key, 0) + (1 if size % 2 else -1)
        return cls(tuple((a, b, c) for (a, b), c in terms.items() if c), loops)

    def copies(self, candidates: np.ndarray) -> np.ndarray:
        """float[m]: expected copies for each grid (row of ``candidates``).

        For fixed hashes the cells common to ``S`` fix the coordinates of
        ``sources | targets`` and exist only if ``h(u) = h(v)`` modulo the shares of
        variables in both; uniform hashes agree so with probability ``1 / lcm``.
        """
        cells = candidates.prod(axis=1).astype(np.float64)
        total = np.zeros(len(candidates))
        for sources, targets, coefficient in self.terms:
            fixed = sorted(set(sources) | set(targets))
            denominator = candidates[:, fixed].prod(axis=1).astype(np.float64)
            both = sorted(set(sources) & set(targets))
            if both and not self.loops:
                denominator *= np.lcm.reduce(candidates[:, both], axis=1)
            total += coefficient * cells / denominator
        return total

    def cell_loads(self, grid: tuple[int, ...]) -> np.ndarray:
        """float[cells]: probability that the model edge is copied to each cell of ``grid``.

        The cell ``c`` is in every cell set of ``S`` when ``h(u) = c_x mod s_x`` for each
        ``x`` in ``sources`` and ``h(v) = c_y mod s_y`` for each ``y`` in ``targets``: a
        system of congruences that (Chinese remainder theorem) holds with probability
        ``1 / lcm`` of the shares when the residues agree pairwise modulo the gcds, else 0.
        """
        shares = np.asarray(grid, dtype=np.int64)
        coords = np.indices(grid).reshape(len(grid), -1)
        total = np.zeros(coords.shape[1])
        for sources, targets, coefficient in self.terms:
            u = _congruence_probability(coords, shares, sources)
            v = u if self.loops else _congruence_probability(coords, shares, targets)
            total += coefficient * u * v
        return total


def _congruence_probability(coords: np.ndarray, shares: np.ndarray,
                            variables: tuple[int, ...]) -> np.ndarray:
    """float[cells]: P(h = c_x mod s_x for every x in ``variables``) for a uniform h."""
    ok = np.ones(coords.shape[1], dtype=bool)
    for x, y in combinations(variables, 2):
        ok &= (coords[x] - coords[y]) % math.gcd(int(shares[x]), int(shares[y])) == 0
    lcm = math.lcm(*(int(shares[x]) for x in variables))
    return ok / lcm


def key_variable(query: SubgraphQuery) -> str | None:
    """A vertex variable on every query edge (the first in the query's order), else None:
    keyed partitioning needs no copies beyond the key's own ends."""
    return next((v for v in query.vertices
                 if all(v in (e.src, e.dst) for e in query.edges)), None)


def partitioning_lines(job: ReplayJob | SubgraphQuery, counts: tuple[int, ...] = (8, 64)
                       ) -> list[str]:
    """How cells split the job's query (``graphcep explain``): keyed by a vertex variable
    or HyperCube, and for ``counts`` cells the grid, the copies per edge and the busiest
    cell's share of the stream and each cell's share of the matching work (the streaming
    cells screen roles: :func:`choose_shares`' model with ``roles``, uniform hashes, no
    skew).

    >>> from graphcep.lang.sal import parse_query
    >>> print("\\n".join(partitioning_lines(parse_query(
    ...     "{ h e1 a; h e2 b; starttime(e1) < starttime(e2); starttime(e2) - starttime(e1) <= 2; }"
    ... ), (8,))))
    cells (graphcep stream --cells N): keyed by h, on every query edge: an edge goes to the one cell of its h vertex
      --cells 8: grid h:8 x a:1 x b:1, 1 copy per edge, busiest cell 0.125 of the stream, each cell 0.125 of the matching work
    """
    head = "cells (graphcep stream --cells N)"
    try:
        split = as_job(job).cell_split()
    except QueryError as err:
        return [f"{head}: none, {' '.join(str(err).split())}: it matches in one engine"]
    if split.query is None:
        return _keyed_lines(split.words, len(split.columns), counts)
    query = split.query
    key = key_variable(query)
    if key is None:
        how = (f"HyperCube over {', '.join(query.vertices)} (no vertex variable is on every "
               "query edge): an edge is copied to every cell its ends agree with")
    elif all(e.src == key for e in query.edges) or all(e.dst == key for e in query.edges):
        how = f"keyed by {key}, on every query edge: an edge goes to the one cell of its {key} vertex"
    else:
        how = (f"keyed by {key}, on every query edge: an edge goes to the cells of its source "
               f"and its target ({key} is the source of one query edge and the target of another)")
    lines = [f"{head}: {how}"]
    for count in counts:
        shares = choose_shares(query, count, roles=True)
        grid = " x ".join(f"{v}:{n}" for v, n in zip(shares.variables, shares.shares,
                                                      strict=True))
        copies = shares.expected_copies
        if shares.cells == 1:
            lines.append(f"  --cells {count}: one cell")
            continue
        lines.append(f"  --cells {count}: grid {grid}, {copies:.3g} "
                     f"cop{'y' if copies == 1 else 'ies'} per edge, busiest cell "
                     f"{shares.max_load:.3g} of the stream, each cell {shares.work:.3g} "
                     "of the matching work")
    return lines


def keyed_copies(columns: int, cells: int) -> float:
    """Expected cells an edge goes to when keyed by ``columns`` of its values over
    ``cells`` cells: one per column, less the chance that two values share a cell
    (distinct values, uniform hashes)."""
    return cells * (1 - (1 - 1 / cells) ** columns)


def _keyed_lines(words: str, columns: int, counts: tuple[int, ...]) -> list[str]:
    """:func:`partitioning_lines` for keyed cells (a ν-expression, subscriptions): only
    the executor mode runs them; an edge goes to the cell of each of its ``columns``
    key values."""
    lines = [f"cells (graphcep stream --matching executors --cells N): {words}"]
    for count in counts:
        copies = keyed_copies(columns, count)
        lines.append(f"  --cells {count}: {count} cells, {copies:.3g} "
                     f"cop{'y' if copies == 1 else 'ies'} per edge, busiest cell "
                     f"{copies / count:.3g} of the stream")
    return lines


# -- routing -------------------------------------------------------------------------


def route(
    edges: pa.Table, job: SubgraphJob | SubgraphQuery, shares: Shares
) -> tuple[np.ndarray, np.ndarray]:
    """Every (cell, row) pair: row ``i`` of ``edges`` must be replayed in that cell.

    Returned as two int64 arrays sorted by cell, then row (so rows stay in their input
    order within a cell). An edge that can play no query edge -- its predicates fail, or a
    loop ``u -> u`` under isomorphism for a query edge between two variables -- goes nowhere.
    """
    cells, rows, _ = route_roles(edges, job, shares)
    return cells, rows


def route_roles(
    edges: pa.Table, job: SubgraphJob | SubgraphQuery, shares: Shares
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`route`'s pairs and, for each, the query edges the row was sent there to
    play: bit ``q`` of the int64 is query edge ``q`` (:data:`ROLES`).

    A cell's engine that lets each edge play only those (:func:`with_roles`) finds just
    the matches whose home is that cell: a match binds each query edge ``x -> y`` to an
    edge whose ends hash to the cell's coordinates of ``x`` and ``y``, so all its
    variables agree with the cell. Without them the cell also builds every other cell's
    matches that its edges happen to complete -- the edge sent as ``e1`` tried as ``e2``
    and ``e3`` too -- only to drop them in :func:`home_filter`: on the triangle's 2 x 2 x 2
    grid, most of its search.
    """
    job = _as_job(job)
    _check_grid(job.query, shares)
    n = edges.num_rows
    if n == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64)
    edges = job.orient(edges)
    src_hash = vertex_hash(edges.column("src"))
    dst_hash = vertex_hash(edges.column("dst"))
    size = np.asarray(shares.shares, dtype=np.int64)
    stride = shares.strides
    index = {v: i for i, v in enumerate(shares.variables)}
    patterns = job.eligible_patterns(edges)
    if shares.cells == 1:  # one cell: every playable edge once, any role (no sort)
        rows = np.flatnonzero(np.logical_or.reduce(list(patterns.values())))
        return np.zeros(len(rows), np.int64), rows.astype(np.int64), np.full(len(rows), -1)
    cells, rows, roles = [], [], []
    for (x, y), mask in patterns.items():
        eligible = np.flatnonzero(mask)
        ix, iy = index[x], index[y]
        base = (src_hash[eligible] % size[ix]) * stride[ix]
        if ix != iy:
            base += (dst_hash[eligible] % size[iy]) * stride[iy]
        free = free_offsets(shares, {ix, iy})
        cells.append((base[:, None] + free[None, :]).ravel())
        rows.append(np.repeat(eligible, len(free)))
        roles.append(np.full(len(eligible) * len(free), pattern_roles(job.query, x, y)))
    if not cells:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64)
    # an edge playing several query edges goes to the union of their cells: one pair
    # each, its roles joined
    key = np.concatenate(cells) * n + np.concatenate(rows)
    order = np.argsort(key, kind="stable")
    key = key[order]
    first = np.ones(len(key), dtype=bool)
    first[1:] = key[1:] != key[:-1]
    joined = np.bitwise_or.reduceat(np.concatenate(roles)[order], np.flatnonzero(first))
    key = key[first]
    return key // n, key % n, joined


def pattern_roles(query: SubgraphQuery, x: str, y: str) -> int:
    """The bits (:data:`ROLES`) of the query edges from ``x`` to ``y``."""
    return sum(1 << q for q, edge in enumerate(query.edges) if (edge.src, edge.dst) == (x, y))


def with_roles(edges: pa.Table, roles: np.ndarray) -> pa.Table:
    """``edges`` with the query edges each may play in its cell (:func:`route_roles`), as
    the SAL engine reads them (:data:`ROLES`)."""
    return edges.append_column(ROLES, pa.array(roles, pa.int64()))


def _as_job(job: SubgraphJob | SubgraphQuery) -> SubgraphJob:
    return as_job(job)  # type: ignore[return-value]


def _check_grid(query: SubgraphQuery, shares: Shares) -> None:
    if set(shares.variables) != set(query.vertices):
        raise ValueError(
            f"shares are for variables {shares.variables}, query {query.name!r} has "
            f"{query.vertices}"
        )
    _check_partitionable(query, shares.cells)


def free_offsets(shares: Shares, fixed: set[int]) -> np.ndarray:
    """int64: ids of the cells whose coordinates are 0 on ``fixed`` variables (added to a
    base cell, they enumerate every choice of the free coordinates)."""
    cell = np.arange(shares.cells, dtype=np.int64)
    keep = np.ones(len(cell), dtype=bool)
    for i in fixed:
        keep &= (cell // shares.strides[i]) % shares.shares[i] == 0
    return cell[keep]


# -- exactly once --------------------------------------------------------------------


def home_cells(matches: pa.Table, shares: Shares) -> np.ndarray:
    """int64: the home cell of each match (from its bindings, as :func:`route` hashes)."""
    cell = np.zeros(matches.num_rows, dtype=np.int64)
    for variable, size, stride in zip(shares.variables, shares.shares, shares.strides,
                                      strict=True):
        if size == 1 or matches.num_rows == 0:
            continue  # a variable with share 1 has coordinate 0 everywhere
        vertices = pc.map_lookup(matches.column("bindings"), pa.scalar(variable), "first")
        if vertices.null_count:
            raise ValueError(f"a match has no binding for vertex variable {variable!r}")
        cell += (vertex_hash(vertices) % size) * stride
    return cell


def home_filter(matches: pa.Table, shares: Shares, cell: int) -> pa.Table:
    """The matches whose home is ``cell``: what that cell reports."""
    if shares.cells == 1:
        return matches
    return matches.filter(pa.array(home_cells(matches, shares) == cell))


# -- in-process reference ------------------------------------------------------------


def replay_cell(job: SubgraphJob, edges: pa.Table, shares: Shares, cell: int) -> pa.Table:
    """What one task runs for one cell: replay the cell's edges, report its home matches.

    ``edges`` are the cell's rows as routed (not yet oriented), numbered (``seq``) in the
    whole stream's order.
    """
    return home_filter(replay_job(job, edges), shares, cell)


def replay_cells(job: SubgraphJob | SubgraphQuery, edges: pa.Table, partitions: int | Shares) -> pa.Table:
    """All matches of the job's query, replayed cell by cell in this process.

    ``partitions`` is a cell budget for :func:`choose_shares`, or a grid given outright.
    The result equals a single replay of the whole stream, each match once.
    """
    job = _as_job(job)
    shares = (partitions if isinstance(partitions, Shares)
              else choose_shares(job.query, partitions, roles=True))
    _check_grid(job.query, shares)
    # numbered before splitting, so a match's edges and id are the same in every cell
    edges = normalize_edges(edges)
    if job.max_duration_us is None:
        # end times bound the extent only through a duration bound: every cell gets the
        # whole stream's, as the Spark runtime gives every time shard
        job = replace(job, max_duration_us=max_duration_of(edges))
    if shares.cells == 1:
        return replay_cell(job, edges, shares, 0)  # unrouted: features see every edge
    cells, rows, roles = route_roles(edges, job, shares)
    bounds = np.flatnonzero(np.diff(cells)) + 1
    found = [
        replay_cell(job, with_roles(edges.take(part_rows), part_roles), shares,
                    int(part_cells[0]))
        for part_cells, part_rows, part_roles in zip(
            np.split(cells, bounds), np.split(rows, bounds), np.split(roles, bounds),
            strict=True)
        if len(part_cells)
    ]
    found = [m for m in found if m.num_rows]
    return pa.concat_tables(found) if found else empty_matches()
