"""Progressive window widening (PWW): any graphcep detector over doubling windows, for
patterns of unknown duration (Tolpin, Shimony, Rokach et al., "Progressive Temporal
Window Widening").

A fixed window either misses slow instances or delays every fast one and holds hours of
state. PWW runs the detector, as a black box over a window's records, in sliding
windows of every width ``2**k * T0`` at once, and bounds what each width holds by
dropping the middle of long batches.

**The algorithm as reconstructed.** The paper's copy lost its mathematical symbols;
from its prose, figures' captions and proofs:

* ``T0`` (``--pww-base``): the duration of the base batches. Level 0's batch ``j``
  holds the records whose start time ``t`` lies in ``[j * T0, (j + 1) * T0)`` (batches
  are aligned on multiples of ``T0`` from time 0, so any runtime cuts the same ones).
* Level ``k >= 1`` combines two adjacent level-``(k - 1)`` batches, ``2i`` and
  ``2i + 1``, into its batch ``i``, of duration ``2**k * T0`` (equation 1: batch
  concatenation).
* At every level the detector runs in sliding windows of two adjacent batches, ``j``
  and ``j + 1``, with half overlap. Lemma 1: every interval of at most one batch's
  duration lies inside some window (it lies in one batch or spans two adjacent ones).
* Algorithm 2: a combined batch longer than ``2L`` records keeps its first ``L`` and
  its last ``L`` records; its middle is dropped. ``L`` (``--pww``) is the most records a
  pattern instance spans (see below). A level-``(k + 1)`` batch is a level-``k`` window,
  whose instances the detector has already seen; an instance not yet seen must cross an
  end of it, and with at most ``L`` records it lies within the ``L`` kept there.
  Theorem 1: every instance of at most ``L`` records is seen by some window. So no
  batch above level 0 holds more than ``2L`` records, and no window more than ``4L``.
* Theorem 2: with the detector's cost on ``n`` records ``R(n)``, a level-``k`` window
  arrives every ``2**k * T0`` and costs at most ``R(4L)``, so the cost per unit of time
  summed over all levels is at most ``2 R(4L) / T0`` -- bounded, however many levels.
* ``D`` (``--pww-max-duration``), optional: the longest duration of an instance. It
  fixes the number of levels, ``0..K`` with ``K`` the first level whose batches are
  longer than ``D`` (the paper's Spark implementation declares its levels up front);
  without it a level is added whenever the top one has two batches to combine.

**Terms, precisely.** An *instance* is a match of the detector over the whole stream,
with its records (edges). Its *span in records* is the number of stream records from its
first record to its last in stream order ``(t, seq)``, both included; its *duration* is
its last record's start time minus its first's. Theorem 1 as tested: when the detector's
matches are *local* (:attr:`~graphcep.jobs.base.ReplayJob.local_matches`: a match is
decided by its own records, as for SAL queries, search-mode ν-expressions and
subscriptions), PWW reports every instance the detector finds over the whole stream whose
span is at most ``L`` records and duration at most ``D``, and only instances the detector
finds over the whole stream. A subscription's occurrence is also decided by its records'
places in their key's sequence: the job's stream numbering
(:meth:`~graphcep.jobs.base.ReplayJob.stream_numbering`,
:mod:`graphcep.jobs.key_positions`) numbers every record as the stream arrives, before
any window is cut, and each window's detector reads a key's runs of consecutive
positions, so that a dropped middle never joins two records. For other detectors (DDST's
match components depend on every edge of their window) PWW reports what the detector
finds in its windows, a sub-stream each, and says so (``explain``).

**Exactly once.** Windows overlap, and a level's windows are the batches of the level
above, so an instance is seen many times. Windows run in the order a stream closes them
-- by the time their last batch ends, lower levels first at equal times -- and an
instance is reported by the first window that finds it, with its level (``pww_level``).
An instance is known by :meth:`~graphcep.jobs.base.ReplayJob.instances`, the same
whichever window finds it: the ``match_id`` for SAL (query and edge seqs), ν (first and
last times and bindings) and subscriptions (subscription and edge seqs); query and the
set of edge seqs for DDST. An identity is forgotten once no window can see the instance
again: every record a later window may hold is held now by some level, and such a window
holds records at the instance's first and last times.

**Report time and delay.** ``pww_report_t`` is the start time of the last record of the
window that reports the instance (at or before the end of the window's later batch, when
a stream closes it); ``pww_delay_us`` is ``pww_report_t`` minus the start time of the
instance's last record.

**Time bounds.** A SAL query needs no time bound under PWW: each window's start times lie
within ``2**(k+1) * T0``, which is given to the job as its window
(:meth:`~graphcep.jobs.base.ReplayJob.bounded_by`); the record bound ``L`` replaces it.

Example
-------
>>> import pyarrow as pa
>>> from graphcep.jobs import as_job
>>> from graphcep.lang.nu import parse_nu
>>> job = as_job(parse_nu("a ~> b . b ~> c", "slow"))   # no delay bounds it
>>> edges = pa.table({"t": [0, 5, 9_000_000_000], "src": ["a", "x", "b"],
...                   "dst": ["b", "y", "c"]})
>>> matches, stats = run_widening(job, edges, keep=3, base_us=1_000_000)
>>> matches.select(["first_t", "last_t", "pww_level"]).to_pylist()
[{'first_t': 0, 'last_t': 9000000000, 'pww_level': 13}]
"""

from graphcep.runtime.widening.detection import PWW_FIELDS, Found, detect, widened_schema
from graphcep.runtime.widening.job import WidenedJob, refuse_short_keep
from graphcep.runtime.widening.levels import (
    LevelPlan,
    LevelStats,
    compress,
    level_plan,
    levels_for,
)
from graphcep.runtime.widening.planner import (
    Window,
    WindowCut,
    WindowPlanner,
    plan_cuts,
    plan_windows,
)
from graphcep.runtime.widening.runner import (
    Widening,
    WideningStats,
    run_widening,
    widening_input,
)

__all__ = ["PWW_FIELDS", "Found", "LevelPlan", "LevelStats", "WidenedJob", "Widening",
           "WideningStats", "Window", "WindowCut", "WindowPlanner", "compress", "detect",
           "level_plan", "levels_for", "plan_cuts", "plan_windows", "refuse_short_keep",
           "run_widening", "widened_schema", "widening_input"]
