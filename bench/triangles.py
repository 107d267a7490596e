"""Temporal-triangle benchmark: graphcep (in-process and on Spark) against batch joins.

Run ``python -m bench.triangles [--streams S1,S2] [--skip naive,...] [--repeat N] [--record]``
from the repository root. See ``bench/README.md`` for what each method is.

Every method runs in its own spawned child process, one at a time, so its peak memory
(``ru_maxrss``) is its own. Each timed method runs once as a warm-up ("first") and then
``--repeat`` more times (Spark steps ``--spark-repeat`` times: Spark keeps warming up over
several runs); "best" is the fastest of those and edges/s = stream edges / best.
All methods must report the same triangle count per stream.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import multiprocessing
import os
import platform
import re
import resource
import subprocess
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "bench" / "data"
RESULTS_FILE = ROOT / "bench" / "RESULTS.md"
QUERY_FILE = ROOT / "examples" / "triangle.sal"
WINDOW_US = 10_000_000  # W = 10 s, in the edge schema's integer microseconds
SEED = 1
SPARK_MASTER = "local[2]"
START_MARK = "<!-- bench.triangles:start -->"
END_MARK = "<!-- bench.triangles:end -->"
METHODS = ("local", "file", "spark", "sparksql", "duckdb", "polars", "naive")
MIB = 1024.0


@dataclass(frozen=True)
class Stream:
    """A generated netflow stream (``generate_netflow``) and its cache files."""

    name: str
    edges: int
    vertices: int
    rate: int
    seed: int = SEED

    @property
    def stem(self) -> str:
        return f"{self.name}-e{self.edges}-v{self.vertices}-r{self.rate}-s{self.seed}"

    @property
    def arrow_path(self) -> Path:
        return DATA_DIR / f"{self.stem}.arrow"

    @property
    def vast_path(self) -> Path:
        return DATA_DIR / f"{self.stem}.vast.csv"


STREAMS = {
    "S1": Stream("S1", 200_000, 5_000, 10_000),
    "S2": Stream("S2", 1_000_000, 25_000, 60_000),
}


@dataclass
class Row:
    """One line of the results table."""

    stream: str
    method: str
    family: str  # graphcep-local, graphcep-spark, spark-sql, duckdb, polars, naive, setup
    edges: int
    triangles: int | None = None
    first_s: float | None = None
    best_s: float | None = None
    rss_mib: float | None = None
    jvm_mib: float | None = None
    note: str = ""
    runs: int = 0  # timed runs after the warm-up

    @property
    def edges_per_s(self) -> float | None:
        if self.best_s is None or self.best_s <= 0 or self.triangles is None:
            return None
        return self.edges / self.best_s


# -- data --------------------------------------------------------------------------------


def ensure_stream(stream: Stream) -> None:
    """Generate the stream once and cache it as Arrow IPC and as a VAST CSV file."""
    if stream.arrow_path.exists() and stream.vast_path.exists():
        return
    from graphcep.io.generator import generate_netflow, write_edges

    DATA_DIR.mkdir(parents=True, exist_ok=True)
    table = generate_netflow(stream.edges, stream.vertices, stream.rate, seed=stream.seed)
    tmp = stream.arrow_path.with_suffix(".tmp")
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    write_edges(table, stream.vast_path, "vast")
    tmp.replace(stream.arrow_path)


def load_table(stream: Stream) -> pa.Table:
    """The generated stream, read fully into memory (not memory-mapped)."""
    with pa.OSFile(str(stream.arrow_path)) as source:
        return pa.ipc.open_file(source).read_all()


def triangle_query():
    from graphcep.lang.sal import parse_query

    return parse_query(QUERY_FILE.read_text(), str(QUERY_FILE))


# -- measuring ---------------------------------------------------------------------------


def measure(fn: Callable[[], int], repeat: int) -> tuple[int, float, float]:
    """Run ``fn`` once (warm-up) and ``repeat`` more times: (count, first s, best s)."""
    started = time.perf_counter()
    count = fn()
    first = time.perf_counter() - started
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        again = fn()
        times.append(time.perf_counter() - started)
        if again != count:
            raise AssertionError(f"count changed between runs: {count} then {again}")
    return count, first, min(times) if times else first


def peak_rss_mib() -> float:
    """Peak resident set size of this process (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / MIB


def hwm_mib(pid: int | str = "self") -> float | None:
    """VmHWM (peak RSS since start or since :func:`reset_hwm`) of a process, MiB."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    found = re.search(r"VmHWM:\s+(\d+)\s+kB", status)
    return int(found.group(1)) / MIB if found else None


def reset_hwm(pid: int | str = "self") -> None:
    """Reset a process's VmHWM to its current RSS (Linux >= 4.0 ``clear_refs`` 5)."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/clear_refs").write_text("5")


def descendants(pid: int) -> list[int]:
    """Pids of all live descendants of ``pid`` (from ``/proc/*/stat``)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


# -- 1. graphcep in-process --------------------------------------------------------------


def job_local(stream: Stream, repeat: int) -> list[Row]:
    check_source()
    from graphcep.runtime.local import run_local

    query, table = triangle_query(), load_table(stream)
    count, first, best = measure(lambda: run_local(query, table)[0].num_rows, repeat)
    return [
        Row(stream.name, "1 graphcep run_local (Arrow table in memory)", "graphcep-local",
            stream.edges, count, first, best, peak_rss_mib(),
            note="first run includes numba JIT/cache load", runs=repeat)
    ]


def job_local_file(stream: Stream, repeat: int) -> list[Row]:
    check_source()
    from graphcep.io.readers import read_edges
    from graphcep.runtime.local import run_local

    query = triangle_query()

    def read() -> pa.Table:
        result = read_edges(stream.vast_path, "vast")
        if result.rejects.num_rows or result.edges.num_rows != stream.edges:
            raise AssertionError(f"read {result.edges.num_rows} edges, {result.rejects.num_rows} rejects")
        return result.edges

    count, first, best = measure(lambda: run_local(query, read())[0].num_rows, repeat)
    e2e_rss = peak_rss_mib()
    _, read_first, read_best = measure(lambda: read().num_rows, repeat)
    return [
        Row(stream.name, "1r graphcep read_edges (VAST file -> Arrow), read only", "read",
            stream.edges, None, read_first, read_best, None, note="parse only, no matching",
            runs=repeat),
        Row(stream.name, "1e graphcep read_edges + run_local (VAST file, end to end)",
            "graphcep-local-e2e", stream.edges, count, first, best, e2e_rss, runs=repeat),
    ]


# -- 2./3. Spark: graphcep on Spark and the Spark SQL self-join ---------------------------


def spark_sql_text(view: str = "edges", w: int = WINDOW_US, broadcast: bool = False) -> str:
    """Time-bucketed equi-join form of Listing 1 (bucket = t DIV W, two buckets per join).

    e1 is joined to e2 in buckets {b1, b1 + 1} (e1 rows duplicated), the 2-paths to e3 in
    buckets {b1, b1 + 1} by duplicating the (much smaller) e3 side as {b3 - 1, b3}.
    ``broadcast`` adds a ``BROADCAST(e3)`` hint so the ~17M 2-paths (S2) are not shuffled.
    """
    hint = "/*+ BROADCAST(e3) */ " if broadcast else ""
    return f"""
WITH e AS (SELECT t, src, dst, t DIV {w} AS b FROM {view}),
e1 AS (SELECT t AS t1, src AS x1, dst AS x2, b AS b1, explode(array(b, b + 1)) AS jb FROM e),
p AS (
  SELECT e1.x1, e1.x2, e2.dst AS x3, e1.t1, e2.t AS t2, e1.b1
  FROM e1 JOIN e AS e2 ON e2.src = e1.x2 AND e2.b = e1.jb
  WHERE e1.t1 < e2.t AND e2.t <= e1.t1 + {w}
    AND e1.x1 <> e1.x2 AND e2.dst <> e1.x1 AND e2.dst <> e1.x2
),
e3 AS (SELECT t AS t3, src AS s3, dst AS d3, explode(array(b - 1, b)) AS jb FROM e)
SELECT {hint}p.x1, p.x2, p.x3, p.t1, p.t2, e3.t3
FROM p JOIN e3 ON e3.s3 = p.x3 AND e3.d3 = p.x1 AND e3.jb = p.b1
WHERE p.t2 < e3.t3 AND e3.t3 - p.t1 <= {w}
"""


class SparkMemory:
    """Peak RSS of the driver, the JVM and Spark's Python workers over one step."""

    def __init__(self) -> None:
        self.jvm = next((p for p in descendants(os.getpid()) if "java" in cmdline(p)), None)

    def workers(self) -> list[int]:
        return [p for p in descendants(self.jvm) if "python" in cmdline(p)] if self.jvm else []

    def start(self) -> None:
        for pid in ["self", self.jvm, *self.workers()]:
            if pid is not None:
                reset_hwm(pid)

    def stop(self) -> tuple[float | None, float | None, float]:
        jvm = hwm_mib(self.jvm) if self.jvm else None
        workers = sum(hwm_mib(p) or 0.0 for p in self.workers())
        return hwm_mib(), jvm, workers


def spark_step(stream: Stream, label: str, family: str, fn: Callable[[], int],
               repeat: int, memory: SparkMemory, extra: dict[str, Any] | None = None) -> Row:
    memory.start()
    count, first, best = measure(fn, repeat)
    driver, jvm, workers = memory.stop()
    note = f"Python workers peak {workers:.0f} MiB"
    if extra:
        note += "; " + run_spark_plan(extra)
    return Row(stream.name, label, family, stream.edges, count, first, best, driver, jvm,
               note=note, runs=repeat)


def run_spark_plan(extra: dict[str, Any]) -> str:
    """``RunStats.extra`` of ``run_spark`` in words: strategy, shards, shard length."""
    words = [str(extra["strategy"])] if "strategy" in extra else []
    if "shards" in extra:
        words.append(f"{extra['shards']} shard(s)")
    if extra.get("shard_length_us"):
        words.append(f"of {extra['shard_length_us'] / 1e6:g} s")
    return " ".join(words)


def graphcep_runner(run_spark: Callable, spark: Any, query: Any, edges: Callable[[], Any],
                    extra: dict[str, Any], after: Callable[[], None] | None = None
                    ) -> Callable[[], int]:
    """A timed function: ``run_spark`` on ``edges()``, keeping ``RunStats.extra`` in ``extra``."""

    def run() -> int:
        matches, stats = run_spark(spark, query, edges())
        extra.update(stats.extra)
        if after is not None:
            after()
        return matches.num_rows

    return run


def job_spark(stream: Stream, repeat: int, methods: frozenset[str]) -> list[Row]:
    check_source()
    from graphcep.runtime.spark import read_edges_spark, run_spark, spark_session

    started = time.perf_counter()
    spark = spark_session(SPARK_MASTER)
    startup = time.perf_counter() - started
    memory = SparkMemory()
    rows = [Row(stream.name, f"Spark session start-up ({SPARK_MASTER}, JVM)", "setup",
                stream.edges, first_s=startup, rss_mib=hwm_mib(),
                jvm_mib=hwm_mib(memory.jvm) if memory.jvm else None)]
    query, table = triangle_query(), load_table(stream)
    started = time.perf_counter()
    df = spark.createDataFrame(table).cache()
    if df.count() != stream.edges:
        raise AssertionError("cached DataFrame has the wrong number of rows")
    rows.append(Row(stream.name, "Spark createDataFrame(Arrow) + cache + count", "setup",
                    stream.edges, first_s=time.perf_counter() - started))
    try:
        rows += spark_methods(spark, stream, df, query, repeat, methods, memory, read_edges_spark,
                              run_spark)
    finally:
        spark.stop()
    return rows


def spark_methods(spark: Any, stream: Stream, df: Any, query: Any, repeat: int,
                  methods: frozenset[str], memory: SparkMemory, read_edges_spark: Callable,
                  run_spark: Callable) -> list[Row]:
    rows = []
    if "spark" in methods:
        extra: dict[str, Any] = {}
        run = graphcep_runner(run_spark, spark, query, lambda: df, extra)
        rows.append(spark_step(stream, "2a graphcep run_spark (cached DataFrame, warm session)",
                               "graphcep-spark", run, repeat, memory, extra))
        core = df.select("t", "src", "dst", "dur", "seq")  # served by the same cache
        run = graphcep_runner(run_spark, spark, query, lambda: core, extra)
        rows.append(spark_step(stream, "2a' graphcep run_spark, same cached DF projected to core columns",
                               "graphcep-spark-core", run, repeat, memory, extra))
    if "sparksql" in methods:
        df.createOrReplaceTempView("edges")
        for broadcast in (False, True):
            sql = spark_sql_text(broadcast=broadcast)
            label = "3 Spark SQL bucketed self-join" + (", BROADCAST(e3) hint" if broadcast else "")
            rows.append(spark_step(stream, f"{label}, .count() (same session/DF)", "spark-sql",
                                   lambda sql=sql: spark.sql(sql).count(), repeat, memory))
    if "spark" in methods:
        def read_vast() -> Any:
            edges_df, _, lines = read_edges_spark(spark, str(stream.vast_path), "vast")
            if lines != stream.edges:
                raise AssertionError(f"read_edges_spark read {lines} lines")
            return edges_df

        extra = {}
        # read_edges_spark caches its parse: drop it after every run
        run = graphcep_runner(run_spark, spark, query, read_vast, extra, spark.catalog.clearCache)
        rows.append(spark_step(stream, "2b graphcep Spark end to end (read_edges_spark VAST + run_spark)",
                               "graphcep-spark-e2e", run, repeat, memory, extra))
    return rows


# -- 4. DuckDB and Polars ----------------------------------------------------------------


def duckdb_sql(variant: str, w: int = WINDOW_US) -> str:
    """Listing 1 in DuckDB SQL: ``range`` (inequality join predicates) or ``bucket``."""
    if variant == "range":
        return f"""
SELECT count(*) FROM edges e1
JOIN edges e2 ON e2.src = e1.dst AND e2.t > e1.t AND e2.t <= e1.t + {w}
JOIN edges e3 ON e3.src = e2.dst AND e3.dst = e1.src AND e3.t > e2.t AND e3.t <= e1.t + {w}
WHERE e1.src <> e1.dst AND e2.dst <> e1.src AND e2.dst <> e1.dst
"""
    return f"""
WITH e AS (SELECT t, src, dst, t // {w} AS b FROM edges),
e1 AS (SELECT t AS t1, src AS x1, dst AS x2, b AS b1, unnest([b, b + 1]) AS jb FROM e),
p AS (
  SELECT e1.x1, e1.x2, e2.dst AS x3, e1.t1, e2.t AS t2, e1.b1
  FROM e1 JOIN e AS e2 ON e2.src = e1.x2 AND e2.b = e1.jb
  WHERE e1.t1 < e2.t AND e2.t <= e1.t1 + {w}
    AND e1.x1 <> e1.x2 AND e2.dst <> e1.x1 AND e2.dst <> e1.x2
),
e3 AS (SELECT t AS t3, src AS s3, dst AS d3, unnest([b - 1, b]) AS jb FROM e)
SELECT count(*) FROM p JOIN e3 ON e3.s3 = p.x3 AND e3.d3 = p.x1 AND e3.jb = p.b1
WHERE p.t2 < e3.t3 AND e3.t3 - p.t1 <= {w}
"""


def job_duckdb(stream: Stream, repeat: int, variant: str) -> list[Row]:
    import duckdb

    table = load_table(stream)
    con = duckdb.connect()
    con.register("edges", table)
    sql = duckdb_sql(variant)
    count, first, best = measure(lambda: int(con.execute(sql).fetchone()[0]), repeat)
    label = {"range": "range-join predicates", "bucket": "bucketed equi-joins"}[variant]
    threads = con.execute("SELECT current_setting('threads')").fetchone()[0]
    return [Row(stream.name, f"4 DuckDB SQL, {label}", "duckdb", stream.edges, count, first,
                best, peak_rss_mib(), runs=repeat, note=f"{threads} threads")]


def polars_count(table: pa.Table, variant: str, w: int = WINDOW_US) -> int:
    """Listing 1 with Polars lazy joins: ``join_where`` or ``bucket`` (equi-join + filter)."""
    import polars as pl

    e = pl.from_arrow(table.select(["t", "src", "dst"])).lazy()
    e1 = e.select(t1="t", x1="src", x2="dst")
    e2 = e.select(t2="t", s2="src", x3="dst")
    e3 = e.select(t3="t", s3="src", d3="dst")
    col = pl.col
    if variant == "join_where":
        p = e1.join_where(e2, col("x2") == col("s2"), col("t2") > col("t1"),
                          col("t2") <= col("t1") + w)
        p = p.filter((col("x1") != col("x2")) & (col("x3") != col("x1")) & (col("x3") != col("x2")))
        tri = p.join_where(e3, col("x3") == col("s3"), col("x1") == col("d3"),
                           col("t3") > col("t2"), col("t3") <= col("t1") + w)
    else:
        def two_buckets(frame: pl.LazyFrame, t: str, shift: int) -> pl.LazyFrame:
            b = col(t) // w
            return frame.with_columns(jb=pl.concat_list(b, b + shift)).explode("jb")

        e1b = two_buckets(e1, "t1", 1).with_columns(b1=col("t1") // w)
        e2b = e2.with_columns(b2=col("t2") // w)
        p = e1b.join(e2b, left_on=["x2", "jb"], right_on=["s2", "b2"])
        p = p.filter((col("t1") < col("t2")) & (col("t2") <= col("t1") + w)
                     & (col("x1") != col("x2")) & (col("x3") != col("x1"))
                     & (col("x3") != col("x2")))
        tri = p.join(two_buckets(e3, "t3", -1), left_on=["x3", "x1", "b1"],
                     right_on=["s3", "d3", "jb"])
        tri = tri.filter((col("t2") < col("t3")) & (col("t3") - col("t1") <= w))
    return int(tri.select(pl.len()).collect().item())


def job_polars(stream: Stream, repeat: int, variant: str) -> list[Row]:
    import polars as pl

    table = load_table(stream)
    count, first, best = measure(lambda: polars_count(table, variant), repeat)
    label = {"join_where": "join_where", "bucket": "bucketed join + filter"}[variant]
    return [Row(stream.name, f"4 Polars lazy, {label}", "polars", stream.edges, count, first,
                best, peak_rss_mib(), runs=repeat,
                note=f"{pl.thread_pool_size()} threads, incl. from_arrow")]


# -- 5. naive per-edge Python matcher ----------------------------------------------------


def naive_count(ts: list[int], srcs: list[str], dsts: list[str], w: int,
                deadline: float) -> int | None:
    """Triangles x1->x2->x3->x1, each new edge taken as the closing edge e3 = (x3 -> x1).

    Window edges (t >= t3 - w) are kept in per-vertex in-edge deques and per-(src, dst)
    deques, all in time order, so eviction is a popleft. Returns None past ``deadline``.
    """
    window: deque[tuple[int, str, str]] = deque()
    into: dict[str, deque[tuple[int, str]]] = {}
    pairs: dict[tuple[str, str], deque[int]] = {}
    count = 0
    for i, (t3, c, a) in enumerate(zip(ts, srcs, dsts, strict=True)):
        if i & 0x3FFF == 0 and time.perf_counter() > deadline:
            return None
        while window and window[0][0] < t3 - w:
            _, s, d = window.popleft()
            into[d].popleft()
            times = pairs[(s, d)]
            times.popleft()
            if not times:
                del pairs[(s, d)]
        if c != a:
            count += _close(into.get(c, ()), pairs, a, c, t3)
        window.append((t3, c, a))
        into.setdefault(a, deque()).append((t3, c))
        pairs.setdefault((c, a), deque()).append(t3)
    return count


def _close(into_c: Iterable[tuple[int, str]], pairs: dict[tuple[str, str], deque[int]],
           a: str, c: str, t3: int) -> int:
    """Matches closed by edge c->a at t3: e2 = b->c (t2 < t3), e1 = a->b (t1 < t2)."""
    found = 0
    for t2, b in into_c:
        if t2 >= t3:
            break
        if b in (a, c):
            continue
        for t1 in pairs.get((a, b), ()):
            if t1 >= t2:
                break
            found += 1
    return found


def job_naive(stream: Stream, timeout_s: float) -> list[Row]:
    table = load_table(stream)
    started = time.perf_counter()
    ordered = table.sort_by([("t", "ascending"), ("seq", "ascending")])
    count = naive_count(ordered.column("t").to_pylist(), ordered.column("src").to_pylist(),
                        ordered.column("dst").to_pylist(), WINDOW_US, started + timeout_s)
    elapsed = time.perf_counter() - started
    label = "5 naive per-edge Python matcher (dict + deques)"
    if count is None:
        return [Row(stream.name, label, "naive", stream.edges, None, None, None, peak_rss_mib(),
                    note=f"gave up after {timeout_s:.0f} s")]
    return [Row(stream.name, label, "naive", stream.edges, count, elapsed, elapsed,
                peak_rss_mib(), note="single run")]


# -- orchestration -----------------------------------------------------------------------


def jobs_for(stream: Stream, skip: frozenset[str], repeat: int, spark_repeat: int,
             naive_timeout: float) -> list[tuple[str, Callable[..., list[Row]], tuple]]:
    """(name, function, args) of every child-process job for one stream."""
    jobs: list[tuple[str, Callable[..., list[Row]], tuple]] = []
    if "local" not in skip:
        jobs.append(("local", job_local, (stream, repeat)))
    if "file" not in skip:
        jobs.append(("file", job_local_file, (stream, repeat)))
    spark_methods_wanted = frozenset({"spark", "sparksql"} - skip)
    if spark_methods_wanted:
        jobs.append(("spark", job_spark, (stream, spark_repeat, spark_methods_wanted)))
    if "duckdb" not in skip:
        jobs += [(f"duckdb-{v}", job_duckdb, (stream, repeat, v)) for v in ("range", "bucket")]
    if "polars" not in skip:
        jobs += [(f"polars-{v}", job_polars, (stream, repeat, v)) for v in ("join_where", "bucket")]
    if "naive" not in skip:
        jobs.append(("naive", job_naive, (stream, naive_timeout)))
    return jobs


def run_child(name: str, fn: Callable[..., list[Row]], args: tuple, stream: Stream) -> list[Row]:
    """Run one job in a fresh spawned interpreter; a failure becomes a FAILED row."""
    print(f"[{time.strftime('%H:%M:%S')}] {stream.name} {name} ...", file=sys.stderr, flush=True)
    context = multiprocessing.get_context("spawn")
    try:
        with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
            rows = pool.submit(fn, *args).result()
    except Exception as exc:  # noqa: BLE001 -- report and go on with the other methods
        traceback.print_exc()
        return [Row(stream.name, f"{name}: FAILED", "failed", stream.edges,
                    note=f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}")]
    for row in rows:
        print(f"    {row.method}: triangles={row.triangles} first={fmt_s(row.first_s)} "
              f"best={fmt_s(row.best_s)} rss={fmt_mib(row.rss_mib)}", file=sys.stderr, flush=True)
    return rows


def check_counts(rows: list[Row]) -> dict[str, set[int]]:
    """Stream -> set of triangle counts reported (a set of one when all agree)."""
    counts: dict[str, set[int]] = {}
    for row in rows:
        if row.triangles is not None:
            counts.setdefault(row.stream, set()).add(row.triangles)
    return counts


# -- reporting ---------------------------------------------------------------------------


def fmt_s(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def fmt_mib(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def fmt_rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def results_table(rows: list[Row]) -> str:
    head = ("| stream | method | triangles | first s | best s | timed runs | edges/s (best) "
            "| peak RSS MiB (Python) | JVM peak MiB | notes |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        lines.append(
            f"| {r.stream} | {r.method} | {'-' if r.triangles is None else f'{r.triangles:,}'} "
            f"| {fmt_s(r.first_s)} | {fmt_s(r.best_s)} | {r.runs or '-'} | {fmt_rate(r.edges_per_s)} "
            f"| {fmt_mib(r.rss_mib)} | {fmt_mib(r.jvm_mib)} | {r.note} |"
        )
    return "\n".join(lines)


def best_rate(rows: list[Row], stream: str, family: str) -> tuple[float | None, Row | None]:
    """Fastest edges/s of a method family on a stream (faster variant for DuckDB/Polars)."""
    cands = [r for r in rows if r.stream == stream and r.family == family and r.edges_per_s]
    if not cands:
        return None, None
    row = max(cands, key=lambda r: r.edges_per_s or 0.0)
    return row.edges_per_s, row


def targets(rows: list[Row], streams: list[str]) -> list[str]:
    """The three targets, evaluated on the measured numbers."""
    out = []
    local_s2, _ = best_rate(rows, "S2", "graphcep-local")
    if local_s2 is not None:
        out.append(f"- graphcep in-process >= 1,000,000 edges/s on S2: {fmt_rate(local_s2)} edges/s "
                   f"-> {'MET' if local_s2 >= 1e6 else 'NOT MET'}")
    for s in streams:
        local, _ = best_rate(rows, s, "graphcep-local")
        others = [x for x in (best_rate(rows, s, "duckdb")[0], best_rate(rows, s, "polars")[0]) if x]
        if local is not None and others:
            best_other = max(others)
            out.append(f"- {s}: graphcep in-process {fmt_rate(local)} vs faster of DuckDB/Polars "
                       f"{fmt_rate(best_other)} edges/s ({local / best_other:.2f}x) -> "
                       + verdict(s, local >= best_other))
        out += spark_targets(rows, s)
    return out


def verdict(stream: str, met: bool) -> str:
    """The targets are set on S2; S1 (a fifth of the size) is shown for information."""
    if stream != "S2":
        return f"{'above' if met else 'below'} the S2 target (for information: targets are on S2)"
    return "MET" if met else "NOT MET"


def spark_targets(rows: list[Row], stream: str) -> list[str]:
    """graphcep on Spark (2a) against each Spark SQL variant; the target uses the fastest."""
    gspark, _ = best_rate(rows, stream, "graphcep-spark")
    ssql, fastest = best_rate(rows, stream, "spark-sql")
    if gspark is None or ssql is None or fastest is None:
        return []
    out = [f"- {stream}: graphcep on Spark (2a) {fmt_rate(gspark)} vs fastest Spark SQL self-join "
           f"{fmt_rate(ssql)} edges/s ({gspark / ssql:.2f}x, target >= 5x) -> "
           + verdict(stream, gspark >= 5 * ssql)]
    for row in rows:
        if row.stream == stream and row.family == "spark-sql" and row.edges_per_s:
            out.append(f"  - vs {row.method.split(',')[0][2:]}"
                       f"{' with BROADCAST hint' if 'BROADCAST' in row.method else ''}: "
                       f"{gspark / row.edges_per_s:.2f}x")
    core, _ = best_rate(rows, stream, "graphcep-spark-core")
    if core is not None:
        out.append(f"  - 2a' (input projected to the core columns): {fmt_rate(core)} edges/s, "
                   f"{core / ssql:.2f}x the fastest Spark SQL self-join")
    return out


def shell(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=False,
                              cwd=ROOT).stdout.strip()
    except OSError:
        return "?"


def source_state(package: Path = ROOT / "src" / "graphcep") -> str:
    """Digest of the contents of a copy of graphcep's source files."""
    import hashlib

    digest = hashlib.sha1()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def snapshot_source() -> tuple[Path, str]:
    """Copy src/graphcep to bench/data/src-<digest>/ so that every child process (and
    Spark's Python workers) import one version, even while src/ is being edited."""
    import shutil

    tmp = DATA_DIR / f"src-tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(ROOT / "src" / "graphcep", tmp / "graphcep",
                    ignore=shutil.ignore_patterns("__pycache__"))
    state = source_state(tmp / "graphcep")
    target = DATA_DIR / f"src-{state}"
    if target.exists():
        shutil.rmtree(tmp)
        target.touch()  # in use again: the newest, for pruning
    else:
        tmp.rename(target)
    prune_snapshots(keep=target)
    return target, state


#: Source snapshots kept besides the one in use (the newest by last use).
SNAPSHOTS_KEPT = 4
#: A snapshot used this recently may belong to a run still going: never pruned.
SNAPSHOT_GRACE_S = 6 * 3600


def prune_snapshots(keep: Path) -> None:
    """Delete source snapshots beyond the :data:`SNAPSHOTS_KEPT` most recently used, except
    ``keep`` and any used within :data:`SNAPSHOT_GRACE_S` (a run may still import it)."""
    import shutil

    snapshots = sorted((p for p in DATA_DIR.glob("src-*") if p.is_dir() and p != keep
                        and not p.name.startswith("src-tmp-")),
                       key=lambda p: p.stat().st_mtime, reverse=True)
    now = time.time()
    for old in snapshots[SNAPSHOTS_KEPT:]:
        if now - old.stat().st_mtime > SNAPSHOT_GRACE_S:
            shutil.rmtree(old, ignore_errors=True)


def use_source(path: Path) -> None:
    """Import graphcep from ``path`` here, in spawned children and in Spark's workers."""
    sys.path.insert(0, str(path))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(path), *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])])


def check_source() -> None:
    """In a child: fail unless graphcep comes from the snapshot the parent chose."""
    import graphcep

    wanted = os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]
    if wanted and not str(Path(graphcep.__file__).resolve()).startswith(str(Path(wanted).resolve())):
        raise RuntimeError(f"graphcep imported from {graphcep.__file__}, not from {wanted}")


def _version(package: str) -> str:
    """An installed package's version, or that it is not installed (a bench that does not
    use it runs without it)."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "(not installed)"


def machine_info(state: str) -> list[str]:
    model = re.search(r"Model name:\s*(.+)", shell(["lscpu"]))
    mem = re.search(r"MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text())
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    versions = ", ".join(f"{p} {_version(p)}" for p in
                         ("pyspark", "polars", "duckdb", "pyarrow", "numpy", "numba"))
    status = shell(["git", "status", "--porcelain", "--untracked-files=all", "src"])
    dirty = [line.split(maxsplit=1)[1] for line in status.splitlines() if line.strip()]
    return [
        f"- date: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- CPU: {model.group(1) if model else '?'}, {os.cpu_count()} cores; "
        f"RAM {int(mem.group(1)) / MIB / MIB:.1f} GiB" if mem else "- RAM ?",
        f"- Python {platform.python_version()}; {versions}",
        f"- Java: {(java.stderr.splitlines() or ['?'])[0]}",
        f"- graphcep: git {shell(['git', 'rev-parse', '--short', 'HEAD'])} "
        + (f"+ uncommitted changes in {', '.join(dirty)}" if dirty else "(src/ clean)")
        + f"; src digest {state}",
    ]


def report(rows: list[Row], args: argparse.Namespace, machine: list[str], load_after: str,
           counts: dict[str, set[int]]) -> str:
    agree = all(len(v) == 1 for v in counts.values())
    count_lines = [f"- {s}: {', '.join(f'{c:,}' for c in sorted(v))} "
                   f"{'(all methods agree)' if len(v) == 1 else '(MISMATCH)'}"
                   for s, v in counts.items()]
    streams = [STREAMS[s] for s in args.streams]
    return "\n".join([
        "## Temporal triangles (Listing 1, W = 10 s)",
        "",
        f"Command: `.venv/bin/python -m bench.triangles {' '.join(sys.argv[1:])}`".rstrip(),
        "",
        *[f"- {s.name}: {s.edges:,} edges, |V| = {s.vertices:,}, {s.rate:,} edges/s, seed {s.seed}"
          for s in streams],
        "",
        results_table(rows),
        "",
        "Triangle counts:" if agree else "Triangle counts (DISAGREE):",
        *count_lines,
        "",
        "Targets:",
        *(targets(rows, args.streams) or ["- (not enough methods run to evaluate)"]),
        "",
        "Machine (graphcep state at the start of the run):",
        *machine,
        f"- load (uptime) after:  {load_after}",
    ])


def record(text: str, start: str = START_MARK, end: str = END_MARK) -> None:
    """Replace a benchmark's marked section of bench/RESULTS.md (append it if absent)."""
    block = f"{start}\n{text}\n{end}"
    old = RESULTS_FILE.read_text() if RESULTS_FILE.exists() else "# Benchmark results\n"
    if start in old and end in old:
        head, rest = old.split(start, 1)
        new = head + block + rest.split(end, 1)[1]
    else:
        new = old.rstrip("\n") + "\n\n" + block + "\n"
    RESULTS_FILE.write_text(new)


def add_record_arguments(parser: argparse.ArgumentParser) -> None:
    """``--record`` and ``--no-snapshot``, as every recording benchmark takes them."""
    parser.add_argument("--record", action="store_true", help="write bench/RESULTS.md")
    parser.add_argument("--no-snapshot", dest="snapshot", action="store_false",
                        help="import graphcep from src/ itself, not from a copy taken at start")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.triangles", description=__doc__.split("\n")[0])
    parser.add_argument("--streams", default="S1,S2", help="comma list of S1,S2")
    parser.add_argument("--skip", default="", help=f"comma list of {','.join(METHODS)}")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs after the warm-up")
    parser.add_argument("--spark-repeat", type=int, default=5,
                        help="timed runs after the warm-up for the Spark steps (2a, 2a', 2b, 3)")
    parser.add_argument("--naive-timeout", type=float, default=300.0,
                        help="seconds before the naive matcher gives up")
    add_record_arguments(parser)
    args = parser.parse_args(argv)
    args.streams = [s for s in args.streams.split(",") if s]
    args.skip = frozenset(s for s in args.skip.split(",") if s)
    unknown = [s for s in args.streams if s not in STREAMS] + sorted(args.skip - set(METHODS))
    if unknown:
        parser.error(f"unknown stream or method: {', '.join(unknown)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    snapshot, state = snapshot_source() if args.snapshot else (ROOT / "src", source_state())
    use_source(snapshot)
    machine = [*machine_info(state), f"- load (uptime) before: {shell(['uptime'])}"]
    if args.snapshot:
        machine.append(f"- all methods imported graphcep from a copy of src/ taken at the start "
                       f"(bench/data/{snapshot.name})")
    rows: list[Row] = []
    for name in args.streams:
        stream = STREAMS[name]
        ensure_stream(stream)
        for job, fn, job_args in jobs_for(stream, args.skip, args.repeat, args.spark_repeat,
                                         args.naive_timeout):
            rows += run_child(job, fn, job_args, stream)
    counts = check_counts(rows)
    after = source_state(snapshot / "graphcep")
    if after != state:
        machine.append(f"- WARNING: graphcep's source changed during the run (now {after}); "
                       "methods may have run different versions")
    text = report(rows, args, machine, shell(["uptime"]), counts)
    print(text)
    if args.record:
        record(text)
    failed = any(r.family == "failed" for r in rows)
    return 0 if all(len(v) == 1 for v in counts.values()) and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
