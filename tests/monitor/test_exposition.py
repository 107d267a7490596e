"""The monitor's numbers without Spark: a StreamOperator fed by hand, its numbers in
Prometheus' text format read back by ``prometheus_client``'s parser, escaping that
survives the parser, and a micro-batch written twice counted once."""

from __future__ import annotations

import json
import urllib.request

import pyarrow as pa
import pytest

from graphcep.jobs.subgraph import SubgraphJob
from graphcep.lang.sal import parse_program
from graphcep.monitor.exposition import metrics_text
from graphcep.monitor.live import LiveNumbers
from graphcep.monitor.server import Monitor
from graphcep.runtime.streaming.driver import StreamOperator
from tests.monitor.browser import CHROMIUM, Browser

parser = pytest.importorskip("prometheus_client.parser",
                             reason="prometheus_client is in the test extra")

TRIANGLE = ("{ a e1 b; b e2 c; c e3 a; starttime(e1) < starttime(e2);"
            " starttime(e2) < starttime(e3); starttime(e3) - starttime(e1) <= 10; }")


def edges(rows):
    return pa.table({"t": [r[0] * 1_000_000 for r in rows], "src": [r[1] for r in rows],
                     "dst": [r[2] for r in rows], "seq": list(range(len(rows)))})


def rejects(reasons):
    return pa.table({"file": ["f.csv"] * len(reasons), "line": list(range(len(reasons))),
                     "reason": reasons, "text": ["x"] * len(reasons)})


def samples(text):
    found = {}
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


class Kept:
    def __init__(self):
        self.written = []

    def write(self, table, batch_id=None):
        self.written.append((batch_id, table.num_rows))


def fed() -> LiveNumbers:
    """The live numbers of a stream fed by hand: two triangles x->y->z->x (t 1, 2, 3) and
    p->q->r->p (t 4, 5, 6), one late edge, three rejects of two kinds, in three batches."""
    live = LiveNumbers("q")
    operator = StreamOperator(SubgraphJob.create(parse_program(TRIANGLE)), lateness_us=0,
                              sink=live.matches.wrap(Kept()),
                              reject_sink=live.rejects.wrap(Kept()))
    live.follow(operator, "triangle")
    batches = [([(1, "x", "y"), (2, "y", "z")], ["missing fields: got 2"]),
               ([(3, "z", "x"), (4, "p", "q"), (5, "q", "r")],
                ["field 1 (t): not a number: 'a'", "field 1 (t): not a number: 'b'"]),
               ([(6, "r", "p"), (2, "late", "edge"), (20, "s", "t")], [])]
    for batch_id, (rows, reasons) in enumerate(batches):
        live.observe(operator.process(batch_id, edges(rows), rejects(reasons)))
    return live


def test_a_stream_fed_by_hand_reads_back_through_prometheus_parser():
    live = fed()
    found = samples(metrics_text(live.snapshot()))
    q = (("query", "triangle"),)
    assert found[("graphcep_edges_in_total", q)] == 8
    assert found[("graphcep_late_edges_total", q)] == 1
    assert found[("graphcep_rejected_lines_total", q)] == 3
    assert found[("graphcep_matches_total", q)] == 2
    assert found[("graphcep_batches_total", q)] == 3
    assert found[("graphcep_rejects_by_reason_total", (*q, ("reason", "missing fields")))] == 1
    assert found[("graphcep_rejects_by_reason_total", (*q, ("reason", "not a number")))] == 2
    assert found[("graphcep_batch_seconds_count", q)] == 3
    assert found[("graphcep_batch_seconds_bucket", (("le", "+Inf"), *q))] == 3
    assert found[("graphcep_watermark_seconds", q)] == 20.0  # lateness 0: the newest edge
    kept = [live.matches.row(m["number"]) for m in live.snapshot()["newest_matches"]]
    assert [dict(row["bindings"]) for row in kept] == [  # the newest first
        {"a": "p", "b": "q", "c": "r"}, {"a": "x", "b": "y", "c": "z"}]


def test_labels_and_help_are_escaped_as_the_parser_reads_them():
    rule = 'odd "rule"\\name\nsecond line'
    numbers = {"query": "q\\\"", "totals": {"edges": 1}, "state": {"edges": 2},
               "pace": {"lag_s": 1.5}, "partition_lag": {"flows/0": 7},
               "rejects_by_reason": {'bad "x"': 4}, "batch": None,
               "batch_seconds": {"buckets": [0.5, 1.0], "counts": [1, 0, 2], "sum": 7.25,
                                 "count": 3},
               "rules": {rule: {"kind": "sal", "version": None, "matches": 5,
                                "state": {"edges": 3}}}}
    found = samples(metrics_text(numbers))
    q = ("query", 'q\\"')
    assert found[("graphcep_rule_matches_total",
                  (q, ("rule", rule), ("version", "removed")))] == 5
    assert found[("graphcep_rejects_by_reason_total", (q, ("reason", 'bad "x"')))] == 4
    assert found[("graphcep_partition_lag_records",
                  (("partition", "0"), q, ("topic", "flows")))] == 7
    assert found[("graphcep_source_lag_seconds", (q,))] == 1.5
    buckets = [found[("graphcep_batch_seconds_bucket", (("le", le), q))]
               for le in ("0.5", "1.0", "+Inf")]
    assert buckets == [1, 1, 3]  # cumulative
    assert found[("graphcep_batch_seconds_sum", (q,))] == 7.25


def test_a_batch_written_again_replaces_what_it_gave():
    live = LiveNumbers("q")
    writer = live.rejects.wrap(Kept())
    writer.write(rejects(["missing fields: got 1"]), 0)
    writer.write(rejects(["missing fields: got 1", "not a number: 'a'"]), 1)
    writer.write(rejects(["missing fields: got 1", "not a number: 'a'"]), 1)  # a re-run
    assert live.rejects.counts() == {"missing fields": 2, "not a number": 1}
    sink = live.matches.wrap(Kept())
    sink.write(pa.table({"match_id": ["a", "b"]}), 0)
    sink.write(pa.table({"match_id": ["c"]}), 1)
    sink.write(pa.table({"match_id": ["c"]}), 1)
    assert [m["match_id"] for m in live.snapshot()["newest_matches"]] == ["c", "b", "a"]


def test_the_server_answers_each_path():
    live = LiveNumbers("triangle")
    monitor = Monitor(live, {"--metrics-port": 0, "--ui-port": 0})
    monitor.start()
    try:
        base = f"http://127.0.0.1:{monitor.port('--ui-port')}/"
        with urllib.request.urlopen(base) as page:
            assert "graphcep stream: triangle" in page.read().decode()
        with urllib.request.urlopen(base + "api/state.json") as state:
            assert json.loads(state.read())["query"] == "triangle"
        metrics = f"http://127.0.0.1:{monitor.port('--metrics-port')}/metrics"
        with urllib.request.urlopen(metrics) as answer:
            assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            assert list(parser.text_string_to_metric_families(answer.read().decode())) != []
        for missing in ("match/3.png", "nothing"):
            with pytest.raises(urllib.error.HTTPError, match="404"):
                urllib.request.urlopen(base + missing)
    finally:
        monitor.stop()


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary: install Debian's chromium "
                                              "package (.ci/run does when apt is usable)")
def test_the_page_shows_the_numbers_in_headless_chromium(tmp_path):
    monitor = Monitor(fed(), {"--ui-port": 0})
    monitor.start()
    try:
        with Browser(tmp_path / "profile") as browser:
            browser.call("Page.navigate", url=f"http://127.0.0.1:{monitor.port('--ui-port')}/")
            browser.wait_for("document.body && Number(document.body.dataset.polls) >= 2")
            browser.wait_for("document.querySelectorAll('#matches img').length == 2 && "
                             "Array.prototype.every.call(document.querySelectorAll("
                             "'#matches img'), function (i) { return i.naturalWidth > 0; })")
            shown = browser.evaluate(
                "JSON.stringify([Array.prototype.map.call(document.querySelectorAll("
                "'[data-figure]'), function (e) { return [e.dataset.figure, e.textContent]; }),"
                "Array.prototype.map.call(document.querySelectorAll('tr[data-reason]'),"
                "function (r) { return [r.dataset.reason, r.cells[1].textContent]; }),"
                "document.getElementById('watermark').textContent])")
            assert browser.errors() == []
    finally:
        monitor.stop()
    figures, reasons, watermark = json.loads(shown)
    shown_figures = {key: text for key, text in figures if key != "state"}  # the engine's
    assert shown_figures == {"edges": "8", "late": "1", "rejected": "3", "matches": "2",
                             "batches": "3", "buffered": "1",  # t = 20 s: at the watermark
                             "lag": "-"}  # the test's source has no lag to tell
    assert reasons == [["not a number", "2"], ["missing fields", "1"]]
    assert watermark == "20 s"


def test_the_sources_lag_and_backlog_are_gauges():
    from graphcep.runtime.streaming.driver import Pace

    live = LiveNumbers("q")
    operator = StreamOperator(SubgraphJob.create(parse_program(TRIANGLE)))
    operator.pace = Pace(offered_rate=1_000)
    live.follow(operator, "triangle")
    # what the Spark query notes after a batch: 500 records in 0.5 s, the source 2 s behind
    operator.pace.observe(500, 0.5, 2_000_000, now=10.0)
    live.observe(operator.process(0, edges([(1, "x", "y")])))
    found = samples(metrics_text(live.snapshot()))
    q = (("query", "triangle"),)
    assert found[("graphcep_source_lag_seconds", q)] == 2.0
    assert found[("graphcep_source_backlog_records", q)] == 2_000  # 2 s at 1,000/s
    assert live.snapshot()["series"][-1]["lag_s"] == 2.0  # the page's lag curve


def test_the_newest_matches_of_a_batch_written_in_chunks_pass_through_chunk_by_chunk():
    """Watching a stream keeps its output bounded: the sink under the page's tee gets a
    batch's chunks one by one (never the batch joined), and the page keeps the batch's
    newest rows across chunks."""
    import pyarrow as pa

    from graphcep.monitor.live import NewestMatches

    class Inner:
        def __init__(self) -> None:
            self.sizes: list[int] = []

        def write_chunks(self, tables, batch_id=None):
            self.sizes += [table.num_rows for table in tables]
            return sum(self.sizes)

    newest, inner = NewestMatches(3), Inner()
    chunks = [pa.table({"match_id": [f"{c}-{i}" for i in range(n)]})
              for c, n in enumerate((5, 4, 1))]
    assert newest.wrap(inner).write_chunks(iter(chunks), 7) == 10
    assert inner.sizes == [5, 4, 1]
    assert [c["match_id"] for c in newest.captions()] == ["2-0", "1-3", "1-2"]
