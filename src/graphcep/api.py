"""The Python API: a query file or text in, matches of a data frame out.

::

    import graphcep
    q = graphcep.load("triangle.sal")        # .sal .ddst .nu .autom .subs
    print(q.explain())                       # the plan, as ``graphcep explain`` prints it
    m = q.match(df, src="sender", dst="receiver", time="ts")

:func:`load` and :func:`parse` read a query through the registry the command line uses
(:mod:`graphcep.jobs`); :meth:`Query.match` runs it in this process with the engine of
``graphcep run --engine local`` (:func:`~graphcep.runtime.local.run_job`), or under
progressive window widening with ``pww=L``
(:func:`~graphcep.runtime.widening.run_widening`).

Decisions
---------
* **Same type out.** A pandas DataFrame gives a pandas DataFrame, a Polars DataFrame a
  Polars DataFrame (Polars is imported only for Polars input), an Arrow table an Arrow
  table. The frame is converted to Arrow and read by the function that reads Parquet
  files (:func:`~graphcep.io.formats.columns.parse_table`), so a frame and the Parquet
  file written from it give the same edges.
* **Same identity.** Edges are numbered ``seq`` = 1, 2, ... in the frame's row order, as
  the readers number the lines of a headerless file (an integer ``seq`` column the frame
  has is kept, as the Parquet reader keeps it): the same edges give the same ``match_id``
  through the API and ``graphcep run``.
* **Times.** A timestamp column (pandas ``datetime64``, Arrow ``timestamp``, Polars
  ``Datetime``) is exact whatever its unit; a tz-naive one is read as UTC. Numbers count
  ``time_unit`` (default seconds); without ``time_unit`` they are checked as the command
  line checks them (:func:`~graphcep.io.formats.times.implausible_time_unit`): epoch
  milliseconds read as seconds are refused, naming the unit to pass.
* **Columns out**, the same for every kind of frame (:func:`~graphcep.frame_matches.match_table`):
  ``match_id``, ``query`` (a subscription's name for subscriptions), ``first_time`` and
  ``last_time`` (``timestamp[us, UTC]``: the match's first edge, and the edge that
  completed it), the flat columns of :mod:`graphcep.io.flat_columns` (one per query
  vertex, and per query edge ``e1_t``, ``e1_src``, ``e1_dst``, ``e1_dur``, ``e1_seq``),
  then ``record``: the whole record as one struct, as a Parquet match file of ``graphcep
  run -o matches.parquet`` holds it (:meth:`~graphcep.io.sinks.MatchFormat.file_table`).
* **Spark stays in Spark.** A Spark DataFrame gives a Spark DataFrame of matches,
  computed in the executors by the plans of ``graphcep run`` on Spark, lazily
  (:mod:`graphcep.api_spark`); a streaming one, for a SAL query, a streaming DataFrame
  of matches made by the executor mode's cells (:func:`graphcep.api_stream.match_stream`).
* **Bad input** raises one :class:`ValueError` (a name, a unit, a value) or
  :class:`TypeError` (a column's type, an input that is no frame) naming the column and
  the fix.

Examples
--------
>>> import pyarrow as pa
>>> q = parse("{ x1 e1 x2; x2 e2 x3; x3 e3 x1; starttime(e1) < starttime(e2); "
...           "starttime(e2) < starttime(e3); starttime(e3) - starttime(e1) <= 60; }")
>>> q.kind
'sal'
>>> edges = pa.table({"from": ["a", "b", "c"], "to": ["b", "c", "a"],
...                   "ms": [1_000, 2_000, 3_000]})
>>> m = q.match(edges, src="from", dst="to", time="ms", time_unit="ms")
>>> m.num_rows, m.column("x1").to_pylist(), m.column("e3_seq").to_pylist()
(1, ['a'], [3])
>>> str(m.column("last_time").type)
'timestamp[us, tz=UTC]'
>>> m.column("record").type.field("bindings").type
MapType(map<string, string>)
"""

from __future__ import annotations

import functools
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphcep.frame_edges import ColumnMapping, checked_unit, edge_table
from graphcep.frame_matches import match_table, run_edges, warn_absent_labels

if TYPE_CHECKING:
    import pyarrow as pa

    from graphcep.jobs.base import ReplayJob

__all__ = ["Query", "load", "parse", "QUERY_KINDS"]

#: The kinds :func:`parse` reads (``.autom`` files are ν-expressions' automata).
QUERY_KINDS: tuple[str, ...] = ("sal", "ddst", "nu", "autom", "subs")

#: The kinds' file suffixes, for :func:`parse`'s file.
_SUFFIX = {"sal": ".sal", "ddst": ".ddst", "nu": ".nu", "autom": ".autom", "subs": ".subs"}

#: The job options :func:`load` and :func:`parse` take (the command line's option names,
#: with ``_``): durations in seconds (numbers or decimal text).
QUERY_OPTIONS: tuple[str, ...] = (
    "query_name", "window", "max_duration", "homomorphic", "max_window_edges",
    "ddst_engine", "signature_p", "signature_seed", "ddst_report", "max_tokens",
    "anchored", "nu_engine", "key", "symbol", "subs_engine")

def _api_words(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` with the command-line options its errors name (the messages are
    shared with the command line) written as this API's arguments: ``--window SECONDS``
    as ``window=SECONDS``, ``--max-tokens`` as ``max_tokens=``."""

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except ValueError as err:
            err.args = tuple(_FLAG.sub(_argument, a) if isinstance(a, str) else a
                             for a in err.args)
            raise

    return call


#: A command-line option in a message, with its value's placeholder if it has one.
_FLAG = re.compile(r"(?<![\w-])--([a-z][a-z-]*)(?: ([A-Z]+\b|\d+(?:\.\d+)?\b))?")


def _argument(flag: re.Match[str]) -> str:
    name = flag.group(1).replace("-", "_")
    return f"{name}={flag.group(2) or ''}" if flag.group(2) else f"{name}="


@_api_words
def load(path: str | os.PathLike[str], **options: Any) -> Query:
    """The query in the file ``path``, of the kind its suffix or text says.

    Parameters
    ----------
    path
        A ``.sal``, ``.ddst``, ``.nu``, ``.autom`` or ``.subs`` file (a directory is a
        directory of subscriptions files); another suffix is told by its text, as
        ``graphcep run`` tells it.
    **options
        The command line's query options, named with ``_``: ``window``,
        ``max_duration`` (seconds), ``query_name``, ``homomorphic``, ``max_window_edges``,
        ``ddst_engine``, ``max_tokens``, ``anchored``, ``key``, ``symbol``... An option
        the query's kind does not read is refused.

    Returns
    -------
    Query

    Raises
    ------
    ValueError
        The query does not parse or makes no sense (the message says where and why).

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "pair.ddst")
    >>> _ = open(path, "w").write("VERTICES A, B; EDGES x: A -> B; WITHIN 5 s")
    >>> load(path).kind
    'ddst'
    """
    from graphcep.jobs import kind_of

    text_path = os.fspath(path)
    kind = kind_of(text_path).name
    if kind == "nu" and Path(text_path).suffix.lower() == ".autom":
        kind = "autom"
    query = Query(text_path, kind, _checked_options(options))
    query.job(explain=True, pww=True)  # a query that does not parse fails here (a window
    # too wide or missing is checked by explain and match: match(pww=L) may bound it)
    return query


@_api_words
def parse(text: str, kind: str = "sal", *, name: str = "query", **options: Any) -> Query:
    """The query ``text`` of ``kind``: ``"sal"``, ``"ddst"``, ``"nu"``, ``"autom"`` or
    ``"subs"``; ``options`` as :func:`load` takes them.

    ``name`` stands for the file name a loaded query would have: the kinds that name a
    query after its file (DDST, ν-expressions, subscriptions) name it so, and a match's
    ``match_id`` is salted with its query's name. A query read from ``pair.ddst`` and the
    same text parsed with ``name="pair"`` give the same matches and ids.

    Examples
    --------
    >>> q = parse("VERTICES A, B; EDGES x: A -> B; WITHIN 5 s", kind="ddst", name="pair")
    >>> q.explain().splitlines()[0]
    'DDST query pair: 2 vertices, 1 edges'
    >>> parse("x", kind="cypher")
    Traceback (most recent call last):
    ...
    ValueError: kind='cypher' is no query kind graphcep reads: give one of 'sal', 'ddst', 'nu', 'autom', 'subs'
    """
    if kind not in QUERY_KINDS:
        raise ValueError(f"kind={kind!r} is no query kind graphcep reads: give one of "
                         f"{', '.join(map(repr, QUERY_KINDS))}")
    if not name or Path(name).name != name or name.startswith("."):
        raise ValueError(f"name={name!r}: a query's name is a plain file name, without a "
                         "directory")
    query = Query(None, kind, _checked_options(options), text, name)
    query.job(explain=True, pww=True)  # as load checks it
    return query


def _checked_options(options: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(options) - set(QUERY_OPTIONS))
    if unknown:
        raise TypeError(f"unknown query option(s) {unknown}: the options are "
                        f"{', '.join(QUERY_OPTIONS)}")
    return dict(options)


@dataclass(frozen=True)
class Query:
    """A query of any kind, ready to :meth:`explain` and :meth:`match`.

    Made by :func:`load` (``path``) or :func:`parse` (``text``); ``kind`` is one of
    :data:`QUERY_KINDS`, ``options`` the query options given to them.
    """

    path: str | None
    kind: str
    options: dict[str, Any] = field(default_factory=dict)
    text: str | None = None
    name: str = "query"

    def job(self, *, explain: bool = False, pww: bool = False) -> ReplayJob:
        """The query as the job the runtimes run (:func:`graphcep.jobs.load`, as the
        command line loads it); ``explain``: only to be described, ``pww``: to run under
        window widening."""
        from graphcep.jobs import kind_named
        from graphcep.jobs import load as load_job
        from graphcep.jobs.options import job_options

        options = {**job_options(self.options, None),
                   "explain": explain, "pww": pww}
        kind = kind_named("nu" if self.kind == "autom" else self.kind)
        if self.text is None:
            return load_job(str(self.path), options, kind)
        with tempfile.TemporaryDirectory(prefix="graphcep-query-") as folder:
            path = Path(folder) / f"{self.name}{_SUFFIX[self.kind]}"
            path.write_text(self.text, encoding="utf-8")
            try:
                return load_job(str(path), options, kind)
            except ValueError as err:  # name the text, not a file the user never saw
                raise _renamed(err, str(path), "<query text>") from None

    @_api_words
    def explain(self, pww: int | None = None, pww_base: float | str = 1,
                pww_max_duration: float | str | None = None) -> str:
        """The parsed query, its extent and plan: the text ``graphcep explain`` prints
        (under ``pww``, as window widening runs it).

        Examples
        --------
        >>> print(parse("SUBGRAPH pair { a e b; }").explain().splitlines()[0])
        query pair on stream (default) with source(src) and target(dst)
        """
        widening = self._widening(pww, pww_base, pww_max_duration)
        job = self.job(explain=True, pww=widening is not None)
        return "\n".join(plan_lines(job, widening))

    @_api_words
    def match(self, data: Any, *, src: str = "src", dst: str = "dst", time: str = "t",
              dur: str | None = None, time_unit: str | None = None,
              columns: Sequence[str] | None = None, pww: int | None = None,
              pww_base: float | str = 1, pww_max_duration: float | str | None = None,
              lateness: float | None = None, cells: int | None = None) -> Any:
        """All matches of the query in the edges ``data``, one row per match, as a frame
        of the same kind.

        Parameters
        ----------
        data
            A pandas DataFrame, a Polars DataFrame, a pyarrow Table or a Spark DataFrame,
            one edge per row, in any order (matched in the order of ``time``, rows of
            equal times in the frame's order; a Spark DataFrame's order is its
            partitions', in turn); or a streaming Spark DataFrame
            (:func:`graphcep.api_stream.match_stream`, SAL queries).
        src, dst, time
            The columns of the edges' source and destination vertices (strings or
            integers) and start times (timestamps, dates or numbers).
        dur
            The column of the edges' durations, in ``time_unit`` (default: a column
            named ``dur`` if there is one, else 0).
        time_unit
            What numeric times count: ``"s"`` (the default), ``"ms"`` or ``"us"``. Not
            given, the times are checked: numbers that are no epoch time in seconds but
            all are one in another unit are refused, naming it.
        columns
            The other columns to keep as the edges' attributes (the fields predicates,
            labels and keys read); default all.
        pww, pww_base, pww_max_duration
            Progressive window widening (``graphcep run --pww L``): matches of any
            duration within ``pww`` edges, windows from ``pww_base`` seconds, at most
            ``pww_max_duration`` seconds.
        lateness, cells
            For a streaming DataFrame only: seconds an edge may trail the newest one and
            still be matched (default 0), and the HyperCube cells the executors match in
            (default: the session's default parallelism).

        Returns
        -------
        pandas.DataFrame, polars.DataFrame, pyarrow.Table or pyspark.sql.DataFrame
            As :mod:`graphcep.api` says: ``match_id``, ``query``, ``first_time``,
            ``last_time`` (UTC timestamps), the flat columns, the ``record`` struct. A
            Spark DataFrame's matches are a lazy Spark DataFrame
            (:func:`graphcep.api_spark.match_spark`), a streaming one's a streaming
            DataFrame to write with ``writeStream``.

        Raises
        ------
        TypeError
            ``data`` is no frame graphcep reads, or a column's type cannot hold what it
            is mapped to.
        ValueError
            A column named is missing, a unit is wrong or implausible, a row cannot be an
            edge (a missing time or vertex), or the query needs a field the edges lack.
        """
        widening = self._widening(pww, pww_base, pww_max_duration)
        mapping = ColumnMapping(src=src, dst=dst, time=time, dur=dur)
        if _is_spark_frame(data) and getattr(data, "isStreaming", False):
            from graphcep.api_stream import match_stream

            if widening is not None:
                raise ValueError("pww= on a streaming DataFrame: window widening streams "
                                 "in the driver, match it with Query.stream(..., pww=)")
            return match_stream(self, data, mapping, checked_unit(time_unit), columns,
                                lateness, cells)
        if lateness is not None or cells is not None:
            raise ValueError("lateness= and cells= apply to a streaming DataFrame "
                             "(spark.readStream...); this data is a batch frame")
        if _is_spark_frame(data):
            from graphcep.api_spark import match_spark

            return match_spark(self.job(pww=widening is not None), data, mapping,
                               checked_unit(time_unit), columns, widening)
        adapter = _adapter(data)
        edges = edge_table(adapter.to_arrow(data), mapping, checked_unit(time_unit), columns)
        job = self.job(pww=widening is not None)
        job.check_columns(edges.column_names)
        matches, output = run_edges(job, edges, widening)
        warn_absent_labels(job, job.labels_present(edges), stacklevel=3)
        return adapter.from_arrow(match_table(output, matches))

    @_api_words
    def stream(self, data: Any, **options: Any) -> Any:
        """Match the query continuously over the streaming Spark DataFrame ``data``:
        :func:`graphcep.api_stream.stream` (its arguments: the columns and units as
        :meth:`match` takes them, ``lateness``, ``checkpoint``, ``output``...), which
        returns a :class:`~graphcep.api_stream.MatchStream`, Spark's ``StreamingQuery``
        with graphcep's guarantees (event time, a reorder buffer, late edges written,
        exactly once)."""
        from graphcep.api_stream import stream

        return stream(self, data, **options)

    def _widening(self, pww: int | None, base: float | str,
                  most: float | str | None) -> tuple[int, int, int | None] | None:
        """``(L, T0, D)`` as the command line's ``--pww`` options give them (checked by
        the same function)."""
        if pww is None:
            return None
        if isinstance(pww, bool) or not isinstance(pww, int) or pww < 1:
            raise ValueError(f"pww={pww!r}: the number of edges a window holds, an "
                             "integer of at least 1")
        from graphcep.jobs.options import pww_options

        return pww_options({"pww": pww, "pww_base": str(base),
                            "pww_max_duration": None if most is None else str(most),
                            "window": self.options.get("window")})


def plan_lines(job: ReplayJob, widening: tuple[int, int, int | None] | None) -> list[str]:
    """What ``graphcep explain`` and :meth:`Query.explain` say of ``job``: the query, its
    extent and plan (under ``widening``, as window widening runs it, refused when its
    windows cannot hold the query), and how stream cells would split it."""
    from graphcep.runtime.widening.report import explain_lines

    if widening is not None:
        from graphcep.runtime.widening import refuse_short_keep

        refuse_short_keep(job, widening[0])
        return explain_lines(job, widening)  # windows are cut in the driver, not in cells
    from graphcep.runtime.hypercube import partitioning_lines

    return [*explain_lines(job, None), "", *partitioning_lines(job)]


def _renamed(err: ValueError, path: str, name: str) -> ValueError:
    """``err`` saying ``name`` where it said ``path`` (a syntax error's ``source`` too)."""
    if getattr(err, "source", None) == path:
        err.source = name  # type: ignore[attr-defined]
    err.args = tuple(a.replace(path, name) if isinstance(a, str) else a for a in err.args)
    return err


# -- frames in and out ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Adapter:
    """How one kind of frame becomes an Arrow table and matches become that kind."""

    name: str
    to_arrow: Any
    from_arrow: Any


def _adapter(data: Any) -> _Adapter:
    """The adapter of ``data``'s kind, told by its class's module (so that no frame
    library is imported to look at a frame of another). Every kind here is matched in
    this process through Arrow; a Spark DataFrame, whose matches must be computed in the
    executors and stay there, is the kind that will take a path of its own."""
    import pyarrow as pa

    root = type(data).__module__.split(".")[0]
    if isinstance(data, pa.Table | pa.RecordBatch):
        return _Adapter("arrow", _arrow_in, lambda table: table)
    if root == "pandas" and type(data).__name__ == "DataFrame":
        return _Adapter("pandas", _pandas_in, _pandas_out)
    if root == "polars" and type(data).__name__ == "DataFrame":
        return _Adapter("polars", lambda frame: frame.to_arrow(), _polars_out)
    if root == "pyspark":
        raise TypeError(f"cannot match a {type(data).__module__}.{type(data).__name__}: "
                        "pass a Spark DataFrame (a streaming one goes to Query.stream)")
    if root == "polars" and type(data).__name__ == "LazyFrame":
        raise TypeError("a Polars LazyFrame is not supported: pass lazy.collect()")
    raise TypeError(f"cannot match a {type(data).__module__}.{type(data).__name__}: "
                    "pass a pandas DataFrame, a Polars DataFrame or a pyarrow Table")


def _is_spark_frame(data: Any) -> bool:
    """Whether ``data`` is a Spark DataFrame (classic or Connect, batch or streaming),
    told without importing pyspark."""
    kind = type(data)
    return kind.__module__.split(".")[0] == "pyspark" and kind.__name__ == "DataFrame"


def _arrow_in(data: Any) -> pa.Table:
    import pyarrow as pa

    return pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data


def _pandas_in(frame: Any) -> pa.Table:
    import pyarrow as pa

    try:
        return pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowTypeError, pa.ArrowInvalid) as err:  # mixed object columns
        raise TypeError(f"the DataFrame cannot be read as Arrow columns: {err}; give the "
                        "column one type (df[col].astype(str), pd.to_datetime(df[col]))"
                        ) from None


def _pandas_out(table: pa.Table) -> Any:
    return table.to_pandas()


def _polars_out(table: pa.Table) -> Any:
    import polars as pl

    return pl.from_arrow(table)
