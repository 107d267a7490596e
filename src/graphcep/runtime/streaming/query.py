"""The Structured Streaming query that drives the operator: started from ``foreachBatch``
(:func:`start_stream`) or drained once (:func:`run_available_now`), stopped between
micro-batches (:class:`BatchGate`), its failures said in one line (a full disk names its
path), the socket source's restart bookkeeping, and the checkpoint's claim (one checkpoint,
one stream).

The sources it reads are in :mod:`graphcep.runtime.streaming.sources`, the operator it
drives in :mod:`graphcep.runtime.streaming.driver`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from graphcep.engines.base import StateBoundError
from graphcep.io.sinks import replace_atomically
from graphcep.patterns.subgraph import QueryError
from graphcep.runtime.streaming.checkpoint_bytes import CheckpointDamaged
from graphcep.runtime.streaming.driver import BatchReport, Pace, StreamOperator, print_report
from graphcep.runtime.streaming.sources import (
    FileSource,
    GeneratorSource,
    SocketSource,
    StreamFailure,
    paced,
)


def start_stream(
    spark: Any,
    operator: StreamOperator,
    source: FileSource | SocketSource | GeneratorSource,
    *,
    checkpoint: str | os.PathLike,
    trigger_seconds: float | None = None,
    available_now: bool = False,
    on_report: Any = print_report,
    batch_offset: int = 0,
    pace: Pace | None = None,
) -> Any:
    """Start the streaming query: ``source`` -> ``operator`` per micro-batch.

    Spark's own progress (offsets, commits) is kept in ``<checkpoint>/spark``; the
    operator's state in ``<checkpoint>/state``. ``available_now`` processes what the source
    holds now and stops (then call ``operator.flush``, see :func:`run_available_now`).
    The operator numbers Spark's batch ``b`` as ``batch_offset + b`` (a socket source
    starts Spark's numbering afresh at every start, :func:`restart_socket_checkpoint`).
    ``pace``, when given, notes each batch's records and the source's lag, and adds its
    figures to the batch's report (and its warning, when the stream falls behind).

    A micro-batch that raises fails the query before Spark commits it, so a restart runs
    it again from the state before it; :func:`await_query` raises the error as a
    :class:`BatchFailure`.
    """

    operator.failure = None  # a new query: an earlier one's failure is not its own
    gate = operator.gate = BatchGate()

    def on_batch(batch_df: Any, spark_batch_id: int) -> None:
        batch_id = batch_offset + spark_batch_id
        with gate.batch():
            take(batch_df, batch_id)

    def take(batch_df: Any, batch_id: int) -> None:
        try:
            began = time.perf_counter()
            operator.recover(batch_id)  # the source numbers files and lines from the state
            got = source.read_batch(batch_df, operator)
            report: BatchReport = operator.process(batch_id, got.edges, got.rejects,
                                                   files=got.files, lines=got.lines,
                                                   names=got.names, places=got.places)
            if got.partition_lag is not None:
                report.partition_lag = operator.partition_lag = got.partition_lag
            for place, offsets in got.lost.items():  # said, counted, and gone on past
                operator.records_lost.setdefault(place, []).append(offsets)
                report.warnings.append(f"--source {source.describe()}: records deleted "
                                       f"before they were read (retention): {place} offsets "
                                       f"{offsets}; the stream goes on")
            if pace is not None:
                now = time.perf_counter()
                report.warnings += pace.observe(got.lines, now - began, got.lag_us, now)
                report.pace = pace.line()
            if on_report is not None:
                on_report(report)
        except Exception as err:
            # kept: Spark hands the error back as a py4j text with both stack traces
            if operator.failure is None:
                operator.failure = BatchFailure(batch_id,
                                                _source_failure(source, err, batch_id) or err)
            raise

    trigger_seconds = paced(source, trigger_seconds)
    discard_unfinished_writes(Path(checkpoint) / "spark")
    writer = (source.stream_df(spark).writeStream.foreachBatch(on_batch)
              .option("checkpointLocation", str(Path(checkpoint) / "spark")))
    if available_now:
        writer = writer.trigger(availableNow=True)
    elif trigger_seconds:
        writer = writer.trigger(processingTime=f"{trigger_seconds} seconds")
    try:
        return writer.start()  # writes the query's metadata into the checkpoint
    except Exception as err:
        full = disk_failure(err, Path(checkpoint) / "spark")
        if full is None:
            raise
        raise full from None


def discard_unfinished_writes(spark_dir: Path) -> list[Path]:
    """Remove what a killed run left half-written in Spark's checkpoint logs: Spark writes
    each log file to a hidden ``.NAME.UUID.tmp`` (and its ``.crc``) and renames it when
    done, so such a file is never part of the checkpoint. Left by a kill during batch 0's
    offsets, it makes Spark refuse the restart ("should be empty on batch 0"). The files
    removed are returned. Call only while no query runs on ``spark_dir``."""
    removed = []
    for log in ("offsets", "commits"):
        folder = spark_dir / log
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            if path.name.startswith(".") and path.name.endswith((".tmp", ".tmp.crc")):
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


class StopRequested(Exception):
    """Raised at the start of a micro-batch once the stream is to stop (:class:`BatchGate`):
    Spark commits nothing of that batch, which the next start runs."""


class BatchGate:
    """Lets a stream stop between micro-batches, never inside one.

    ``StreamingQuery.stop()`` interrupts the micro-batch under way: its Python code is cut
    short inside a call into the JVM, and Spark then reads the error's text with a
    regular expression that overflows the JVM's stack on a long traceback (a
    ``StackOverflowError`` trace of a thousand lines, the query never told). Closed, the
    gate waits for the batch under way to finish, and a batch that starts after raises
    :class:`StopRequested` before it reads anything; the query can then be stopped.
    """

    def __init__(self) -> None:
        self._closing = threading.Event()
        self._running = threading.Lock()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Around one micro-batch (raises :class:`StopRequested` once closed)."""
        with self._running:
            if self._closing.is_set():
                raise StopRequested("the stream is stopping")
            yield

    def close(self, timeout: float | None = None) -> bool:
        """No micro-batch starts from now; wait (at most ``timeout`` seconds) for the one
        under way. Whether it finished."""
        self._closing.set()
        if not self._running.acquire(timeout=-1 if timeout is None else timeout):
            return False
        self._running.release()
        return True


def stop_between_batches(query: Any, operator: Any) -> None:
    """Stop a query after its micro-batch under way, if any (:class:`BatchGate`; a query
    started without one is stopped at once)."""
    gate = getattr(operator, "gate", None)
    with _stream_log_off():
        if gate is not None:
            gate.close()
        query.stop()
    if isinstance(getattr(operator.failure, "cause", None), StopRequested):
        operator.failure = None  # the batch it kept from starting is the next start's


#: the loggers of Spark's micro-batch loop (``MicroBatchExecution``)
_STREAM_LOGGERS = "org.apache.spark.sql.execution.streaming"


@contextlib.contextmanager
def _stream_log_off() -> Iterator[None]:
    """Spark's streaming log off while a stream stops between micro-batches: a batch that
    starts once the gate is closed ends the query with :class:`StopRequested`, which
    Spark logs as an ERROR with a Java trace of sixty lines -- the stop that was asked
    for, not a failure (a failure of the batch under way is the operator's, reported in
    one line). Without a JVM, or a log4j to set, nothing changes."""
    from pyspark import SparkContext

    log4j = before = None
    with contextlib.suppress(Exception):
        jvm = SparkContext._active_spark_context._jvm  # type: ignore[union-attr]
        config = (jvm.org.apache.logging.log4j.LogManager.getContext(False)
                  .getConfiguration().getLoggerConfig(_STREAM_LOGGERS))
        # a level set for these loggers is put back, else they inherit again (None)
        before = config.getExplicitLevel() if config.getName() == _STREAM_LOGGERS else None
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
            _STREAM_LOGGERS, jvm.org.apache.logging.log4j.Level.OFF)
        log4j = jvm.org.apache.logging.log4j
    try:
        yield
    finally:
        if log4j is not None:
            with contextlib.suppress(Exception):
                log4j.core.config.Configurator.setLevel(_STREAM_LOGGERS, before)


class BatchFailure(Exception):
    """Micro-batch ``batch_id`` raised ``cause``; Spark committed nothing of it, so the
    checkpoint holds the batches before it and a restart runs it again."""

    def __init__(self, batch_id: int, cause: BaseException) -> None:
        super().__init__(f"micro-batch {batch_id} failed: {one_line(cause)}")
        self.batch_id = batch_id
        self.cause = cause


#: What the JVM says when the system fails a write, as the errno Python would give.
_DISK_ERRORS = {"No space left on device": errno.ENOSPC, "Disk quota exceeded": errno.EDQUOT,
                "Read-only file system": errno.EROFS, "Input/output error": errno.EIO}


def disk_failure(err: BaseException, where: Path) -> OSError | None:
    """The system's failure to write Spark's checkpoint (a full disk...), which Spark
    raises as a Java exception, as the ``OSError`` Python would raise for ``where`` (the
    command line then says it in one line naming the path, exit 1); None for another
    error."""
    text = str(getattr(err, "desc", None) or err)
    for reason, number in _DISK_ERRORS.items():
        if reason in text:
            return OSError(number, reason, str(where))
    return None


def one_line(err: BaseException) -> str:
    """``Type: first line of the message`` (a Spark message goes on with stack traces)."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}".rstrip(": ")


def await_query(query: Any, operator: StreamOperator, timeout: float | None = None,
                source: Any = None) -> None:
    """Wait for a streaming query (at most ``timeout`` seconds); raise what stopped it, if
    anything: the operator's refusal of the stream as itself (a :class:`QueryError`, which
    the command line reports in one line), a micro-batch's error as :class:`BatchFailure`,
    anything else as :class:`StreamFailure`."""
    try:
        query.awaitTermination(timeout)
    except Exception as err:
        raise _failure(err, operator, source) from None
    if query.exception() is not None:
        raise _failure(query.exception(), operator, source)


def _failure(err: Any, operator: StreamOperator, source: Any) -> Exception:
    """What :func:`await_query` raises for ``err`` (see there; the system failing a
    write of Spark's checkpoint: an ``OSError``, :func:`disk_failure`)."""
    if operator.refusal is not None:
        return operator.refusal
    if operator.failure is not None:
        return operator.failure
    full = disk_failure(err, _checkpoint_of(operator) / "spark")
    if full is not None:
        return full
    text = str(getattr(err, "desc", None) or err)
    bound = StateBoundError.found_in(text)  # hit in a cell on an executor
    if bound is not None:
        return StateBoundError(f"{bound} (in a cell on an executor; the checkpoint holds "
                               "the micro-batches before it, and a restart runs it again)")
    batch_id = _next_batch(_checkpoint_of(operator) / "spark")
    damaged = CheckpointDamaged.found_in(text)  # a cell's file, read on an executor
    if damaged is not None:
        return BatchFailure(batch_id, CheckpointDamaged(damaged))
    lost = _source_failure(source, err, batch_id)
    if lost is not None:  # the source's brokers gone while planning a batch's offsets
        return BatchFailure(batch_id, lost)
    where = source.describe() if source is not None else "the source"
    if "Connection refused" in text or "ConnectException" in text:
        return StreamFailure(f"--source {where}: connection refused (no server listening "
                             "there; start it first)")
    # Spark's message: "[STREAM_FAILED] Query [id = ..., runId = ...] terminated with
    # exception: <reason> SQLSTATE: ..." and then stack traces
    first = text.strip().splitlines()[0] if text.strip() else type(err).__name__
    reason = re.sub(r"^.*terminated with exception: ", "", first)
    reason = re.sub(r"\s*SQLSTATE: \w+\s*$", "", reason)
    return StreamFailure(f"the streaming query over {where} stopped: {reason}")


def _source_failure(source: Any, err: BaseException, batch_id: int) -> Exception | None:
    """``err`` as the source says it, when it knows it (a Kafka source's brokers that did
    not answer within ``--broker-wait``); None otherwise."""
    said = getattr(source, "brokers_lost", None)
    return None if said is None else said(str(getattr(err, "desc", None) or err), batch_id)


def _next_batch(spark_dir: Path) -> int:
    """The micro-batch Spark runs next on ``spark_dir``: the one after the last it
    committed (the one failing when the query fails before committing it)."""
    commits = _batch_files(spark_dir / "commits")
    return max(commits) + 1 if commits else 0


def _checkpoint_of(operator: Any) -> Path:
    """The stream's checkpoint directory (a StreamOperator keeps its state under
    ``state``, the executor mode's run the checkpoint itself)."""
    state = getattr(operator, "state_dir", None)
    return state.parent if state is not None else Path(getattr(operator, "checkpoint", "."))


def quiet_query_errors(spark: Any) -> None:
    """Keep Spark from logging a failed streaming query's error (both stack traces, a
    hundred lines or more): :func:`await_query` raises it, and the command line reports
    it in one line."""
    jvm = spark.sparkContext._jvm
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        "org.apache.spark.sql.execution.streaming", jvm.org.apache.logging.log4j.Level.OFF)


def restart_socket_checkpoint(operator: StreamOperator, checkpoint: str | os.PathLike,
                              delivered: int | None = None,
                              delivered_lines: int | None = None) -> tuple[int, int]:
    """Begin a socket source's Spark checkpoint afresh; return the operator's batch id for
    Spark's batch 0 (:func:`start_stream`'s ``batch_offset``) and the lines newly counted
    lost.

    Spark's socket offsets count the lines of one connection: restored at a restart they
    make Spark drop the new connection's first lines as done, or fail ("Offsets committed
    out of order"). The lines of a micro-batch the last run left unfinished are counted
    into the operator's ``lost`` total first (:func:`socket_lines_lost`), and the total is
    written to ``CHECKPOINT/socket-lost.json`` before Spark's offsets go: a start that
    fails before its first micro-batch (no server listening yet) would otherwise take the
    count with it, the operator's state not being written until a batch finishes.

    ``delivered``: the last micro-batch a transactional sink (Kafka) delivered, and
    ``delivered_lines`` the lines the stream had read through it (its marker's count;
    None: not known, then Spark's offsets tell). A run killed after the sink's commit and
    before the operator saved the batch's state leaves the sink one batch ahead of the
    state: that batch's id and its lines' numbers are taken (the sink skips a batch id it
    delivered; match ids hash the lines' numbers), so the operator passes over them
    (:meth:`StreamOperator.pass_over`) and the new run's batches are numbered after it.
    Its lines count as lost too: their matches with the lines before them were
    delivered, but they are not in the state for the lines after.
    """
    spark_dir = Path(checkpoint) / "spark"
    done = operator.resume()  # loads the state first: the count goes into it
    ahead = delivered is not None and delivered > done
    offset = (delivered if ahead else done) + 1
    record = Path(checkpoint) / _LOST_FILE
    kept = json.loads(record.read_text()) if record.exists() else {}
    newly = 0
    unfinished = _unfinished_batch(spark_dir)
    if ahead and delivered_lines is not None:
        newly = max(0, delivered_lines - operator.totals.lines)
    elif unfinished is not None and unfinished != kept.get("counted"):  # not counted yet
        newly = socket_lines_lost(spark_dir, operator)
    lost = max(operator.totals.lost, int(kept.get("lost", 0))) + newly
    operator.totals.lost = lost
    if ahead:  # checkpointed with the count: a kill after it counts nothing twice
        operator.pass_over(delivered, lines=operator.totals.lines + newly)
    if unfinished is not None:
        text = json.dumps({"lost": lost, "counted": unfinished}) + "\n"
        replace_atomically(record, lambda path: Path(path).write_text(text))
    shutil.rmtree(spark_dir, ignore_errors=True)
    spark_dir.mkdir(parents=True)
    (spark_dir / _BATCH_OFFSET_FILE).write_text(f"{offset}\n")
    return offset, newly


_BATCH_OFFSET_FILE = "graphcep-batch-offset"

#: The socket lines lost so far, and which Spark run's micro-batch was counted last
_LOST_FILE = "socket-lost.json"


def _unfinished_batch(spark_dir: Path) -> str | None:
    """Which Spark run (its first operator batch id) and micro-batch the offsets log
    names last, when Spark did not commit it; None when there is none."""
    offsets = _batch_files(spark_dir / "offsets")
    if not offsets or max(offsets) in _batch_files(spark_dir / "commits"):
        return None
    marker = spark_dir / _BATCH_OFFSET_FILE
    start = marker.read_text().strip() if marker.exists() else "0"
    return f"{start}+{max(offsets)}"


def socket_lines_lost(spark_dir: Path, operator: StreamOperator) -> int:
    """Lines of the socket micro-batch Spark planned (its offsets written) but neither
    Spark nor the operator finished: a crash or interrupt lost them, as the socket
    cannot send them again."""
    offsets = _batch_files(spark_dir / "offsets")
    if not offsets:
        return 0
    last = max(offsets)
    if last in _batch_files(spark_dir / "commits"):
        return 0
    marker = spark_dir / _BATCH_OFFSET_FILE
    offset = int(marker.read_text()) if marker.exists() else 0
    if operator.resume() >= offset + last:
        return 0  # the operator finished it; only Spark's commit was missing
    end = _socket_offset(offsets[last])
    start = _socket_offset(offsets[last - 1]) if last - 1 in offsets else -1
    return max(0, end - start)


def _batch_files(directory: Path) -> dict[int, Path]:
    if not directory.is_dir():
        return {}
    return {int(p.name): p for p in directory.iterdir() if p.name.isdigit()}


def _socket_offset(path: Path) -> int:
    """The line offset in an offsets-log entry: a version line, the batch's metadata (a
    JSON object), then one offset per source -- the socket's a plain number."""
    lines = path.read_text().splitlines()
    try:
        return int(lines[2])
    except (IndexError, ValueError):  # not a socket's offset: nothing to count
        return -1


def run_available_now(spark: Any, operator: StreamOperator, source: Any, *,
                      checkpoint: str | os.PathLike, on_report: Any = print_report,
                      batch_offset: int = 0) -> Any:
    """Process everything the source holds now, then flush the reorder buffer; the
    finished streaming query."""
    query = start_stream(spark, operator, source, checkpoint=checkpoint, available_now=True,
                         on_report=on_report, batch_offset=batch_offset)
    await_query(query, operator, source=source)
    report = operator.flush()
    if on_report is not None:
        on_report(report)
    return query


#: What makes a failed read or write the system's, not the input's or an option's (exit 1):
#: a full disk...; a write nobody answered in time (Kafka brokers gone mid-stream)
SYSTEM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EFBIG,
                           errno.ETIMEDOUT})


def system_failed(err: BaseException) -> bool:
    """Whether ``err`` is the system failing a read or a write (a full disk...): exit 1,
    where a path that cannot be written as asked (a directory in a part's place) is 2."""
    return isinstance(err, OSError) and err.errno in SYSTEM_ERRNOS


#: What a checkpoint records of its stream on first start (``CHECKPOINT/graphcep.json``)
CHECKPOINT_IDENTITY = "graphcep.json"


def claim_checkpoint(checkpoint: Path, source: str, query: str, digest: str) -> None:
    """Record the stream a checkpoint belongs to on first start; refuse it to another.

    A checkpoint's state and totals are those of one query over one source: resumed for
    another source, Spark fails on the old directory's offsets; for another query (or the
    same file edited, or options that change the matches) the state would be the wrong
    one and the totals mixed. A checkpoint written before this record existed is adopted.
    """
    record = checkpoint / CHECKPOINT_IDENTITY
    try:
        _check_claim(checkpoint, record, source, query, digest)
    except QueryError:
        raise
    except OSError as err:
        if system_failed(err):  # a full disk: exit 1, the file named
            raise
        raise QueryError(f"--checkpoint {checkpoint}: cannot be used ({err})") from None
    except ValueError as err:  # not our record
        raise QueryError(f"--checkpoint {checkpoint}: cannot be used ({err})") from None


def _check_claim(checkpoint: Path, record: Path, source: str, query: str, digest: str) -> None:
    """:func:`claim_checkpoint`'s comparison (or first record)."""
    if record.exists():
        stored = json.loads(record.read_text(encoding="utf-8"))
        if not isinstance(stored, dict):
            raise ValueError(f"{record} is not graphcep's record of the stream")
        if _same_stream(stored, source, query, digest):
            return
        if has_finished_batches(checkpoint):
            _refuse_claim(checkpoint, stored, source, query)
        # no micro-batch ever finished here: the failed start's offsets go with its claim
        shutil.rmtree(checkpoint / "spark", ignore_errors=True)
        shutil.rmtree(checkpoint / "cells", ignore_errors=True)
    checkpoint.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"source": source, "query": query, "digest": digest}, indent=1)
    replace_atomically(record, lambda path: Path(path).write_text(text + "\n",
                                                                    encoding="utf-8"))


def _same_stream(stored: dict, source: str, query: str, digest: str) -> bool:
    return (stored.get("source"), stored.get("query"), stored.get("digest")) == (
        source, query, digest)


def _refuse_claim(checkpoint: Path, stored: dict, source: str, query: str) -> NoReturn:
    if (stored.get("source"), stored.get("query")) != (source, query):
        raise QueryError(
            f"checkpoint {checkpoint} belongs to query {stored.get('query')} over "
            f"{stored.get('source')}, not to query {query} over {source}: give another "
            "--checkpoint")
    raise QueryError(
        f"checkpoint {checkpoint} belongs to query {query} over {source} as it was "
        "first started: the query file or an option that changes its matches "
        "(--query-name, --window, --max-duration, --homomorphic, --format, "
        "--time-unit, --time-format, --header, --columns, the DDST engine, --pww and its "
        "options) or "
        "where its state lives (--matching executors against driver) differs since: give "
        "another --checkpoint")


def has_finished_batches(checkpoint: Path) -> bool:
    """Whether a micro-batch finished on this checkpoint (the operator, or the executor
    mode's totals, saved state): a start that failed before any (no server listening, a
    typo in --source) leaves it free for the corrected command."""
    state = checkpoint / "state"
    return (state.is_dir() and any(state.iterdir())) or any(
        (checkpoint / "cells").glob("totals-*"))
