"""DDST benchmark: throughput of the baseline, signature and coloring engines.

Run ``python -m bench.ddst [--quick] [--record]`` from the repository root; see
``bench/README.md`` ("DDST event patterns") for what is measured and how.

All three engines run on the same streams, in this process, one after the other, and must
report the same matches (the same number of reports and the same ``(trigger_seq, edge
seqs)`` pairs) on every arrival more than one of them processed; the run aborts otherwise.
Sweeps (the paper's Sec. 5): the window grows (time and count windows), the query grows
(paths, stars and fan-out trees of 2..6 edges), on real labelled data (MathOverflow, high
school contacts, CTU-13 netflows) and on generated labelled streams with planted matches.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import datetime
import io
import math
import os
import platform
import pstats
import re
import sys
import time
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench.triangles import (
    DATA_DIR,
    MIB,
    add_record_arguments,
    record,
    shell,
    snapshot_source,
    source_state,
    use_source,
)

ROOT = Path(__file__).resolve().parent.parent
#: The shared data sets: ``$GRAPHCEP_DATA``, else ``../shared/data`` beside the checkout.
SHARED_DATA = Path(os.environ.get("GRAPHCEP_DATA", ROOT.parent / "shared" / "data"))
FIXTURES = ROOT / "tests" / "fixtures" / "ddst"
EXAMPLES = ROOT / "examples" / "ddst"
START_MARK = "<!-- bench.ddst:start -->"
END_MARK = "<!-- bench.ddst:end -->"
ENGINES = ("baseline", "signature", "coloring")
#: The method whose evaluation the warm-up switches off (see :func:`quiet_class`).
QUIET_HOOKS = {"baseline": "_evaluate", "signature": "_verify", "coloring": "_trigger"}
VERTEX_LABELS = ("A", "B", "C", "D")
EDGE_LABELS = ("x", "y", "z", "w")
CORE_COLUMNS = ("t", "src", "dst", "dur", "seq", "label", "src_label", "dst_label")
SPEEDUP_TARGET = 100.0
FLATNESS_TARGET = 2.0

S = 1_000_000  # µs
HS_LUNCH_US = (1353324600 + 900) * S  # 2012-11-19 11:45 UTC, the middle of the bundled slice


# -- settings per mode ---------------------------------------------------------------------


@dataclass(frozen=True)
class Mode:
    """Sizes and time budgets of one run (``--quick`` or full)."""

    name: str
    base_budget: float  # timed seconds for the baseline per configuration
    fast_budget: float  # timed seconds for signature / coloring per configuration (repeats too)
    blocks: int  # the measured region is cut into this many blocks; budgets split evenly
    repeat: int  # best of at most this many runs, when a run covers the whole region
    rounds: int  # then this many more per window sweep, its windows in turn (same rule)
    gen_edges: int  # generated window-sweep stream
    gen_region: int  # its measured region: the last ... arrivals
    gen_windows_s: tuple[float, ...]
    gen_windows_n: tuple[int, ...]
    qs_edges: int  # generated query-sweep streams
    qs_region: int
    qs_sizes: tuple[int, ...]
    mo_region: int
    mo_windows: tuple[tuple[int, str], ...]
    mo_counts: tuple[int, ...]
    hs_region: int
    hs_windows: tuple[tuple[int, str], ...]
    ctu_region: int
    ctu_windows: tuple[tuple[int, str], ...]
    real_query_sizes: tuple[int, ...]  # query sweep on real data (at REAL_QUERY_WINDOWS)

    def budget(self, engine: str) -> float:
        """Timed seconds per configuration for ``engine``."""
        return self.base_budget if engine == "baseline" else self.fast_budget


MODES = {
    "full": Mode(
        "full", base_budget=4.0, fast_budget=5.0, blocks=4, repeat=3, rounds=3,
        gen_edges=100_000, gen_region=60_000, gen_windows_s=(0.1, 1, 10, 30),
        gen_windows_n=(100, 1_000, 10_000, 30_000),
        qs_edges=40_000, qs_region=30_000, qs_sizes=(2, 3, 4, 5, 6),
        mo_region=12_000, mo_windows=((1, "h"), (12, "h"), (1, "d"), (7, "d"), (30, "d")),
        mo_counts=(100, 1_000, 5_000),
        hs_region=20_000, hs_windows=((1, "min"), (5, "min"), (30, "min"), (2, "h")),
        ctu_region=16_000, ctu_windows=((10, "s"), (1, "min"), (5, "min"), (20, "min")),
        real_query_sizes=(2, 3, 4, 5),
    ),  # fmt: skip
    "quick": Mode(
        "quick", base_budget=1.0, fast_budget=1.5, blocks=2, repeat=2, rounds=1,
        gen_edges=30_000, gen_region=15_000, gen_windows_s=(0.1, 1, 10),
        gen_windows_n=(100, 1_000, 10_000),
        qs_edges=15_000, qs_region=10_000, qs_sizes=(2, 4, 6),
        mo_region=3_000, mo_windows=((1, "h"), (12, "h"), (7, "d")), mo_counts=(100, 1_000),
        hs_region=5_000, hs_windows=((1, "min"), (5, "min"), (30, "min")),
        ctu_region=4_000, ctu_windows=((10, "s"), (1, "min"), (5, "min")),
        real_query_sizes=(2, 4),
    ),  # fmt: skip
}


# -- streams ---------------------------------------------------------------------------------


@dataclass
class Stream:
    """A labelled edge table in stream order and the region of it that is measured.

    Arrivals ``region[0] .. region[1]-1`` are timed; the edges before them are there so that
    the windows of the first measured arrivals are full (they are pushed untimed).
    """

    name: str
    table: pa.Table
    region: tuple[int, int]
    description: str
    t: np.ndarray = field(init=False, repr=False)
    seq: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        keep = [c for c in CORE_COLUMNS if c in self.table.column_names]
        self.table = self.table.select(keep).combine_chunks()
        self.t = self.table.column("t").to_numpy()
        self.seq = self.table.column("seq").to_numpy()

    def window_starts(self, window: Any, positions: np.ndarray) -> np.ndarray:
        """Index of the oldest edge in the window of each arrival in ``positions``."""
        if window.kind == "count":
            return np.maximum(0, positions - window.size + 1)
        return np.searchsorted(self.t, self.t[positions] - window.size, side="left")


def centered_region(n: int, length: int, history: int, center: int | None = None
                    ) -> tuple[int, int]:
    """``length`` arrivals around ``center`` (default: the middle of ``n``), after at least
    ``history`` edges."""
    center = n // 2 if center is None else center
    length = min(length, max(1, n - history))
    start = max(history, min(center - length // 2, n - length))
    return start, start + length


def history_for(table: pa.Table, windows: Iterable[Any], middle: int) -> int:
    """Edges that must come before arrival ``middle`` to fill the largest of ``windows``."""
    t = table.column("t").to_numpy()
    need = 0
    for w in windows:
        if w.kind == "count":
            need = max(need, w.size - 1)
        else:
            need = max(need, middle - int(np.searchsorted(t, t[middle] - w.size, side="left")))
    return need


def real_data_note(missing: list[Path]) -> str:
    where = ", ".join(str(p) for p in missing)
    return (f"full data not found ({where}): using the bundled slices in {FIXTURES} instead "
            "(set GRAPHCEP_DATA to the folder holding the shared data sets)")


def shared_or_bundled(full: Path, bundled: Path, label: str, bundled_origin: str,
                      notes: list[str]) -> tuple[Path, str]:
    """The shared data file and where it is from, or without it the bundled slice (and a
    note saying so)."""
    if full.exists():
        return full, str(full)
    notes.append(f"{label}: " + real_data_note([full]))
    return bundled, bundled_origin


def load_mathoverflow(mode: Mode, notes: list[str]) -> Stream:
    from graphcep.io.labels import constant_labels, merge_streams
    from graphcep.io.readers import read_edges

    kinds = ("a2q", "c2q", "c2a")
    folder = SHARED_DATA / "snap-sx-mathoverflow"
    files = [folder / f"sx-mathoverflow-{k}.txt.gz" for k in kinds]
    if all(f.exists() for f in files):
        origin = f"{folder} (a2q, c2q, c2a; all 2009-2016)"
    else:
        notes.append("MathOverflow: " + real_data_note([f for f in files if not f.exists()]))
        files = [FIXTURES / f"sx-mathoverflow-{k}-slice.txt" for k in kinds]
        origin = "bundled 3-day slices"
    table = merge_streams([constant_labels(read_edges(f).edges, label=k)
                           for f, k in zip(files, kinds, strict=True)])
    windows = [*mo_windows(mode), *(window_edges(n) for n in mode.mo_counts)]
    history = history_for(table, windows, table.num_rows // 2)
    region = centered_region(table.num_rows, mode.mo_region, history)
    return Stream("mathoverflow", table, region,
                  f"sx-mathoverflow, {origin}: {table.num_rows:,} edges; file name as edge label")


def load_highschool(mode: Mode, notes: list[str]) -> Stream:
    from graphcep.io.labels import merge_streams, read_vertex_labels, reverse_edges, vertex_labels
    from graphcep.io.readers import read_edges

    path, origin = shared_or_bundled(
        SHARED_DATA / "sociopatterns-highschool-2011-2012" / "highschool_2012.txt.gz",
        FIXTURES / "highschool_2012-slice.txt", "High school", "bundled 30-minute slice", notes)
    contacts = vertex_labels(read_edges(path).edges,
                             read_vertex_labels(FIXTURES / "highschool_2012-classes.tsv"))
    table = merge_streams([contacts, reverse_edges(contacts)])
    # centred on the lunch break of 19 Nov 2012 (the bundled slice), when classes mix: most
    # of the data holds few contacts between the query's classes
    center = int(np.searchsorted(table.column("t").to_numpy(), HS_LUNCH_US))
    center = min(max(center, 0), table.num_rows - 1)
    history = history_for(table, hs_windows(mode), center)
    region = centered_region(table.num_rows, mode.hs_region, history, center)
    return Stream("highschool", table, region,
                  f"SocioPatterns high school 2012, {origin}: {contacts.num_rows:,} contacts, "
                  f"both directions ({table.num_rows:,} edges); classes as vertex labels; "
                  "region centred on the lunch break of 19 Nov 2012, 11:30-12:00 UTC")


def load_ctu(mode: Mode, notes: list[str]) -> Stream:
    from graphcep.events import sort_stream
    from graphcep.io.labels import service_labels
    from graphcep.io.readers import read_edges

    path, origin = shared_or_bundled(
        SHARED_DATA / "ctu13-scenario1-netflow-vast-format" / "CTU1SampleAsVast.csv",
        FIXTURES / "ctu13_botnet-slice.csv", "CTU-13", "bundled 10-minute slice", notes)
    table = sort_stream(service_labels(read_edges(path).edges))
    history = history_for(table, ctu_windows(mode), table.num_rows // 2)
    region = centered_region(table.num_rows, mode.ctu_region, history)
    return Stream("ctu13", table, region,
                  f"CTU-13 scenario 1 netflows, {origin}: {table.num_rows:,} flows; "
                  "protocol/port class as edge label")


@dataclass(frozen=True)
class GenSpec:
    """A generated labelled stream: uniform random edges plus planted query instances."""

    edges: int
    vertices: int = 5_000
    rate: int = 1_000  # edges per second
    plant_per_10k: float = 5.0  # planted instances of the query per 10,000 edges
    seed: int = 1


def generate_labelled(spec: GenSpec, query: Any) -> pa.Table:
    """Random labelled edges with planted instances of ``query``.

    Every vertex gets one of :data:`VERTEX_LABELS` at random (uniformly), every edge one of
    :data:`EDGE_LABELS`; sources are uniform, destinations uniform among the other vertices,
    one edge every ``1/rate`` s. ``plant_per_10k`` times per 10,000 edges, a run of
    consecutive edges is replaced by one instance of the query: distinct vertices with the
    query's vertex labels, the query's edge labels, edges in a topological order of the
    timing order (so each instance fits its time window whenever ``|Eq| / rate <= W``).
    """
    rng = np.random.default_rng(spec.seed)
    n, nv = spec.edges, spec.vertices
    vlabel = rng.integers(0, len(VERTEX_LABELS), nv)
    src = rng.integers(0, nv, n)
    dst = (src + rng.integers(1, nv, n)) % nv
    elabel = rng.integers(0, len(EDGE_LABELS), n)
    k = len(query.edges)
    plants = int(n * spec.plant_per_10k / 10_000)
    if plants:
        segment = n // plants
        if segment < k:
            raise ValueError(f"{plants} instances of {k} edges do not fit in {n} edges")
        pools = {lab: np.flatnonzero(vlabel == i) for i, lab in enumerate(VERTEX_LABELS)}
        order = query.topological_order()
        for j in range(plants):
            at = j * segment + int(rng.integers(0, segment - k + 1))
            chosen: dict[str, int] = {}
            for v in query.vertices:
                pool = pools[v.label] if v.label is not None else np.arange(nv)
                pick = int(rng.choice(pool))
                while pick in chosen.values():
                    pick = int(rng.choice(pool))
                chosen[v.name] = pick
            for i, name in enumerate(order):
                e = query.edge(name)
                src[at + i], dst[at + i] = chosen[e.src], chosen[e.dst]
                if e.label is not None:
                    elabel[at + i] = EDGE_LABELS.index(e.label)
    t = np.arange(n, dtype=np.int64) * (S // spec.rate)

    def labels(names: tuple[str, ...], codes: np.ndarray) -> pa.Array:
        return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)),
                                              pa.array(names)).cast(pa.string())

    ids = pc.cast(pa.array(np.arange(nv)), pa.string())
    return pa.table({
        "t": t,
        "src": pc.take(ids, pa.array(src)),
        "dst": pc.take(ids, pa.array(dst)),
        "dur": np.zeros(n, dtype=np.int64),
        "seq": np.arange(n, dtype=np.int64),
        "label": labels(EDGE_LABELS, elabel),
        "src_label": labels(VERTEX_LABELS, vlabel[src]),
        "dst_label": labels(VERTEX_LABELS, vlabel[dst]),
    })  # fmt: skip


def generated_stream(name: str, spec: GenSpec, query: Any, region: int,
                     per_query: bool = False) -> Stream:
    table = generate_labelled(spec, query)
    what = "that query" if per_query else f"the query ({query.name})"
    return Stream(name, table, (spec.edges - region, spec.edges),
                  f"{spec.edges:,} edges, {spec.vertices:,} vertices, "
                  f"{spec.rate:,} edges/s, labels {len(VERTEX_LABELS)} vertex x "
                  f"{len(EDGE_LABELS)} edge, {spec.plant_per_10k:g} planted instances of "
                  f"{what} per 10,000 edges, seed {spec.seed}"
                  + ("; one stream per query of the query sweep" if per_query else ""))


# -- queries ---------------------------------------------------------------------------------


def window_of(amount: float | int, unit: str) -> Any:
    from graphcep.patterns.ddst import Window

    return Window.of(str(amount), unit)


def window_edges(count: int) -> Any:
    from graphcep.patterns.ddst import Window

    return Window.edges(count)


def mo_windows(mode: Mode) -> list[Any]:
    return [window_of(a, u) for a, u in mode.mo_windows]


def hs_windows(mode: Mode) -> list[Any]:
    return [window_of(a, u) for a, u in mode.hs_windows]


def ctu_windows(mode: Mode) -> list[Any]:
    return [window_of(a, u) for a, u in mode.ctu_windows]


def example_query(name: str) -> Any:
    from graphcep.lang.ddst import parse_ddst_file

    return parse_ddst_file(EXAMPLES / f"{name}.ddst")


#: Window of the query sweeps on real data: a middle window of each stream's window sweep.
REAL_QUERY_WINDOWS = {"mathoverflow": (1, "d"), "highschool": (30, "min")}
REAL_QUERY_NAMES = {"mathoverflow": "answers", "highschool": "contacts"}


def grown_real_query(stream: str, k: int, window: Any) -> Any:
    """The stream's example query grown to ``k`` edges, in the paper's style (its road query
    gains roads edge by edge): edges, degrees and timing constraints grow together.

    * mathoverflow -- answer ``A -> Q [a2q]`` then the asker's reply ``Q -> A [c2a]``; 3: a
      comment ``C -> Q [c2q]`` after the answer (the example query); 4: a second answer
      ``B -> Q [a2q]`` before that comment; 5: the asker's reply to it ``Q -> B [c2a]``.
      ``Q``'s in- and out-degrees grow.
    * highschool -- a chain of contacts ``PC -> PC -> PC* -> PC* -> PSI* -> PSI*``, each
      after the previous one (3 edges: the example query); the path grows.
    """
    from graphcep.patterns.ddst import DDSTBuilder

    b = DDSTBuilder(f"{REAL_QUERY_NAMES[stream]}{k}")
    if stream == "mathoverflow":
        edges = [("answer", "A", "Q", "a2q"), ("reply", "Q", "A", "c2a"),
                 ("remark", "C", "Q", "c2q"), ("answer2", "B", "Q", "a2q"),
                 ("reply2", "Q", "B", "c2a")][:k]  # fmt: skip
        order = [("answer", "reply"), ("answer", "remark"), ("answer2", "remark"),
                 ("answer2", "reply2")]  # fmt: skip
        names = {e[0] for e in edges}
        for v in dict.fromkeys(x for e in edges for x in e[1:3]):
            b.vertex(v)
        for name, src, dst, label in edges:
            b.edge(name, src, dst, label)
        for a, c in order:
            if a in names and c in names:
                b.before(a, c)
    elif stream == "highschool":
        classes = ["PC", "PC", "PC*", "PC*", "PSI*", "PSI*"][: k + 1]
        for i, label in enumerate(classes):
            b.vertex(f"s{i}", label)
        for i in range(1, k + 1):
            b.edge(f"c{i}", f"s{i - 1}", f"s{i}")
        b.order(*(f"c{i}" for i in range(1, k + 1)))
    else:
        raise ValueError(stream)
    return replace(b.within(1, "s").build(), window=window)


def shaped_query(shape: str, k: int, window: Any) -> Any:
    """A path, out-star or fan-out-2 tree of ``k`` edges, labelled from the label sets.

    * path: ``v0 -> v1 -> ... -> vk``, ``e1 < e2 < ... < ek``;
    * star: ``c -> l1 .. lk``, ``e1 < ei`` (a trigger edge, then the others);
    * tree: node ``i`` (breadth-first) hangs under ``(i - 1) // 2``; an edge one level
      lower precedes the edge above it (the paper's patent query, Fig. 8(c)).
    """
    from graphcep.patterns.ddst import DDSTBuilder

    b = DDSTBuilder(f"{shape}{k}")
    if shape == "path":
        for i in range(k + 1):
            b.vertex(f"v{i}", VERTEX_LABELS[i % len(VERTEX_LABELS)])
        for i in range(1, k + 1):
            b.edge(f"e{i}", f"v{i - 1}", f"v{i}", EDGE_LABELS[(i - 1) % len(EDGE_LABELS)])
        b.order(*(f"e{i}" for i in range(1, k + 1)))
    elif shape == "star":
        b.vertex("c", VERTEX_LABELS[0])
        for i in range(1, k + 1):
            b.vertex(f"l{i}", VERTEX_LABELS[1 + (i - 1) % (len(VERTEX_LABELS) - 1)])
            b.edge(f"e{i}", "c", f"l{i}", EDGE_LABELS[(i - 1) % len(EDGE_LABELS)])
        for i in range(2, k + 1):
            b.before("e1", f"e{i}")
    elif shape == "tree":
        depth = [0]
        for i in range(1, k + 1):
            depth.append(depth[(i - 1) // 2] + 1)
        for i in range(k + 1):
            b.vertex(f"n{i}", VERTEX_LABELS[depth[i] % len(VERTEX_LABELS)])
        for i in range(1, k + 1):
            b.edge(f"e{i}", f"n{(i - 1) // 2}", f"n{i}", EDGE_LABELS[(i - 1) % len(EDGE_LABELS)])
            parent = (i - 1) // 2
            if parent:
                b.before(f"e{i}", f"e{parent}")
    else:
        raise ValueError(shape)
    query = b.within(1, "s").build()
    return replace(query, window=window)


# -- engines ---------------------------------------------------------------------------------


@dataclass
class EngineSet:
    """The engine classes that imported, and why the others are missing."""

    classes: dict[str, type] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    report: str = "component"  # what their reports hold


def quiet_class(cls: type, hook: str) -> type:
    """``cls`` with a switch that turns ``hook`` into "no report" during warm-up.

    Warm-up pushes the edges before a measured block so that its first windows are full;
    their reports are not wanted, so the per-arrival evaluation (baseline: Algorithm DDST
    on the window; signature: the verification of a signature match; coloring: tests 1-5
    and VERIFY-MATCH) is skipped there. The incremental state -- windows, residues, colors
    -- is maintained as usual. Falls back to ``cls`` (warm-up at full cost) if the engine
    has no such method.
    """
    if not hasattr(cls, hook):
        return cls
    original = getattr(cls, hook)

    def hooked(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.bench_quiet:
            return None
        return original(self, *args, **kwargs)

    return type(f"Quiet{cls.__name__}", (cls,), {hook: hooked, "bench_quiet": False})


def warm_up(engines: EngineSet) -> None:
    """Run every engine once on a small generated stream before anything is timed (imports,
    numba compilation of the signature kernels); an engine that fails here is skipped."""
    query = shaped_query("tree", 4, window_of(1, "s"))
    table = generate_labelled(GenSpec(4_000, vertices=200, plant_per_10k=20), query)
    for name, cls in list(engines.classes.items()):
        try:
            engine = cls(query)
            for off in range(0, table.num_rows, 1_000):
                engine.push(table.slice(off, 1_000))
        except Exception as exc:
            traceback.print_exc()
            engines.skipped[name] = f"failed in the warm-up run: {type(exc).__name__}: {exc}"
            print(f"!! {name} engine skipped: {engines.skipped[name]}", file=sys.stderr)
            del engines.classes[name]


def reporting(cls: type, report: str) -> type:
    """``cls`` whose engines are made with ``report=report`` unless told otherwise."""
    if report == "component":
        return cls

    def init(self: Any, query: Any, **options: Any) -> None:
        options.setdefault("report", report)
        cls.__init__(self, query, **options)

    return type(cls.__name__, (cls,), {"__init__": init})


def load_engines(skip: frozenset[str], report: str = "component") -> EngineSet:
    found = EngineSet(report=report)
    modules = {
        "baseline": ("graphcep.engines.ddst.baseline", "DDSTBaselineEngine"),
        "signature": ("graphcep.engines.ddst.signature", "DDSTSignatureEngine"),
        "coloring": ("graphcep.engines.ddst.coloring", "DDSTColoringEngine"),
    }
    for name, (module, cls_name) in modules.items():
        if name in skip:
            found.skipped[name] = "skipped (--skip)"
            continue
        try:
            mod = __import__(module, fromlist=[cls_name])
            found.classes[name] = quiet_class(reporting(getattr(mod, cls_name), report),
                                              QUIET_HOOKS[name])
        except Exception as exc:  # an engine still being written must not stop the others
            found.skipped[name] = f"does not import: {type(exc).__name__}: {exc}"
            print(f"!! {name} engine skipped: {found.skipped[name]}", file=sys.stderr)
    return found


# -- measuring -------------------------------------------------------------------------------


@dataclass
class Run:
    """One engine on one configuration."""

    engine: str
    arrivals: int = 0  # timed arrivals (of the first run)
    seconds: float = math.inf  # best timed seconds over the runs
    runs: int = 0
    complete: bool = False  # covered the whole measured region
    verifications: int | None = None  # during the timed arrivals of the first run
    ranges: list[tuple[int, int]] = field(default_factory=list)  # timed arrivals per block
    # the best run's pushes: (first arrival, arrival after the last, seconds)
    pushes: list[tuple[int, int, float]] = field(default_factory=list)
    reports: pa.Table | None = None
    report_total: int = 0  # reports on the timed arrivals (kept after ``reports`` is dropped)
    error: str | None = None

    @property
    def rate(self) -> float | None:
        if self.error or not self.arrivals or not math.isfinite(self.seconds):
            return None
        return self.arrivals / self.seconds

    def seconds_on(self, ranges: list[tuple[int, int]]) -> float:
        """Seconds of the best run's pushes that lie within ``ranges``."""
        return sum(took for lo, hi, took in self.pushes
                   if any(a <= lo and hi <= b for a, b in ranges))


@dataclass
class Config:
    sweep: str
    stream: Stream
    query: Any
    what: str  # the varied parameter, as shown
    mean_window: float = 0.0
    runs: dict[str, Run] = field(default_factory=dict)
    checked: list[str] = field(default_factory=list)
    per_10k: float | None = None  # reports per 10,000 arrivals (engine timing the most)
    report_edges: float | None = None  # mean edges per report (same engine)
    read_rate: float | None = None  # edges/s of reading the batches alone (read_ceiling)
    fit_share: float | None = None  # arrivals fitting some query edge: the baseline's DDST runs
    report_cost: float | None = None  # seconds per arrival of building reports (floor_seconds)
    # seconds per arrival of an engine's own Algorithm DDST runs (floor_seconds)
    ddst_cost: dict[str, float] = field(default_factory=dict)


def blocks_of(region: tuple[int, int], count: int) -> list[tuple[int, int]]:
    lo, hi = region
    cuts = np.linspace(lo, hi, max(1, min(count, hi - lo)) + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a]


def one_pass(cls: type, cfg: Config, blocks: list[tuple[int, int]], budget: float,
             batch: int, profile: cProfile.Profile | None) -> Run:
    """Push the measured blocks (each after its untimed warm-up) and time the pushes.

    Each block gets ``budget / len(blocks)`` timed seconds; a block is cut short when they
    are spent (pushes start at 8 edges and double up to ``batch``). An engine that
    processed up to a block's warm-up start simply carries on, so an engine that keeps up
    processes the whole region as one stream.
    """
    stream, query = cfg.stream, cfg.query
    run = Run(cls.__name__)
    per_block = budget / len(blocks)
    engine, pos = None, -1
    seconds, outs, verif = 0.0, [], 0
    for b0, b1 in blocks:
        lo = int(stream.window_starts(query.window, np.array([b0]))[0])
        if engine is None or pos < lo:
            engine, pos = cls(query), lo
        if pos < b0:
            engine.bench_quiet = True
            engine.push(stream.table.slice(pos, b0 - pos))
            engine.bench_quiet = False
            pos = b0
        spent, chunk = 0.0, min(8, batch)
        while pos < b1 and spent < per_block:
            piece = stream.table.slice(pos, min(chunk, b1 - pos))
            before = getattr(engine, "verifications", 0)
            if profile is not None:
                profile.enable()
            started = time.perf_counter()
            out = engine.push(piece)
            took = time.perf_counter() - started
            spent += took
            if profile is not None:
                profile.disable()
            verif += getattr(engine, "verifications", 0) - before
            outs.append(out)
            run.pushes.append((pos, pos + piece.num_rows, took))
            pos += piece.num_rows
            chunk = min(2 * chunk, batch)
        run.ranges.append((b0, pos))
        run.arrivals += pos - b0
        seconds += spent
    run.seconds, run.runs = seconds, 1
    run.complete = all(r == b for r, (_, b) in zip((e for _, e in run.ranges), blocks,
                                                     strict=True))
    run.verifications = verif if hasattr(engine, "verifications") else None
    run.reports = pa.concat_tables(outs) if outs else None
    return run


def measure(name: str, cls: type, cfg: Config, mode: Mode, batch: int,
            profile: cProfile.Profile | None) -> Run:
    """Best of up to ``mode.repeat`` passes; repeats only when a pass covers the region and
    leaves room in the budget (a sampled pass is run once)."""
    budget = mode.budget(name)
    blocks = blocks_of(cfg.stream.region, mode.blocks)
    try:
        run = one_pass(cls, cfg, blocks, budget, batch, profile)
        run.report_total = report_count(run)
        spent = run.seconds
        while run.complete and run.runs < mode.repeat and spent + run.seconds < budget:
            spent += run_again(name, cls, cfg, run, blocks, batch)
    except Exception as exc:
        traceback.print_exc()
        return Run(name, error=f"{type(exc).__name__}: {exc}")
    run.engine = name
    return run


def run_again(name: str, cls: type, cfg: Config, run: Run, blocks: list[tuple[int, int]],
              batch: int) -> float:
    """One more pass over the same arrivals; keep the best time. Returns its seconds."""
    again = one_pass(cls, cfg, blocks, math.inf, batch, None)
    if report_count(again) != run.report_total:
        raise AssertionError(f"{name}: a repeated run reported differently "
                             f"({report_count(again)} vs {run.report_total} reports "
                             f"on {run.arrivals:,} arrivals)")
    if again.seconds < run.seconds:
        run.seconds, run.pushes = again.seconds, again.pushes
    run.runs += 1
    return again.seconds


def interleaved_rounds(cfgs: list[Config], engines: EngineSet, mode: Mode, batch: int) -> None:
    """``mode.rounds`` more passes per window sweep, its windows in turn, for every engine
    whose pass covers the region and fits its budget ``mode.repeat`` times.

    This machine's speed moves by up to 1.8x between minutes (the same configuration, the
    same code); repeats in a row time each window under whatever speed held then, so a
    sweep's spread could compare a fast minute with a slow one. Rounds give every window
    of a sweep the same minutes; the best of all passes is kept.
    """
    for group in window_groups(cfgs).values():
        for _ in range(mode.rounds):
            for cfg in group:
                blocks = blocks_of(cfg.stream.region, mode.blocks)
                for name, run in cfg.runs.items():
                    cls = engines.classes.get(name)
                    if cls is None or run.error or not run.complete or \
                            run.seconds * mode.repeat > mode.budget(name):
                        continue
                    run_again(name, cls, cfg, run, blocks, batch)


#: Timed seconds of the read ceiling per configuration (repeated passes, best kept).
READ_SECONDS = 0.5


def read_ceiling(cfg: Config, mode: Mode, batch: int) -> tuple[float, float]:
    """Edges/s of what every engine does first with a batch, and nothing else: convert it
    to engine columns and fit each query edge's labels (``batch_columns``, ``edge_fit``),
    over the measured region, best of passes repeated for at least ``READ_SECONDS`` (a
    pass takes milliseconds: one pass would time the machine's noise). No engine of this
    design is faster on the stream; the baseline's rate times 100 above this is a target
    no engine reading its input this way can reach.

    Also returns the share of arrivals that fit some query edge: those at which the
    baseline runs Algorithm DDST (it skips the others)."""
    from graphcep.engines.ddst.common import batch_columns, edge_fit

    q, stream = cfg.query, cfg.stream
    vlabel = {v.name: v.label for v in q.vertices}
    fits = [(vlabel[e.src], e.label, vlabel[e.dst]) for e in q.edges]
    lo, hi = stream.region
    pieces = [stream.table.slice(i, min(batch, hi - i)) for i in range(lo, hi, batch)]
    best, spent, runs, fitting = math.inf, 0.0, 0, 0
    while runs < mode.repeat or spent < READ_SECONDS:
        started, fitting = time.perf_counter(), 0
        for piece in pieces:
            cols = batch_columns(piece, 0)
            fit = [edge_fit(cols, *labels) for labels in fits]
            fitting += int(np.logical_or.reduce(fit).sum())
        took = time.perf_counter() - started
        best, spent, runs = min(best, took), spent + took, runs + 1
    return (hi - lo) / best, fitting / (hi - lo)


def floor_seconds(cls: type, cfg: Config, mode: Mode, batch: int) -> tuple[float, float] | None:
    """Seconds per arrival that ``cls`` spends building its reports (``Reports.add`` and
    ``Reports.table``) and running Algorithm DDST (the compiled ``ddst_kernel.ddst``),
    timed inside one more pass of ``cls`` over the measured blocks.

    Every exact engine makes the same reports, so reading the batches and building these
    rows is a floor under any engine's time. An engine's own DDST runs are a floor under
    its time too: their count is set by its filter (the paper's algorithm), their cost by
    the components it verifies, and the baseline's time is mostly the same kernel, so the
    ratio of the two does not depend on how fast the kernel is. Next to a missed target
    they say how much of the baseline's time is work the engine cannot skip."""
    from graphcep.engines.ddst import kernel as ddst_kernel
    from graphcep.engines.ddst.reports import Reports

    spent = {"reports": 0.0, "ddst": 0.0}
    add, table, kernel = Reports.add, Reports.table, ddst_kernel.ddst

    def timed(method: Any, what: str) -> Any:
        def run(*args: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args)
            finally:
                spent[what] += time.perf_counter() - started
        return run

    Reports.add, Reports.table = timed(add, "reports"), timed(table, "reports")  # type: ignore[method-assign]
    ddst_kernel.ddst = timed(kernel, "ddst")
    try:
        blocks = blocks_of(cfg.stream.region, mode.blocks)
        run = one_pass(cls, cfg, blocks, mode.budget("coloring"), batch, None)
    finally:
        Reports.add, Reports.table = add, table  # type: ignore[method-assign]
        ddst_kernel.ddst = kernel
    if not run.arrivals:
        return None
    return spent["reports"] / run.arrivals, spent["ddst"] / run.arrivals


def missed_floors(cfgs: list[Config], engines: EngineSet, mode: Mode, batch: int) -> None:
    """The DDST-runs floor of each filter engine that missed the ratio target at the
    largest window of a real-stream sweep and has none yet (coloring's comes with the
    report floor in :func:`run_config`)."""
    for group in window_groups(cfgs).values():
        largest = max(group, key=lambda c: c.mean_window)
        if largest.stream.name.startswith("generated"):
            continue
        for name in ("signature", "coloring"):
            cls = engines.classes.get(name)
            r = ratio(largest, name, "baseline")
            if cls is None or r is None or r >= SPEEDUP_TARGET or name in largest.ddst_cost:
                continue
            floors = floor_seconds(cls, largest, mode, batch)
            if floors is not None:
                largest.ddst_cost[name] = floors[1]


def report_count(run: Run) -> int:
    return 0 if run.reports is None else run.reports.num_rows


# -- checking --------------------------------------------------------------------------------


class Mismatch(AssertionError):
    """Two engines reported different matches."""


def common_arrivals(stream: Stream, a: Run, b: Run) -> np.ndarray:
    """The ``seq`` of every arrival both runs timed."""
    idx = [np.arange(s, min(ea, eb))
           for (s, ea), (_, eb) in zip(a.ranges, b.ranges, strict=True) if min(ea, eb) > s]
    return stream.seq[np.concatenate(idx)] if idx else np.zeros(0, dtype=np.int64)


def match_keys(reports: pa.Table | None, seqs: np.ndarray,
               by_edges: bool = True) -> tuple[int, set[tuple]]:
    """Number of reports triggered by ``seqs`` and their ``(trigger_seq, edge seqs)`` (edge
    seqs left empty unless ``by_edges``)."""
    if reports is None or reports.num_rows == 0 or len(seqs) == 0:
        return 0, set()
    mine = reports.filter(pc.is_in(reports.column("trigger_seq"), pa.array(seqs)))
    trig = mine.column("trigger_seq").to_numpy()
    edges = mine.column("edges").combine_chunks()
    lengths = pc.list_value_length(edges).to_numpy(zero_copy_only=False)
    flat = pc.list_flatten(edges).field("seq").to_numpy()
    parts = np.split(flat, np.cumsum(lengths)[:-1]) if len(lengths) else []
    keys = {(int(t), tuple(sorted(p.tolist())) if by_edges else ())
            for t, p in zip(trig, parts, strict=True)}
    return mine.num_rows, keys


def check(cfg: Config, report: str = "component") -> None:
    """Every pair of engines agrees on the arrivals both timed; raise :class:`Mismatch`.

    With ``report="new"`` a report's pairs depend on the arrivals evaluated before it,
    which differ where an engine times a sample: only the triggers are compared then (the
    tests check the pairs)."""
    by_edges = report == "component"
    ok = [r for r in cfg.runs.values() if r.error is None]
    for i, a in enumerate(ok):
        for b in ok[i + 1:]:
            seqs = common_arrivals(cfg.stream, a, b)
            na, ka = match_keys(a.reports, seqs, by_edges)
            nb, kb = match_keys(b.reports, seqs, by_edges)
            if na != nb or ka != kb:
                only_a = sorted(ka - kb)[:3]
                only_b = sorted(kb - ka)[:3]
                raise Mismatch(
                    f"{cfg.sweep} / {cfg.stream.name} / {cfg.query.name} / {cfg.what}: "
                    f"{a.engine} and {b.engine} disagree on {len(seqs):,} common arrivals: "
                    f"{na} vs {nb} reports; only {a.engine}: {only_a}; only {b.engine}: {only_b}")
            cfg.checked.append(f"{a.engine}={b.engine} on {len(seqs):,} arrivals ({na} reports)")


# -- the sweeps ------------------------------------------------------------------------------


def mean_window(stream: Stream, window: Any) -> float:
    pos = np.arange(*stream.region)
    return float(np.mean(pos - stream.window_starts(window, pos) + 1)) if len(pos) else 0.0


def configs(mode: Mode, notes: list[str], only: re.Pattern[str] | None) -> Iterable[Config]:
    """The configurations of every sweep, streams loaded (or generated) lazily."""

    def wanted(sweep: str, stream: str, what: str) -> bool:
        return only is None or bool(only.search(f"{sweep}:{stream}:{what}"))

    def make(sweep: str, stream: Stream, query: Any, what: str) -> Config:
        cfg = Config(sweep, stream, query, what)
        cfg.mean_window = mean_window(stream, query.window)
        return cfg

    # 1. window sweeps on generated streams: time and count windows
    base_q = shaped_query("tree", 4, window_of(1, "s"))
    gen: Stream | None = None
    for kind, sizes in (("time", mode.gen_windows_s), ("count", mode.gen_windows_n)):
        for size in sizes:
            w = window_of(size, "s") if kind == "time" else window_edges(size)
            if not wanted(f"window-{kind}", "generated", str(w)):
                continue
            if gen is None:
                gen = generated_stream("generated", GenSpec(mode.gen_edges), base_q,
                                       mode.gen_region)
            yield make(f"window-{kind}", gen, replace(base_q, window=w), str(w))
    # 2. query sweep on generated streams (a stream per query: its own planted instances)
    qs_window = window_of(2, "s")
    for shape in ("path", "star", "tree"):
        for k in mode.qs_sizes:
            if not wanted("query", "generated", f"{shape}{k}"):
                continue
            q = shaped_query(shape, k, qs_window)
            stream = generated_stream(f"generated-{shape}{k}", GenSpec(mode.qs_edges), q,
                                      mode.qs_region, per_query=True)
            yield make("query", stream, q, f"{shape} {k} edges, {qs_window}")
    # 3. real data, the example queries, windows growing
    real = (
        ("mathoverflow", load_mathoverflow, "answered_then_commented",
         [*mo_windows(mode), *(window_edges(n) for n in mode.mo_counts)]),
        ("highschool", load_highschool, "class_spread", hs_windows(mode)),
        ("ctu13", load_ctu, "irc_then_mail", ctu_windows(mode)),
    )
    for name, loader, query_name, windows in real:
        todo = [w for w in windows if wanted(f"window-{w.kind}", name, str(w))]
        grow = REAL_QUERY_WINDOWS.get(name)
        sizes = [k for k in mode.real_query_sizes if grow and wanted("query", name, f"{k} edges")]
        if not todo and not sizes:
            continue
        stream = loader(mode, notes)
        q = example_query(query_name)
        for w in todo:
            yield make(f"window-{w.kind}", stream, replace(q, window=w), str(w))
        # 4. the query grows on real data, at a middle window
        for k in sizes:
            w = window_of(*grow)
            yield make("query", stream, grown_real_query(name, k, w), f"{k} edges, {w}")


def run_config(cfg: Config, engines: EngineSet, mode: Mode, batch: int,
               profile_engine: str | None) -> str | None:
    """Measure every engine on ``cfg``; the profile text when one was asked for."""
    text = None
    for name in ENGINES:
        cls = engines.classes.get(name)
        if cls is None:
            continue
        prof = cProfile.Profile() if profile_engine == name else None
        cfg.runs[name] = run = measure(name, cls, cfg, mode, batch, prof)
        if run.error:
            engines.skipped.setdefault(name, f"failed on {cfg.sweep}/{cfg.stream.name}/"
                                             f"{cfg.what}: {run.error}")
            print(f"!! {name} failed: {run.error} (skipped from now on)", file=sys.stderr)
            del engines.classes[name]
        if prof is not None:
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
            text = f"cProfile of {name} on {cfg.sweep}/{cfg.stream.name}/{cfg.what} " \
                   f"({run.arrivals:,} timed arrivals):\n{buf.getvalue()}"
    check(cfg, engines.report)
    cfg.read_rate, cfg.fit_share = read_ceiling(cfg, mode, batch)
    fast = next((n for n in ("coloring", "signature") if n in engines.classes), None)
    if fast is not None and not cfg.stream.name.startswith("generated"):
        floors = floor_seconds(engines.classes[fast], cfg, mode, batch)
        if floors is not None:
            cfg.report_cost, cfg.ddst_cost[fast] = floors
    ok = [r for r in cfg.runs.values() if r.error is None and r.arrivals]
    if ok:
        most = max(ok, key=lambda r: r.arrivals)
        cfg.per_10k = 10_000 * report_count(most) / most.arrivals
        if most.reports is not None and most.reports.num_rows:
            sizes = pc.list_value_length(most.reports.column("edges"))
            cfg.report_edges = pc.mean(sizes).as_py()
    for run in cfg.runs.values():
        run.reports = None  # keep memory flat over a long run
    return text


# -- reporting -------------------------------------------------------------------------------


def fmt_rate(run: Run | None) -> str:
    if run is None:
        return "-"
    if run.error:
        return "failed"
    rate = run.rate
    if rate is None:
        return "-"
    sample = "" if run.complete else " (sample)"
    return f"{rate:,.0f}{sample}"


def ratio(cfg: Config, a: str, b: str) -> float | None:
    """How many times faster engine ``a`` is than ``b`` on the arrivals both timed.

    An engine out of budget is timed on the first arrivals of each block only; its rate
    and another engine's rate over a whole block would compare different arrivals (the
    first arrivals of a block can be denser or sparser than the rest). Pushes start at the
    same positions in every engine, so the common arrivals are whole pushes of both.
    """
    ra, rb = cfg.runs.get(a), cfg.runs.get(b)
    if ra is None or rb is None or ra.rate is None or rb.rate is None:
        return None
    common = [(lo, min(x, y)) for (lo, x), (_, y) in zip(ra.ranges, rb.ranges, strict=True)
              if min(x, y) > lo]
    sa, sb = ra.seconds_on(common), rb.seconds_on(common)
    return sb / sa if sa > 0 and sb > 0 else ra.rate / rb.rate


def fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}x"


def verif_rate(run: Run | None) -> str:
    if run is None or run.verifications is None or not run.arrivals:
        return "-"
    return f"{100 * run.verifications / run.arrivals:.1f}%"


def arrivals_cell(cfg: Config) -> str:
    parts = []
    for name in ENGINES:
        run = cfg.runs.get(name)
        if run is not None and run.error is None:
            parts.append(f"{run.arrivals:,}{'' if run.complete else '*'}×{run.runs}")
        else:
            parts.append("-")
    return " / ".join(parts)


def results_table(cfgs: list[Config]) -> str:
    head = ("| sweep | stream | query | window | mean edges in window | baseline edges/s "
            "| signature edges/s | coloring edges/s | sig / base | col / base "
            "| sig verif. | col verif. | reports per 10k arrivals | timed arrivals (base / sig / col) × runs |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for c in cfgs:
        reports = "-" if c.per_10k is None else f"{c.per_10k:,.1f}"
        lines.append(
            f"| {c.sweep} | {c.stream.name} | {c.query.name} ({len(c.query.edges)} edges) "
            f"| {c.what} | {c.mean_window:,.0f} | {fmt_rate(c.runs.get('baseline'))} "
            f"| {fmt_rate(c.runs.get('signature'))} | {fmt_rate(c.runs.get('coloring'))} "
            f"| {fmt_ratio(ratio(c, 'signature', 'baseline'))} "
            f"| {fmt_ratio(ratio(c, 'coloring', 'baseline'))} "
            f"| {verif_rate(c.runs.get('signature'))} | {verif_rate(c.runs.get('coloring'))} "
            f"| {reports} | {arrivals_cell(c)} |")
    return "\n".join(lines)


def window_groups(cfgs: list[Config]) -> dict[tuple[str, str], list[Config]]:
    groups: dict[tuple[str, str], list[Config]] = {}
    for c in cfgs:
        if c.sweep.startswith("window"):
            groups.setdefault((c.sweep, c.stream.name), []).append(c)
    return groups


def targets(cfgs: list[Config]) -> tuple[list[str], list[tuple[str, Config, str]]]:
    """Target lines, and the missed ones as (what, config, engine) for profiling."""
    lines: list[str] = []
    missed: list[tuple[str, Config, str]] = []
    for (sweep, stream), group in window_groups(cfgs).items():
        largest = max(group, key=lambda c: c.mean_window)
        for eng in ("signature", "coloring"):
            r = ratio(largest, eng, "baseline")
            if r is None:
                lines.append(f"- {stream} {sweep}, largest window {largest.what}: {eng} / "
                             "baseline not measured")
                continue
            ok = r >= SPEEDUP_TARGET
            lines.append(f"- {stream} {sweep}, largest window {largest.what}: {eng} "
                         f"{r:,.1f}x baseline (target >= {SPEEDUP_TARGET:.0f}x) -> "
                         + ("MET" if ok else f"NOT MET (short by {SPEEDUP_TARGET / r:.1f}x)")
                         + ("" if ok else ceiling_note(largest, eng)))
            if not ok:
                missed.append((f"{eng} vs baseline", largest, eng))
        rates = [(c.runs["coloring"].rate, c) for c in group
                 if "coloring" in c.runs and c.runs["coloring"].rate]
        if len(rates) >= 2:
            hi, lo = max(rates, key=lambda x: x[0]), min(rates, key=lambda x: x[0])
            spread = hi[0] / lo[0]
            ok = spread <= FLATNESS_TARGET
            lines.append(f"- {stream} {sweep}: coloring from {lo[0]:,.0f} ({lo[1].what}) to "
                         f"{hi[0]:,.0f} edges/s ({hi[1].what}), spread {spread:,.2f}x "
                         f"(target <= {FLATNESS_TARGET:.0f}x) -> "
                         + ("MET" if ok else
                            f"NOT MET ({spread / FLATNESS_TARGET:,.2f}x the allowed spread)"
                            + output_spread_note(group)))
            if not ok:
                missed.append(("coloring flatness", lo[1], "coloring"))
    return lines, missed


def ceiling_note(cfg: Config, engine: str) -> str:
    """What reading the input alone, reading it and building the reports, and ``engine``'s
    own DDST runs allow next to a missed ratio target; and how often the baseline runs
    DDST against how often an arrival is reported."""
    base = cfg.runs.get("baseline")
    if cfg.read_rate is None or base is None or not base.rate:
        return ""
    notes = [_ceiling("reading the batches alone", cfg.read_rate, base.rate)]
    rate = output_rate(cfg)
    if rate is not None:
        notes.append(_ceiling("reading them and building the reports", rate, base.rate))
    if cfg.fit_share is not None and cfg.per_10k is not None:
        reported = cfg.per_10k / 10_000
        note = (f"the baseline runs DDST at the {cfg.fit_share:.1%} of arrivals that fit "
                f"a query edge, and {reported:.1%} of arrivals are reported")
        if reported:  # a verifier runs DDST from scratch at least at every reported arrival
            note += (f": signature and coloring run DDST at least at those, so they make at "
                     f"most {cfg.fit_share / reported:,.1f}x fewer DDST runs than the baseline")
        notes.append(note)
    ddst = cfg.ddst_cost.get(engine)
    if ddst:
        room = 1 / (base.rate * ddst)
        notes.append(f"{engine}'s own Algorithm DDST runs take {1e6 * ddst:,.1f} ms per 1,000 "
                     f"arrivals and alone allow at most {room:,.1f}x the baseline ("
                     + ("below the target" if room < SPEEDUP_TARGET else "room for the target")
                     + ")")
    return "; " + "; ".join(notes)


def output_rate(cfg: Config) -> float | None:
    """Edges/s of reading the batches and building the reports, nothing else."""
    if cfg.read_rate is None or cfg.report_cost is None:
        return None
    return 1 / (1 / cfg.read_rate + cfg.report_cost)


def output_spread_note(group: list[Config]) -> str:
    """Next to a missed flatness target: how far reading plus reporting alone spreads over
    the same windows (reports grow with the window; no engine is flatter than its output)."""
    rates = [(r, c) for c in group if (r := output_rate(c)) is not None]
    if len(rates) < 2:
        return ""
    hi, lo = max(rates, key=lambda x: x[0]), min(rates, key=lambda x: x[0])
    return (f"; reading the batches and building the reports alone spreads "
            f"{hi[0] / lo[0]:,.2f}x, from {lo[0]:,.0f} ({lo[1].what}) to {hi[0]:,.0f} "
            f"edges/s ({hi[1].what})")


def _ceiling(what: str, rate: float, base_rate: float) -> str:
    room = rate / base_rate
    verdict = "below the target" if room < SPEEDUP_TARGET else "room for the target"
    return f"{what} runs at {rate:,.0f} edges/s, {room:,.1f}x the baseline ({verdict})"


def gmean(values: list[float]) -> float:
    return float(np.exp(np.mean(np.log(values)))) if values else float("nan")


def tradeoff(cfgs: list[Config]) -> list[str]:
    """The trade-off paragraph: mechanisms, with this run's numbers."""
    lines = []
    buckets: dict[str, list[tuple[float, float, float]]] = {}
    for c in cfgs:
        base, sig, col = (c.runs.get(n) for n in ENGINES)
        if not (sig and sig.rate and sig.verifications is not None and sig.arrivals):
            continue
        rate = sig.verifications / sig.arrivals
        key = "<= 1%" if rate <= 0.01 else "1-10%" if rate <= 0.10 else "> 10%"
        buckets.setdefault(key, []).append((
            rate, ratio(c, "signature", "baseline") or math.nan,
            ratio(c, "signature", "coloring") or math.nan))
    if buckets:
        parts = []
        for key in ("<= 1%", "1-10%", "> 10%"):
            rows = buckets.get(key, [])
            if rows:
                vs_base = [r[1] for r in rows if math.isfinite(r[1])]
                vs_col = [r[2] for r in rows if math.isfinite(r[2])]
                parts.append(f"verifying on {key} of arrivals ({len(rows)} configurations) it "
                             f"ran at {gmean(vs_base):,.1f}x the baseline and "
                             f"{gmean(vs_col):.2f}x coloring (geometric means)")
        lines.append(
            "- Signature: its filter is compiled and cheap per edge, but every signature "
            "match runs Algorithm DDST on the arriving edge's candidate component -- the "
            "baseline's own per-arrival work -- so its cost follows its verification rate: "
            + "; ".join(parts) + ". Where the window's candidate component holds every key "
            "of the query (dense windows of the real streams) nearly every arrival passes "
            "the filter and signature runs at the baseline's speed.")
    spreads = []
    for (sweep, stream), group in window_groups(cfgs).items():
        runs = [(c.mean_window, c.runs["coloring"]) for c in group
                if "coloring" in c.runs and c.runs["coloring"].rate]
        if len(runs) < 2:
            continue
        rates = [r.rate for _, r in runs]
        small, large = min(runs, key=lambda x: x[0])[1], max(runs, key=lambda x: x[0])[1]
        spreads.append(f"{stream} {sweep.split('-')[1]} windows {max(rates) / min(rates):,.2f}x "
                       f"(verifying on {verif_rate(small)} -> {verif_rate(large)} of arrivals)")
    if spreads:
        lines.append(
            "- Coloring: its verification tests look only at the arriving edge's red "
            "neighbourhood, so it verifies less often than signature, but its per-edge "
            "upkeep (hosting tests, recoloring, union-find) is compiled, and its cost "
            "grows with vertex degrees and red components in the window, and its "
            "verifications grow with the match rate. Spread of its throughput across window "
            "sizes (max / min): " + "; ".join(spreads) + ". It is insensitive to the window "
            "only where the window's graph stays sparse and matches stay rare.")
    dense = []
    for (_, stream), group in window_groups(cfgs).items():
        largest = max(group, key=lambda c: c.mean_window)
        if largest.per_10k is not None:
            size = ("" if largest.report_edges is None
                    else f" (mean report {largest.report_edges:,.0f} edge pairs)")
            dense.append(f"{stream} {largest.what} {largest.per_10k:,.1f}{size}")
    if dense:
        lines.append(
            "- Match rate bounds both: every arrival that is in its window's match graph is "
            "reported with its whole match component, which takes Algorithm DDST on that "
            "component whatever the filter, and the component grows with the window. Reports "
            "per 10,000 arrivals at the largest window of each sweep: " + "; ".join(dense)
            + ". Where that rate is a few per 10,000 (generated streams) both filters skip "
            "DDST on nearly every arrival and beat the baseline by orders of magnitude; where "
            "it is hundreds to thousands (the real streams: a MathOverflow user's answers and "
            "comments, the infected CTU host's repeated mail flows, lunch-time contacts) a "
            "large share of the arrivals the baseline evaluates must be verified anyway, each "
            "on a match component that grows with the window, and a filter saves at most the "
            "remainder.")
    return lines


def machine_info(state: str) -> list[str]:
    model = re.search(r"Model name:\s*(.+)", shell(["lscpu"]))
    mem = re.search(r"MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text())
    versions = ", ".join(f"{p} {metadata.version(p)}" for p in ("pyarrow", "numpy", "numba"))
    status = shell(["git", "status", "--porcelain", "--untracked-files=all", "src"])
    dirty = [line.split(maxsplit=1)[1] for line in status.splitlines() if line.strip()]
    return [
        f"- date: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- CPU: {model.group(1) if model else '?'}, {os.cpu_count()} cores"
        + (f"; RAM {int(mem.group(1)) / MIB / MIB:.1f} GiB" if mem else ""),
        f"- Python {platform.python_version()}; {versions}",
        f"- graphcep: git {shell(['git', 'rev-parse', '--short', 'HEAD'])} "
        + (f"+ uncommitted changes in {', '.join(dirty)}" if dirty else "(src/ clean)")
        + f"; src digest {state}",
    ]


def report(cfgs: list[Config], mode: Mode, args: argparse.Namespace, engines: EngineSet,
           notes: list[str], machine: list[str], elapsed: float) -> str:
    streams: dict[str, str] = {}  # description and region -> names
    for c in cfgs:
        s = c.stream
        key = f"{s.description}; measured arrivals [{s.region[0]:,}, {s.region[1]:,})"
        names = streams.setdefault(key, "")
        if s.name not in names.split(", "):
            streams[key] = f"{names}, {s.name}" if names else s.name
    target_lines, _ = targets(cfgs)
    cmd = " ".join(["python -m bench.ddst"] + ["--quick"] * args.quick
                   + ["--record"] * args.record)
    return "\n".join([
        f"## DDST event patterns: baseline vs signature vs coloring ({mode.name} run)",
        "",
        f"Command: `.venv/bin/{cmd}`",
        "",
        f"Engines pushed {args.batch:,}-edge batches (the first pushes of a block are smaller); "
        f"timed seconds per configuration: baseline {mode.base_budget:g} s, signature and "
        f"coloring {mode.fast_budget:g} s each (repeats included), over {mode.blocks} "
        f"blocks evenly spread over the measured region; `(sample)` / `*`: the engine ran out "
        f"of its budget and was timed on the first arrivals of each block only (count in "
        f"the last column). Ratios compare the arrivals both engines timed: a sampled "
        f"engine's against the other engine's same pushes. edges/s = timed arrivals / timed "
        f"seconds, best of the runs: up to "
        f"{mode.repeat} in a row, then {mode.rounds} more round(s) over each window sweep, its "
        f"windows in turn, so that a sweep's spread compares windows timed in the same minutes "
        f"(engines whose pass covers the region {mode.repeat} times within budget).",
        "",
        "Streams (the measured region is the arrivals in brackets; the edges before it are "
        "pushed untimed so that every measured window is full):",
        *[f"- {names}: {key}" for key, names in streams.items()],
        *[f"- NOTE: {n}" for n in notes],
        *[f"- NOTE: {e} engine {why}" for e, why in engines.skipped.items()],
        "",
        results_table(cfgs),
        "",
        "The machine's 2 cores are shared with other work (load before and after below): "
        "compare figures within one run; the same configuration's throughput has varied by "
        "up to 4x between runs taken at different loads.",
        "",
        "Outputs: every pair of engines reported the same matches (count and "
        "(trigger_seq, edge seqs)) on the arrivals both timed, in every configuration.",
        "",
        "Targets (signature and coloring >= 100x baseline at the largest window; coloring "
        "within 2x across window sizes):",
        *(target_lines or ["- (not enough engines ran to evaluate)"]),
        "",
        "Trade-off observed:",
        *tradeoff(cfgs),
        "",
        "Machine (graphcep state at the start of the run):",
        *machine,
        f"- load (uptime) after: {shell(['uptime'])}",
        f"- wall time of the run: {elapsed / 60:.1f} min",
    ])


# -- main ------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.ddst",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (about 3 min)")
    parser.add_argument("--skip", default="", help=f"comma list of {','.join(ENGINES)}")
    parser.add_argument("--only", default=None,
                        help="regular expression on 'sweep:stream:window-or-query' "
                             "(e.g. 'mathoverflow' or 'query:.*:star')")
    parser.add_argument("--batch", type=int, default=1024, help="edges per push")
    parser.add_argument("--report", choices=("component", "new"), default="component",
                        help="what the engines' reports hold (--record measures component)")
    parser.add_argument("--profile", default=None, choices=ENGINES,
                        help="print cProfile's top entries of this engine's timed pushes")
    add_record_arguments(parser)
    args = parser.parse_args(argv)
    args.skip = frozenset(s for s in args.skip.split(",") if s)
    if args.skip - set(ENGINES):
        parser.error(f"unknown engine: {', '.join(sorted(args.skip - set(ENGINES)))}")
    if args.record and (args.only or args.report != "component"):
        parser.error("--record records a whole run in the default report mode: leave out "
                     "--only and --report")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    mode = MODES["quick" if args.quick else "full"]
    started = time.perf_counter()
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    snapshot, state = snapshot_source() if args.snapshot else (ROOT / "src", source_state())
    use_source(snapshot)
    machine = [*machine_info(state), f"- load (uptime) before: {shell(['uptime'])}"]
    if args.snapshot:
        machine.append("- graphcep imported from a copy of src/ taken at the start "
                       f"(bench/data/{snapshot.name})")
    engines = load_engines(args.skip, args.report)
    warm_up(engines)
    notes: list[str] = []
    only = re.compile(args.only) if args.only else None
    done: list[Config] = []
    try:
        for cfg in configs(mode, notes, only):
            prof = run_config(cfg, engines, mode, args.batch, args.profile)
            done.append(cfg)
            print(f"[{time.perf_counter() - started:6.1f} s] {cfg.sweep:12} "
                  f"{cfg.stream.name:20} {cfg.what:24} window~{cfg.mean_window:9,.0f}  "
                  + "  ".join(f"{n} {fmt_rate(cfg.runs.get(n)):>16}" for n in ENGINES),
                  flush=True)
            if prof:
                print(prof, flush=True)
    except Mismatch as exc:
        print(f"\n!!! OUTPUT MISMATCH -- aborting: {exc}\n", file=sys.stderr)
        if done:
            print(results_table(done), file=sys.stderr)
        return 1
    if mode.rounds and not args.profile:
        print(f"[{time.perf_counter() - started:6.1f} s] {mode.rounds} interleaved round(s) "
              "over the window sweeps", flush=True)
        interleaved_rounds(done, engines, mode, args.batch)
    missed_floors(done, engines, mode, args.batch)
    after = source_state(snapshot / "graphcep") if args.snapshot else source_state()
    if after != state:
        machine.append(f"- WARNING: graphcep's source changed during the run (now {after})")
    text = report(done, mode, args, engines, notes, machine, time.perf_counter() - started)
    print(text)
    if args.record:
        record(text, START_MARK, END_MARK)
    return 0 if not any(r.error for c in done for r in c.runs.values()) else 1


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
