"""``graphcep stream --matching executors``: the cells of :mod:`~graphcep.runtime.streaming.cells`
under the stream command's sources, sinks, checkpoint, progress lines and summary.

:class:`CellsRun` stands where the driver mode's
:class:`~graphcep.runtime.streaming.driver.StreamOperator` stands for the command: it keeps the
stream's totals (one small file per micro-batch under ``CHECKPOINT/cells``, the last two
kept; a re-run batch starts from the totals before it, so they count each batch once),
prints one progress line per micro-batch from the cells' counts, and flushes the cells at
the end of input. The matching itself, its state and its recovery are Spark's.
"""

from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import astuple, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from graphcep.io.readers import read_edges_bytes
from graphcep.io.sinks import replace_atomically
from graphcep.jobs.subgraph import SubgraphJob
from graphcep.patterns.subgraph import QueryError
from graphcep.runtime.cell_plans import plan_words
from graphcep.runtime.hypercube import Shares, choose_shares
from graphcep.runtime.streaming.cells import (
    SECONDS,
    CellRunner,
    CellSinks,
    CellsOutput,
    StateFiles,
    cell_attributes,
    cell_grid,
    cell_tasks,
    encoder_of,
    flush_cells,
    rereads,
    write_cells_stream,
)
from graphcep.runtime.streaming.driver import (
    NEVER,
    BatchReport,
    Jump,
    Pace,
    StreamTotals,
    edge_place,
    jump_limit,
    late_warnings,
    note_newest,
    skipped_file_warnings,
)
from graphcep.runtime.streaming.kafka_source import KafkaSource
from graphcep.runtime.streaming.query import BatchFailure, BatchGate
from graphcep.runtime.streaming.sources import FileSource

_TOTALS_FILE = re.compile(r"totals-(\d+)\.json\Z")
#: the counts of a progress line that add up over the cells
_SUMMED = ("edges", "late", "rejected", "matches", "released", "buffered", "window", "files",
           "lines")


#: the phases of a batch's tasks and cells, as ``--profile`` names them (stats
#: ``s_<phase>``); reading and routing run in the tasks before the shuffle
PHASES = {"read": "reading files (tasks)", "route": "routing to cells (tasks)",
          "state in": "state in (Spark to the cell)", "rows in": "rows in (Arrow to the cell)",
          "restore": "restoring engines from stored states, or building new ones",
          "match": "matching",
          "arrange": "numbering, late edges, reorder buffer (the rest of a step)",
          "state out": "state out (the engine's snapshot, or the batch's edges, written)",
          "rows out": "matches out (Arrow IPC)",
          "between": "Spark between two cells of a task (Python worker)"}
#: phases outside a cell's own step: the tasks' reading and routing, and Spark's work
#: between the cells of a task
_TASK_PHASES = ("read", "route", "between")

#: the parts of a micro-batch's trigger that Spark times (its progress's ``durationMs``),
#: as ``--profile`` names them; ``addBatch`` holds the tasks and the driver's
#: ``foreachBatch`` (collecting the cells' output, writing the parts)
SPARK_PHASES = {"latestOffset": "finding new input", "getBatch": "getting the batch",
                "queryPlanning": "planning the batch",
                "addBatch": "running the batch (tasks, foreachBatch)",
                "walCommit": "writing the offsets log", "commitOffsets": "writing the commit log"}
#: the driver's part of a batch in ``foreachBatch``
#: (:attr:`~graphcep.runtime.streaming.cells.CellsOutput.seconds`)
DRIVER_PHASES = {"collect": "collecting the batch (its Spark job included)",
                 "write": "writing the parts"}


@dataclass
class CellsProfile:
    """Where the executor mode's micro-batches spent their time (``--profile``): each
    phase of :data:`PHASES` summed over tasks, cells and batches; the busiest cell's own
    seconds per batch (the cells run side by side, so it sets the batch's pace); and the
    rest of each batch's wall time -- Spark's scheduling, shuffle and state store, and the
    driver's writing of the parts -- after the busiest cell and the routing (its sum over
    tasks spread over ``tasks`` cores). Spark's side of the batches comes from the
    followed query's progress (:meth:`follow`, :func:`spark_seconds`): where the rest
    goes."""

    tasks: int = 1
    seconds: dict[str, float] = field(default_factory=dict)
    busiest: float = 0.0
    rest: float = 0.0
    steps: int = 0
    restored: int = 0
    #: the driver's seconds in ``foreachBatch`` (:data:`DRIVER_PHASES`)
    driver: dict[str, float] = field(default_factory=dict)
    #: Spark's own seconds per part of the batches (:data:`SPARK_PHASES`), from the
    #: query's progress
    spark: dict[str, float] = field(default_factory=dict)
    #: the micro-batches whose progress was counted, and the query it comes from
    spark_batches: set[int] = field(default_factory=set)
    query: Any = None
    session: Any = None
    #: Spark jobs, stages and tasks of the query's batches (its job group), once counted
    work: tuple[int, int, int] | None = None

    def add(self, batch_id: int, stats: list[dict[str, Any]], wall: float,
            driver: dict[str, float] | None = None) -> str:
        """Count one micro-batch's cells' stats and the ``driver``'s seconds
        (:attr:`~graphcep.runtime.streaming.cells.CellsOutput.seconds`); its line."""
        for name, value in (driver or {}).items():
            self.driver[name] = self.driver.get(name, 0.0) + value
        spent = {name: sum(s.get(SECONDS + name, 0.0) for s in stats) for name in PHASES}
        own = [sum(v for k, v in s.items() if k.startswith(SECONDS)
                   and k[len(SECONDS):] not in _TASK_PHASES) for s in stats]
        busiest = max(own, default=0.0)
        outside = sum(spent[p] for p in _TASK_PHASES) / max(1, self.tasks)
        rest = max(0.0, wall - busiest - outside)
        restored = sum(s.get("restored", 0) for s in stats)
        for name, value in spent.items():
            self.seconds[name] = self.seconds.get(name, 0.0) + value
        self.busiest += busiest
        self.rest += rest
        self.steps += len(stats)
        self.restored += restored
        parts = ", ".join(f"{name} {value:.3f}" for name, value in spent.items() if value)
        processes = {s["process"] for s in stats if "process" in s}
        driven = "".join(f"; driver: {DRIVER_PHASES[name]} {value:.3f} s"
                         for name, value in (driver or {}).items())
        return (f"graphcep: profile: micro-batch {batch_id}: {wall:.3f} s; {len(stats)} "
                f"cell steps in {len(processes)} Python workers, {restored} restored from "
                f"their stored states; summed s: {parts}; busiest "
                f"cell step {busiest:.3f} s; Spark and the driver {rest:.3f} s{driven}")

    def follow(self, query: Any, spark: Any) -> None:
        """Read Spark's side of the batches from ``query``'s progress from now on (and
        its jobs from ``spark``'s status tracker)."""
        self.query, self.session = query, spark

    def spark_lines(self) -> list[str]:
        """One line per micro-batch whose progress Spark reported since the last call
        (a batch's progress comes after its ``foreachBatch``: the line of batch ``b``
        is printed with the cells' line of the batch after it, or at the end), its
        seconds added to :attr:`spark`."""
        if self.query is None:
            return []
        lines = []
        for progress in self.query.recentProgress:
            batch_id = int(progress["batchId"])
            if batch_id in self.spark_batches:
                continue
            self.spark_batches.add(batch_id)
            lines.append(self._add_progress(batch_id, progress))
        return lines

    def _add_progress(self, batch_id: int, progress: Any) -> str:
        spent = spark_seconds(progress)
        for name, value in spent.items():
            self.spark[name] = self.spark.get(name, 0.0) + value
        total = progress["durationMs"].get("triggerExecution", 0) / 1e3
        parts = ", ".join(f"{SPARK_PHASES[name]} {value:.3f}" for name, value in spent.items()
                          if name in SPARK_PHASES)
        return f"graphcep: profile: micro-batch {batch_id}: Spark {total:.3f} s: {parts}"

    def count_work(self) -> None:
        """Count the Spark jobs, stages and tasks of the followed query's batches (Spark
        runs them in a job group named by the query's run id; it keeps the last
        ``spark.ui.retainedJobs`` jobs)."""
        if self.query is None or self.session is None:
            return
        tracker = self.session.sparkContext.statusTracker()
        jobs = stages = tasks = 0
        for job_id in tracker.getJobIdsForGroup(str(self.query.runId)):
            info = tracker.getJobInfo(job_id)
            if info is None:
                continue
            jobs += 1
            for stage_id in info.stageIds:
                stage = tracker.getStageInfo(stage_id)
                if stage is not None:
                    stages += 1
                    tasks += stage.numTasks
        self.work = (jobs, stages, tasks)

    def phases(self) -> dict[str, float]:
        """The totals as ``--profile``'s nested phases; the Spark lines of the batches
        not printed yet are printed first (on stderr), the jobs counted."""
        for line in self.spark_lines():
            print(line, file=sys.stderr)
        self.count_work()
        batches = max(1, len(self.spark_batches))
        work = ("" if self.work is None else
                f", {self.work[0] / batches:.1f} jobs, {self.work[1] / batches:.1f} stages, "
                f"{self.work[2] / batches:.1f} tasks per batch")
        return {**{f"cells: {PHASES[name]} (summed)": value
                   for name, value in self.seconds.items()},
                f"cells: busiest cell per batch ({self.restored} of {self.steps} steps "
                "restored)": self.busiest,
                "Spark and the driver (the rest of the batches)": self.rest,
                **{f"driver: {DRIVER_PHASES[name]}": value
                   for name, value in self.driver.items()},
                **{f"Spark: {SPARK_PHASES[name]}"
                   + (work if name == "addBatch" else ""): value
                   for name, value in self.spark.items()}}


def spark_seconds(progress: Any) -> dict[str, float]:
    """Seconds of one micro-batch's parts from its ``StreamingQueryProgress``:
    :data:`SPARK_PHASES` in order."""
    durations = progress["durationMs"]
    return {name: durations[name] / 1e3 for name in SPARK_PHASES if name in durations}


@dataclass
class EventWatch:
    """The stream's event time as the driver follows it from the cells' stats, for the
    late-edge warnings (:class:`~graphcep.runtime.streaming.driver.EventTime`): kept
    with the totals, so a restart warns as the run before would have."""

    totals: StreamTotals
    max_t: int = NEVER
    frontier: int = NEVER
    newest_place: str = ""
    jump: Jump | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"max_t": self.max_t, "frontier": self.frontier,
                "newest_place": self.newest_place,
                "jump": None if self.jump is None else astuple(self.jump)}

    @classmethod
    def of(cls, totals: StreamTotals, saved: dict[str, Any]) -> EventWatch:
        jump = saved.get("jump")
        return cls(totals, saved.get("max_t", NEVER), saved.get("frontier", NEVER),
                   saved.get("newest_place", ""), None if jump is None else Jump(*jump))

    def follow(self, stats: list[dict[str, Any]], frontier: int, limit: int,
               stream: str | None = None) -> None:
        """The batch's newest edge from the cells' stats (each on-time edge is counted
        by one cell: the newest of theirs is the batch's) and the watermark after it;
        ``stream`` names a source of records, whose edges the cells know by line only
        (``STREAM:LINE``, as the driver mode names them)."""
        counted = [s for s in stats if "newest_t" in s]
        if counted:
            newest = max(s["newest_t"] for s in counted)
            below = max(s["newest_t"] if s["newest_t"] < newest else s["below_t"]
                        for s in counted)
            first = min((s for s in counted if s["newest_t"] == newest),
                        key=lambda s: s["newest_seq"])
            place = first.get("newest_place") or edge_place(
                first["newest_seq"], {0: stream} if stream else None)
            note_newest(self, newest, below, place, limit)
        self.frontier = max(self.frontier, frontier)


class CellsRun:
    """The executor mode's stream: totals, progress lines and the flush (module docstring).

    Parameters
    ----------
    job : SubgraphJob
        The query: a kind whose stream splits exactly into cells
        (:meth:`~graphcep.jobs.base.ReplayJob.cell_split`).
    cells : int or None
        The cell budget (:func:`~graphcep.runtime.streaming.cells.cell_grid`); None: the one
        the checkpoint's first start recorded, else ``default_cells``. The cells' state is
        keyed by the grid, so a checkpoint keeps the budget it started with.
    lateness_us : int
        As the driver mode's ``--lateness``.
    checkpoint : Path
        The command's checkpoint: Spark's under ``spark``, the totals and the cells'
        states (:class:`~graphcep.runtime.streaming.cells.StateFiles`) under ``cells``.
    sinks : dict
        ``matches``, ``late`` and ``rejects`` sinks (part per micro-batch).
    on_report : callable or None
        Called with each micro-batch's :class:`~graphcep.runtime.streaming.driver.BatchReport`.
    attrs : pa.Schema
        The attribute columns the cells carry (:func:`attributes_for`).
    profile : bool
        Time the batches' phases (:class:`CellsProfile`), one line per batch on stderr.
    source : object or None
        The stream's source: a Kafka source gives each partition's lag after every
        micro-batch (:meth:`KafkaSource.lag_after`), as in the driver mode.
    """

    def __init__(self, job: SubgraphJob, *, cells: int | None, lateness_us: int,
                 checkpoint: Path, sinks: dict[str, Any], on_report: Any, attrs: pa.Schema,
                 default_cells: int = 1, profile: bool = False, source: Any = None) -> None:
        self.job = job
        self.checkpoint = Path(checkpoint)
        (self.checkpoint / "cells").mkdir(parents=True, exist_ok=True)
        #: the cells' states, as files beside Spark's checkpoint (:class:`StateFiles`)
        self.states = StateFiles(self.checkpoint / "cells" / "state")
        self.cells = self._recorded_cells(cells, default_cells)
        self.shares = cell_grid(job, self.cells)
        self._keep_grid()
        self.lateness_us = lateness_us
        self.sinks = sinks
        self.on_report = on_report
        self.attrs = attrs
        self.refusal: QueryError | None = None  # as StreamOperator's (await_query reads both)
        self.failure: Exception | None = None
        self.labels_seen: dict[str, set[str]] = {}
        self.engine = None  # no engine in the driver
        self._totals = StreamTotals()
        self._watch = EventWatch(self._totals)
        self._sizes = {"edges": 0, "buffered": 0}
        self._last = -1
        self._clock = time.perf_counter()  # the end of the last batch: a batch's seconds
        self.profile = CellsProfile() if profile else None
        self.source = source
        self.partition_lag: dict[str, int] | None = None  # as StreamOperator's
        #: how the stream keeps up (as StreamOperator's): observed unless it runs --once
        self.pace = Pace(getattr(source, "rate", None), getattr(source, "max_records", None))
        self._paced = False
        #: for the late-edge warnings: how far event time jumps before it is named, and
        #: the name of a source of records (its edges are known by their line only)
        self._jump_limit = jump_limit(job.extent(), lateness_us)
        self._records_from = source.describe() if isinstance(source, KafkaSource) else None
        #: a stop waits for the micro-batch under way (:func:`stop_between_batches`)
        self.gate = BatchGate()

    def _recorded_cells(self, cells: int | None, default: int) -> int:
        """The cell budget of this checkpoint (recorded at its first start)."""
        record = self.checkpoint / "cells" / "grid.json"
        if record.exists():
            stored = int(json.loads(record.read_text())["cells"])
            if cells is not None and cells != stored:
                raise QueryError(f"checkpoint {self.checkpoint} holds cells of --cells "
                                 f"{stored}, not {cells}: give --cells {stored} or another "
                                 "--checkpoint")
            return stored
        chosen = cells if cells is not None else default
        replace_atomically(record, lambda path: Path(path).write_text(
            json.dumps({"cells": chosen}), encoding="utf-8"))
        return chosen

    def _keep_grid(self) -> None:
        """Record the HyperCube grid at the first start, and refuse a restart that would
        lay the cells out otherwise (a later graphcep choosing another grid for the same
        budget): the states are its cells'. A record without one is from before the
        grids were chosen for cells that screen roles, which chose without them."""
        if not isinstance(self.shares, Shares):
            return
        record = self.checkpoint / "cells" / "grid.json"
        stored = json.loads(record.read_text())
        if "grid" not in stored:
            earlier = choose_shares(self.job.cell_split().query, self.cells).shares
            stored["grid"] = list(earlier if self.states.recorded() else self.shares.shares)
            replace_atomically(record, lambda path: Path(path).write_text(
                json.dumps(stored), encoding="utf-8"))
        if tuple(stored["grid"]) != self.shares.shares:
            grid = "x".join(map(str, stored["grid"]))
            raise QueryError(
                f"checkpoint {self.checkpoint} holds cells on grid {grid}; --cells "
                f"{self.cells} is now the grid {'x'.join(map(str, self.shares.shares))}: "
                "start from a new --checkpoint")

    @property
    def totals(self) -> StreamTotals:
        return self._totals

    def state_size(self) -> dict[str, int]:
        """Edges in the cells' windows (copies included) and in their reorder buffers."""
        return dict(self._sizes)

    def describe(self) -> str:
        cells = self.shares.cells
        return f"executors, {cells} cell{'' if cells == 1 else 's'} ({plan_words(self.shares)})"

    def start(self, spark: Any, source: Any, *, available_now: bool = False,
              trigger_seconds: float | None = None) -> Any:
        """Start the streaming query over ``source`` (its streaming DataFrame, each task's
        rows read by its ``read_part``): each micro-batch one Spark job whose tasks route
        the rows to the cells and step them, at most as many tasks as the master has cores
        (:func:`~graphcep.runtime.streaming.cells.write_cells_stream`)."""
        self.failure = None
        self._clock = time.perf_counter()
        self._paced = not available_now
        tasks = cell_tasks(spark, self.shares)
        if self.profile is not None:
            self.profile.tasks = tasks
        sinks = CellSinks(self.sinks["matches"], self.sinks["late"], self.sinks["rejects"],
                          self._on_batch)
        runner = CellRunner(self.job, self.shares, self.lateness_us, self.attrs, self.states,
                            encode=encoder_of(self.sinks["matches"]))
        query = write_cells_stream(source.stream_df(spark), source.read_part, runner, sinks,
                                   checkpoint=str(self.checkpoint / "spark"), tasks=tasks,
                                   available_now=available_now,
                                   trigger_seconds=trigger_seconds, gate=self.gate,
                                   reread=rereads(source, tasks))
        if self.profile is not None:
            self.profile.follow(query, spark)
        return query

    def flush(self, spark: Any) -> None:
        """End of input: the cells' buffers released and matched, not committed."""
        flush_cells(spark, self.job, cells=self.cells, checkpoint=self.checkpoint / "spark",
                    sink=self.sinks["matches"], states=self.states,
                    on_batch=lambda b, out: self._count(b, out, persist=False))

    def close(self) -> None:
        """Nothing to release: the cells live in Spark."""

    def _on_batch(self, batch_id: int, output: CellsOutput) -> None:
        try:
            self._count(batch_id, output, persist=True)
        except Exception as err:
            self.failure = BatchFailure(batch_id, err)
            raise

    def _count(self, batch_id: int, output: CellsOutput, persist: bool) -> None:
        self._recover(batch_id)
        sums = {name: sum(s.get(name, 0) for s in output.stats) for name in _SUMMED}
        frontier = max((s["frontier"] for s in output.stats), default=NEVER)
        totals = self._totals
        warnings = skipped_file_warnings(output.rejects)
        if persist:  # as the driver mode, from the totals before the batch
            warnings += late_warnings(self._watch, batch_id, output.late.column("t"),
                                      sums["edges"], self.lateness_us)
        self._watch.follow(output.stats, frontier, self._jump_limit, self._records_from)
        totals.batches += 1
        for name in ("edges", "late", "rejected", "matches", "files", "lines", "released"):
            setattr(totals, name, getattr(totals, name) + sums[name])
        self._sizes = {"edges": sums["window"], "buffered": sums["buffered"]}
        self._last = batch_id
        if persist:
            self._save(batch_id)
        if self.profile is not None and persist:
            lines = [self.profile.add(batch_id, output.stats, time.perf_counter() - self._clock,
                                      output.seconds),
                     *self.profile.spark_lines()]  # Spark's of the batches before
            print("\n".join(lines), file=sys.stderr)
        if persist and isinstance(self.source, KafkaSource):
            self.partition_lag = self.source.lag_after(self.checkpoint / "spark", batch_id)
        now = time.perf_counter()
        pace = ""
        if persist and self._paced:
            lags = [s["lag_us"] for s in output.stats if "lag_us" in s]
            warnings += self.pace.observe(sums["lines"], now - self._clock,
                                          min(lags) if lags else None, now)
            pace = self.pace.line()
        if self.on_report is not None:
            self.on_report(BatchReport(
                batch_id, sums["edges"], sums["late"], sums["rejected"], sums["released"],
                sums["matches"], sums["buffered"], {"edges": sums["window"]}, frontier,
                now - self._clock, started=totals.released > 0,
                final=not persist,  # the end-of-input flush is not persisted
                partition_lag=self.partition_lag if persist else None,
                warnings=warnings, pace=pace))
        self._clock = time.perf_counter()

    def _recover(self, batch_id: int) -> None:
        """The totals after the batch before ``batch_id`` (from disk after a restart)."""
        if self._last == batch_id - 1:
            return
        saved = [b for b in self._saved() if b < batch_id]
        record = (json.loads(self._path(saved[-1]).read_text()) if saved
                  else {"totals": {}, "sizes": {"edges": 0, "buffered": 0}})
        self._totals = StreamTotals(**record["totals"])
        self._watch = EventWatch.of(self._totals, record.get("watch", {}))
        self._sizes = record["sizes"]
        self._last = saved[-1] if saved else -1

    def _save(self, batch_id: int) -> None:
        text = json.dumps({"totals": self._totals.as_dict(), "sizes": self._sizes,
                           "watch": self._watch.as_dict()})
        replace_atomically(self._path(batch_id),
                           lambda path: Path(path).write_text(text, encoding="utf-8"))
        for old in self._saved()[:-2]:
            self._path(old).unlink(missing_ok=True)

    def _path(self, batch_id: int) -> Path:
        return self.checkpoint / "cells" / f"totals-{batch_id:012d}.json"

    def _saved(self) -> list[int]:
        return sorted(int(m.group(1)) for p in (self.checkpoint / "cells").iterdir()
                      if (m := _TOTALS_FILE.match(p.name)))

    def resume(self) -> int:
        """Load the newest saved totals; the id of the last batch done (-1: none)."""
        self._recover(1 << 62)
        return self._last


def attributes_for(job: SubgraphJob, source: Any) -> pa.Schema:
    """The attribute columns the cells carry for ``job`` over ``source`` (the fields its
    split reads, :attr:`~graphcep.jobs.base.CellSplit.fields`), their types from the
    first file the source holds now (Spark's plan fixes them for the query's life); one
    line if the query reads a field they lack."""
    wanted = set(job.cell_split().fields) - {"t", "src", "dst", "dur", "seq"}
    if not wanted:
        return pa.schema([])
    sample = _sample_schema(source) if isinstance(source, FileSource) else None
    attrs = cell_attributes(job, sample) if sample is not None else pa.schema([])
    fixes = (f"--matching executors fixes the types of the fields the query reads "
             f"({', '.join(sorted(wanted))}) when it starts")
    if isinstance(source, FileSource) and sample is None:
        raise QueryError(f"{fixes}, from the first file in --source, and there is none there "
                         "yet: start the stream once one has arrived, or use --matching driver")
    if missing := sorted(wanted - set(attrs.names)):
        where = ("the first file in --source" if sample is not None
                 else "Kafka records, which cannot be sampled before the stream starts"
                 if isinstance(source, KafkaSource)
                 else "the generator's edges (t, src, dst, dur)")
        raise QueryError(f"{fixes}, from {where}, which lacks {', '.join(missing)}: use "
                         "--matching driver")
    return attrs


def _sample_schema(source: FileSource) -> pa.Schema | None:
    """The schema of the first file (by name) in the source's directory, read as the
    stream reads it; None when there is none."""
    files = sorted(p for p in Path(source.path).iterdir()
                   if p.is_file() and not p.name.startswith((".", "_")))
    if not files:
        return None
    read = read_edges_bytes(str(files[0]), files[0].read_bytes(), source.fmt, source.options)
    return read.edges.schema
