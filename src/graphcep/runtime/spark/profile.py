"""Where a Spark replay's time went: the tasks' own phases and Spark's stage metrics.

The tasks' phases (rows received from the JVM, sorting, warm-up on the edges before the
shard, matching) are timed in each task and summed over the job's tasks by an accumulator
(:func:`task_phases`); Spark's own metrics of the job's stages (time its executors ran,
shuffle writes and the wait for shuffle reads) come from its status store
(:func:`stage_seconds`). Sums over tasks can exceed the wall clock: tasks run side by side.
"""

from __future__ import annotations

from typing import Any

from pyspark.accumulators import AccumulatorParam


class PhaseSeconds(AccumulatorParam):
    """Seconds per phase name, added up over tasks."""

    def zero(self, value: dict[str, float]) -> dict[str, float]:
        return {}

    def addInPlace(self, value1: dict[str, float], value2: dict[str, float]) -> dict[str, float]:  # noqa: N802 -- PySpark's name
        for name, seconds in value2.items():
            value1[name] = value1.get(name, 0.0) + seconds
        return value1


def task_phases(spark) -> Any:
    """An accumulator the tasks of a replay add their phases' seconds to."""
    return spark.sparkContext.accumulator({}, PhaseSeconds())


def summed(phases: dict[str, float]) -> dict[str, float]:
    """The tasks' phases named as sums over tasks."""
    return {f"tasks: {name} (summed)": seconds for name, seconds in phases.items()}


def _status_store(spark) -> Any:
    return spark.sparkContext._jsc.sc().statusStore()


def stage_mark(spark) -> int:
    """The highest stage id so far (-1 when none, or when the status store cannot be read):
    the stages of a job started afterwards have higher ones."""
    try:
        stages = _stages(spark)
    except Exception:  # noqa: BLE001 -- a private API: the profile goes without
        return -1
    return max((stage.stageId() for stage in stages), default=-1)


def stage_seconds(spark, after: int) -> dict[str, float]:
    """Spark's metrics of the stages after stage id ``after``, in seconds summed over
    their tasks: executor run time, shuffle write time and shuffle fetch wait. Empty when
    the status store cannot be read (it is Spark's internal API)."""
    try:
        stages = [s for s in _stages(spark) if s.stageId() > after]
    except Exception:  # noqa: BLE001 -- a private API: the profile goes without
        return {}
    if not stages:
        return {}
    written = sum(s.shuffleWriteBytes() for s in stages) / 1e6
    return {
        "tasks: run time (Spark's metric, summed)": sum(s.executorRunTime() for s in stages) / 1e3,
        f"shuffle: writing ({written:.0f} MB, summed)":
            sum(s.shuffleWriteTime() for s in stages) / 1e9,
        "shuffle: waiting for reads (summed)":
            sum(s.shuffleFetchWaitTime() for s in stages) / 1e3,
    }


def _stages(spark) -> list:
    sc = spark.sparkContext
    quantiles = sc._gateway.new_array(sc._jvm.double, 0)
    found = _status_store(spark).stageList(None, False, False, quantiles, None)
    return [found.apply(i) for i in range(found.size())]
