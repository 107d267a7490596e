"""What a cell's state costs a micro-batch when it lives in Spark's state store.

The executor mode's pipeline stripped to its Spark parts (``--matching executors``:
``mapInArrow`` packs each task's rows for a cell, ``applyInPandasWithState`` hands the
cell its rows and its state, ``foreachBatch`` collects the output), over Spark's
``rate-micro-batch`` source, one micro-batch a second, one cell on ``local[1]``. The
cell does no matching: it replaces its state of ``--megabytes`` MB (random bytes, as a
compressed snapshot would be) either

- *inline*: the state itself in Spark's state store (``InlineStates``: into the JVM, the
  store's delta file, back to Python at the next batch), or
- *file*: written by the Python worker to a file, the state store holding its name
  (``StateFiles``, what ``graphcep stream --matching executors`` keeps),

and, as a floor, *none* (no state). The figure is a batch's median and p90 wall time in
Spark (its ``triggerExecution``), over the batches after the first three.

Run: ``python -m bench.cell_state [--megabytes 1,10] [--seconds 25] [--rows 20000]``;
prints a markdown table (bench/RESULTS.md keeps the figures).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench.nu import machine_lines


def _pack(batches: Iterator) -> Iterator:
    import pyarrow as pa

    for batch in batches:
        yield pa.RecordBatch.from_pydict({"cell": pa.array([0], pa.int32()),
                                          "rows": [batch.column(1).to_numpy().tobytes()]})


def _step(size: int, mode: str, folder: str):
    """The cell's function: count its rows, replace its state of ``size`` bytes."""

    def step(key, frames, state):
        import pandas as pd

        rows = sum(len(frame) for frame in frames)
        if mode == "inline":
            if state.exists:
                _ = state.get[0]
            state.update((os.urandom(size),))
        elif mode == "file":
            if state.exists:  # the file before: the next step deletes it, as StateFiles
                _ = state.get[0]
            name = os.path.join(folder, os.urandom(8).hex())
            with open(name, "wb") as file:
                file.write(os.urandom(size))
            state.update((name.encode(),))
        yield pd.DataFrame({"cell": pd.Series([key[0]], dtype="int32"), "rows": [rows]})

    return step


def run(spark, mode: str, megabytes: float, seconds: float, rows: int) -> tuple[float, float]:
    """Median and p90 seconds of a batch's ``triggerExecution``."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    work = tempfile.mkdtemp(prefix="cell-state-")
    source = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows)
              .load())
    packed = source.mapInArrow(_pack, "cell int, rows binary")
    if mode == "none":
        out = packed
    else:
        out = packed.groupBy("cell").applyInPandasWithState(
            _step(int(megabytes * 1_000_000), mode, work), "cell int, rows long",
            "blob binary", "append", GroupStateTimeout.NoTimeout)
    query = (out.writeStream.foreachBatch(lambda df, _: df.toArrow())
             .option("checkpointLocation", str(Path(work) / "ck"))
             .trigger(processingTime="1 second").start())
    time.sleep(seconds)
    progress = query.recentProgress
    query.stop()
    took = sorted(p["durationMs"]["triggerExecution"] / 1000 for p in progress[3:])
    return took[len(took) // 2], took[int(len(took) * 0.9)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cell_state",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--megabytes", default="1,10")
    parser.add_argument("--seconds", type=float, default=25.0)
    parser.add_argument("--rows", type=int, default=20_000)
    args = parser.parse_args(argv)
    from graphcep.runtime.spark import spark_session

    header = machine_lines("python -m bench.cell_state " + " ".join(argv or []))
    spark = spark_session("local[1]", shuffle_partitions=1)
    run(spark, "inline", 1, 8, args.rows)  # warm-up: JVM, Python workers
    rows = []
    median, p90 = run(spark, "none", 0, args.seconds, args.rows)
    rows.append(f"| none (no state) | - | {median:.3f} | {p90:.3f} |")
    for size in (float(m) for m in args.megabytes.split(",")):
        for mode in ("inline", "file"):
            median, p90 = run(spark, mode, size, args.seconds, args.rows)
            rows.append(f"| {mode} | {size:g} | {median:.3f} | {p90:.3f} |")
    print("\n".join(header))
    print(f"- local[1], {args.rows:,} rows a micro-batch, one cell, {args.seconds:g} s a row\n")
    print("| state | MB | batch median s | batch p90 s |")
    print("|---|---:|---:|---:|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
