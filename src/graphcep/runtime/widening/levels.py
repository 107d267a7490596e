"""The levels of progressive window widening: batching, combining and the window plan.

What is here knows nothing of detectors: :func:`compress` is Algorithm 2's dropping of a
combined batch's middle, :class:`Level` the state one level keeps between batches, and
:func:`level_plan` what ``graphcep explain --pww`` prints (Tolpin et al., "Progressive
Temporal Window Widening"; the algorithm as reconstructed is stated in
:mod:`graphcep.runtime.widening`).

Example
-------
>>> import pyarrow as pa
>>> compress(pa.table({"t": list(range(7))}), 2).column("t").to_pylist()
[0, 1, 5, 6]
>>> [(p.level, p.batch_us, p.record_bound) for p in level_plan(3, 1_000_000, 3_500_000)]
[(0, 1000000, None), (1, 2000000, 6), (2, 4000000, 6)]
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa


def compress(batch: pa.Table, keep: int) -> pa.Table:
    """A combined batch as Algorithm 2 keeps it: longer than ``2 * keep`` records, its
    middle is dropped and the first and last ``keep`` records stay (in stream order).

    Theorem 1: a pattern instance of at most ``keep`` records that crosses an end of
    the combined batch lies within the records kept at that end; one that does not
    cross an end lies inside the batch, which was a window of the level below.
    """
    n = batch.num_rows
    if n <= 2 * keep:
        return batch
    return pa.concat_tables([batch.slice(0, keep), batch.slice(n - keep, keep)])


def levels_for(base_us: int, max_duration_us: int | None) -> int | None:
    """How many levels an instance of at most ``max_duration_us`` needs (None: no bound,
    levels are added as the stream grows): levels ``0..K`` where ``K`` is the first with
    ``2**K * base_us > max_duration_us``. An instance whose first and last records are
    less than a batch apart touches at most two adjacent batches, which one window holds
    (Lemma 1), so level ``K`` sees it.

    >>> levels_for(1_000_000, 999_999), levels_for(1_000_000, 1_000_000), levels_for(10, None)
    (1, 2, None)
    """
    if max_duration_us is None:
        return None
    k = 0
    while (base_us << k) <= max_duration_us:
        k += 1
    return k + 1


@dataclass(frozen=True)
class LevelPlan:
    """One level as ``explain`` shows it: its batch duration, its windows' duration and
    the most records a batch of it holds (None at level 0: its batches are as the
    stream gives them)."""

    level: int
    batch_us: int
    record_bound: int | None

    @property
    def window_us(self) -> int:
        return 2 * self.batch_us


def level_plan(keep: int, base_us: int, max_duration_us: int | None,
               shown: int = 8) -> list[LevelPlan]:
    """The levels (all of them under a duration bound, else the first ``shown``)."""
    count = levels_for(base_us, max_duration_us) or shown
    return [LevelPlan(k, base_us << k, None if k == 0 else 2 * keep) for k in range(count)]


@dataclass
class LevelStats:
    """What one level did: windows the detector ran on, the most records the level held
    between batches (its last batch and the one awaiting a partner; at level 0 also the
    batch being filled), detector seconds, new instances it reported, records dropped
    by combining."""

    windows: int = 0
    records_held: int = 0
    detector_seconds: float = 0.0
    instances: int = 0
    dropped: int = 0

    def as_dict(self) -> dict[str, float | int]:
        return {"windows": self.windows, "records_held": self.records_held,
                "detector_seconds": round(self.detector_seconds, 6),
                "instances": self.instances, "dropped": self.dropped}


@dataclass
class Level:
    """The state one level keeps between batches.

    Batch ``j`` of level ``k`` covers ``[j * d, (j + 1) * d)`` with ``d = 2**k * T0``.
    Only non-empty batches are handed to a level, in increasing ``j``; an empty batch
    runs no window (the window it would close holds a subset of the one before).
    ``last`` is the latest non-empty batch closed (the first half of the next window);
    ``half`` an even batch awaiting its odd partner (to combine for the level above);
    ``first`` and ``newest`` the first and latest non-empty batch indexes closed here.
    """

    k: int
    batch_us: int
    last: tuple[int, pa.Table] | None = None
    half: tuple[int, pa.Table] | None = None
    first: int | None = None
    newest: int | None = None
    stats: LevelStats = field(default_factory=LevelStats)

    def window(self, j: int, batch: pa.Table) -> pa.Table:
        """The window closed by batch ``j``: batch ``j - 1`` (if it held records) and ``j``."""
        if self.last is not None and self.last[0] == j - 1:
            return pa.concat_tables([self.last[1], batch])
        return batch

    def held_tables(self) -> list[pa.Table]:
        """The batches this level holds (each once)."""
        tables = [] if self.last is None else [self.last[1]]
        if self.half is not None and (self.last is None or self.half[0] != self.last[0]):
            tables.append(self.half[1])
        return tables

    def held(self) -> int:
        return sum(t.num_rows for t in self.held_tables())

    def one_window(self) -> bool:
        """Whether every record this level ever held lies in one window it ran (its
        first and latest batches are at most adjacent): higher levels hold subsets."""
        return self.first is None or self.newest is None or self.newest - self.first <= 1
