"""Timelines: edges and matches per bin equal a brute-force count over the definition
(bin ``i`` holds the times in ``[origin + i*w, origin + (i+1)*w)``, ``w`` the shortest
width of the list that cuts the span into fewer than 300 bins); the plots decode and are
not blank."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from graphcep.pictures.records import read_matches
from graphcep.pictures.timelines import (
    StreamProgress,
    match_times,
    plot_run,
    plot_stream,
    run_timeline,
)
from tests.paths import FIXTURES

WIDTHS_S = (1, 10, 60, 600, 3600, 86400)


def oracle(edges: list[int], matches: list[int]) -> tuple[int, list[int], list[int]]:
    span = max(edges) - min(edges)
    widths = [*WIDTHS_S, *(86400 * 10**k for k in range(1, 20))]  # then 10, 100... days
    width = next(w * 10**6 for w in widths if span // (w * 10**6) < 300)
    origin = min(edges) - min(edges) % width
    size = (max(edges) - origin) // width + 1
    count = [sum(1 for t in ts if origin + i * width <= t < origin + (i + 1) * width)
             for ts in (edges, matches) for i in range(size)]
    return width, count[:size], count[size:]


@pytest.mark.parametrize("span_s, seed", [(7, 1), (1500, 2), (40_000, 3), (3e7, 4),
                                          (3e8, 5), (5e12, 6)])
def test_counts_per_bin_equal_a_brute_force_count(span_s, seed):
    rng = np.random.default_rng(seed)
    start = int(rng.integers(0, 10**15))
    edges = sorted(start + rng.integers(0, int(span_s * 10**6), 400))
    matches = sorted(rng.choice(edges, 150))
    timeline = run_timeline(np.array(edges), np.array(matches))
    width, per_bin, matched = oracle(edges, matches)
    assert timeline.width_us == width
    assert timeline.edges.tolist() == per_bin and timeline.matches.tolist() == matched


def test_match_times_are_when_each_kind_of_match_completed():
    rows = list(read_matches(FIXTURES / "pictures" / "matches.jsonl"))
    sal = pa.Table.from_pylist([rows[0]])
    assert match_times(sal).tolist() == [513_000]  # last_t 0.513 s
    ddst = pa.Table.from_pylist([rows[1]])
    assert match_times(ddst).tolist() == [1_267_430_790 * 10**6]  # window_end (trigger)
    subs = pa.Table.from_pylist([rows[3]])
    assert match_times(subs).tolist() == [6 * 10**6]  # end_t


def not_blank(path) -> bool:
    from matplotlib.image import imread

    pixels = imread(path)
    return pixels.shape[0] > 100 and pixels.reshape(-1, pixels.shape[-1]).std(axis=0).max() > 0.05


def test_plots_decode_and_are_not_blank(tmp_path):
    timeline = run_timeline(np.arange(0, 100 * 10**6, 10**5), np.arange(0, 50 * 10**6, 10**6))
    plot_run(timeline, tmp_path / "run.png")
    assert not_blank(tmp_path / "run.png")

    class Batch:  # what StreamProgress reads of a progress report
        def __init__(self, i):
            self.batch_id, self.edges_in, self.late, self.matches = i, 100 * i, i % 2, 3 * i
            self.state, self.buffered, self.seconds = {"edges": 50 * i}, 10, 0.1 * i

    progress = StreamProgress(started=0.0)
    for i in range(4):
        progress.record(Batch(i), now=1.5 * i)
    assert progress.column("window").tolist() == [0, 50, 100, 150]
    assert progress.column("at").tolist() == [0, 1.5, 3.0, 4.5]
    plot_stream(progress, tmp_path / "stream.png")
    assert not_blank(tmp_path / "stream.png")


def test_one_timestamp_years_away_keeps_the_picture_small(tmp_path):
    """A wrong timestamp 30,000 years after the rest: at most 300 bins, drawn at once."""
    edges = np.array([0, 1_000_000, 2_000_000, 10**18], dtype=np.int64)
    timeline = run_timeline(edges, edges[:1])
    assert timeline.edges.size <= 300 and timeline.edges.sum() == 4
    assert timeline.unit == f"{timeline.width_us // (86400 * 10**6):,} days"
    plot_run(timeline, tmp_path / "t.png")
    assert (tmp_path / "t.png").stat().st_size > 0


@pytest.mark.parametrize(("span_s", "unit"), [(0, "seconds"), (7200, "seconds"),
                                              (7201, "minutes"), (15 * 86400, "hours"),
                                              (400 * 86400, "days")])
def test_the_time_axis_reads_in_a_unit_fit_for_the_span(span_s, unit):
    """A 15-day stream's axis once read 0 to 1.2 'seconds' (a hidden x 1e6 offset)."""
    from graphcep.pictures.timelines import axis_unit

    scale, name = axis_unit(span_s)
    assert name == unit and scale == {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86400}[unit]


def test_a_fortnight_is_drawn_in_hours_without_an_offset(tmp_path, monkeypatch):
    import matplotlib.figure

    seen = {}
    save = matplotlib.figure.Figure.savefig

    def spy(fig, *args, **kwargs):
        fig.canvas.draw()
        ax = fig.axes[0]
        seen["label"] = ax.get_xlabel()
        seen["offset"] = ax.xaxis.get_major_formatter().get_offset()
        seen["ticks"] = [t.get_text() for t in ax.get_xticklabels()]
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", spy)
    day = 86400 * 10**6
    edges = np.arange(0, 15 * day, day // 24, dtype=np.int64)
    plot_run(run_timeline(edges, edges[:3]), tmp_path / "t.png")
    assert seen["label"].startswith("hours after t = ") and seen["offset"] == ""
    assert max(float(t.replace("\u2212", "-")) for t in seen["ticks"] if t) <= 400
