"""The HTML report of ``run`` and ``stream``: one self-contained page whose numbers equal
the run's JSON summary (printed by the same run), whose pictures all decode and are not
blank, which shows the query file and the rejects; for every kind of query, and once in
headless Chromium (console free of errors, every image decoded by the browser)."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from graphcep.cli import main
from graphcep.io.generator import generate_netflow, write_edges
from tests.paths import EXAMPLES, FIXTURES

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
BAD_LINES = "not,a,flow\n1.5,2011-08-10 09:46:53\n"


class Page(HTMLParser):
    """What a person reads on the page: the summary cells by field, the pictures, the
    query text, the rejected-lines count."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.cells: dict[str, str] = {}
        self.images: list[bytes] = []
        self.pre: dict[str, str] = {}
        self.body: dict[str, str] = {}
        self._into: tuple[str, str] | None = None
        self.feed(text)
        self.text = re.sub(r"<[^>]+>", " ", text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "td" and "data-key" in a:
            self._into = ("cell", a["data-key"])
            self.cells[a["data-key"]] = ""
        elif tag == "pre" and "id" in a:
            self._into = ("pre", a["id"])
            self.pre[a["id"]] = ""
        elif tag == "img":
            self.images.append(base64.b64decode(a["src"].split(",", 1)[1]))
        elif tag == "body":
            self.body = a

    def handle_endtag(self, tag):
        if tag in ("td", "pre"):
            self._into = None

    def handle_data(self, data):
        if self._into:
            kind, key = self._into
            (self.cells if kind == "cell" else self.pre)[key] += data


def not_blank(png: bytes) -> bool:
    from matplotlib.image import imread

    pixels = imread(io.BytesIO(png), format="png")
    return pixels.shape[0] > 100 and pixels.reshape(-1, pixels.shape[-1]).std(axis=0).max() > 0.05


def cells_of(summary: dict, prefix: str = "") -> dict:
    """The summary's fields as the page keys its cells: an object's fields as
    ``field.name``, a list of objects' as ``field.index.name``."""
    cells = {}
    for key, value in summary.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            cells.update(cells_of(value, f"{name}."))
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for i, item in enumerate(value):
                cells.update(cells_of(item, f"{name}.{i}."))
        else:
            cells[name] = value
    return cells


def assert_page_shows(page: Page, summary: dict, query: Path, matches_drawn: int) -> None:
    assert set(page.cells) == set(cells_of(summary))
    for key, value in cells_of(summary).items():
        shown = page.cells[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            assert shown == (value if isinstance(value, str) else json.dumps(value)), key
        else:
            assert float(shown.replace(",", "")) == value, key
    assert len(page.images) == 1 + matches_drawn  # the timeline, then the matches
    assert all(not_blank(png) for png in page.images)
    assert page.pre["query"] == query.read_text()
    assert page.pre["plan"].strip()
    rejected = summary["rejected"]
    assert (re.search(rf"Rejected lines\s+{rejected:,} rejected\s", page.text) is not None) == (rejected > 0)


def report_of(tmp_path: Path, argv: list[str], capsys) -> tuple[Page, dict, str]:
    page = tmp_path / "report.html"
    assert main([*argv, "--summary", "json", "--report", str(page)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    text = page.read_text()
    return Page(text), summary, text


@pytest.fixture(scope="module")
def flows(tmp_path_factory) -> Path:
    """Netflow (VAST lines) with two malformed lines at the end."""
    path = tmp_path_factory.mktemp("flows") / "flows.csv"
    write_edges(generate_netflow(1500, 60, 100, seed=3), path, "vast")
    with open(path, "a") as out:
        out.write(BAD_LINES)
    return path


def mathoverflow(tmp_path: Path) -> Path:
    """The MathOverflow slice labelled by file, as examples/ddst/README.md makes it."""
    from graphcep.io.labels import constant_labels, merge_streams
    from graphcep.io.readers import read_edges

    d = FIXTURES / "ddst"
    path = tmp_path / "mathoverflow.parquet"
    write_edges(merge_streams([
        constant_labels(read_edges(str(d / f"sx-mathoverflow-{k}-slice.txt")).edges, label=k)
        for k in ("a2q", "c2q", "c2a")]), str(path))
    return path


CASES = {
    "sal-pww": (EXAMPLES / "triangle.sal", ["--pww", "300"]),
    "nu": (EXAMPLES / "nu" / "triangle.nu", []),
    "ddst": (EXAMPLES / "ddst" / "answered_then_commented.ddst", []),
}


@pytest.mark.parametrize("case", CASES)
def test_a_report_for_each_kind_of_query(tmp_path, capsys, flows, case):
    query, extra = CASES[case]
    data = mathoverflow(tmp_path) if case == "ddst" else flows
    argv = ["run", str(query), "--input", str(data), "--engine", "local", "-o",
            str(tmp_path / "m.jsonl"), "--rejects", str(tmp_path / "r.jsonl"), "--draw", "2",
            "--draw-dir", str(tmp_path / "pictures"),
            *extra]
    page, summary, _ = report_of(tmp_path, argv, capsys)
    assert summary["matches"] >= 2
    assert_page_shows(page, summary, query, 2)


def test_a_report_of_subscriptions(tmp_path, capsys):
    query = EXAMPLES / "subs" / "figure3.subs"
    page, summary, _ = report_of(tmp_path, ["subscribe", str(query), "--input",
                                            str(EXAMPLES / "subs" / "figure3.seq"), "-o",
                                            str(tmp_path / "m.jsonl")], capsys)
    assert_page_shows(page, summary, query, summary["matches"])  # 6, under the default


@pytest.mark.slow
@pytest.mark.spark
def test_a_report_of_a_spark_run_and_of_a_stream(spark, tmp_path, capsys, flows):
    query = EXAMPLES / "triangle.sal"
    page, summary, _ = report_of(tmp_path, ["run", str(query), "--input", str(flows),
                                            "-o", str(tmp_path / "m.jsonl"), "--rejects",
                                            str(tmp_path / "r.jsonl")], capsys)
    assert summary["rejected"] == 2 and summary["engine"] == "spark"
    assert_page_shows(page, summary, query, 6)
    incoming = tmp_path / "in"
    incoming.mkdir()
    shutil.copy(flows, incoming / "a.csv")
    page, summary, _ = report_of(tmp_path, [
        "stream", str(query), "--source", str(incoming), "--format", "vast", "--checkpoint",
        str(tmp_path / "ckpt"), "--once", "--quiet", "-o", str(tmp_path / "out") + "/"], capsys)
    assert summary["rejected"] == 2 and summary["matches"] > 6
    assert_page_shows(page, summary, query, 6)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary: install Debian's chromium "
                                              "package (.ci/run does when apt is usable)")
def test_the_report_renders_in_headless_chromium(tmp_path, capsys, flows):
    query = EXAMPLES / "triangle.sal"
    page, summary, _ = report_of(tmp_path, [
        "run", str(query), "--input", str(flows), "--engine", "local", "-o",
        str(tmp_path / "m.jsonl"), "--rejects", str(tmp_path / "r.jsonl"), "--draw", "3",
        "--draw-dir", str(tmp_path / "pictures")],
        capsys)
    loaded = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
         "--v=0", "--virtual-time-budget=5000", f"--user-data-dir={tmp_path / 'profile'}",
         "--dump-dom", (tmp_path / "report.html").as_uri()],
        capture_output=True, text=True, timeout=180)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert ":CONSOLE" not in loaded.stderr  # no console message, no uncaught error
    seen = Page(loaded.stdout)
    assert seen.body.get("data-images-decoded") == "1" * 4  # timeline and 3 matches
    assert_page_shows(seen, summary, query, 3)


def test_a_stream_report_keeps_the_first_matches_once_each():
    import pyarrow as pa

    from graphcep.io.sinks import Sink
    from graphcep.pictures.runs import KeepFirst

    class Counting(Sink):
        def __init__(self):
            self.rows = 0

        def write(self, table, batch_id=None):
            self.rows += table.num_rows

    inner = Counting()
    keep = KeepFirst(inner, 5)
    for batch_id, values in [(0, [1, 2]), (1, [3, 4]), (1, [3, 4]), (2, []), (3, [5, 6, 7])]:
        keep.write(pa.table({"x": values}), batch_id)  # batch 1 written twice (a re-run)
    assert [r["x"] for r in keep.rows()] == [1, 2, 3, 4, 5]
    assert inner.rows == 9  # every batch passed on, the re-run too


def test_the_report_keeps_the_first_matches_of_batches_written_in_chunks():
    """A stream writes a batch's matches in chunks: the report's keeper passes them on
    one by one (the sink never gets the batch joined) and keeps the first rows it has
    room for; a batch written again replaces what it gave."""
    import pyarrow as pa

    from graphcep.pictures.runs import KeepFirst

    class Chunked:
        def __init__(self):
            self.sizes = []

        def write_chunks(self, tables, batch_id=None):
            self.sizes += [table.num_rows for table in tables]
            return sum(self.sizes)

    def chunks(*runs):
        return iter(pa.table({"x": list(run)}) for run in runs)

    inner = Chunked()
    keep = KeepFirst(inner, 5)
    keep.write_chunks(chunks([1, 2], [3]), 0)
    keep.write_chunks(chunks([9]), 1)
    keep.write_chunks(chunks([4], [5, 6], [7]), 1)  # batch 1 run again, other matches
    assert [r["x"] for r in keep.rows()] == [1, 2, 3, 4, 5]
    assert inner.sizes == [2, 1, 1, 1, 2, 1]


@pytest.mark.parametrize("option", ["--report", "--timeline"])
def test_a_report_or_timeline_naming_an_input_is_refused(tmp_path, capsys, option):
    # a subscriptions file named as the picture would be (subscribe reads any name)
    query = tmp_path / ("q.html" if option == "--report" else "q.png")
    shutil.copy(EXAMPLES / "subs" / "figure3.subs", query)
    before = query.read_text()
    assert main(["subscribe", str(query), "--input", str(EXAMPLES / "subs" / "figure3.seq"),
                 option, str(query)]) == 2
    err = capsys.readouterr().err
    assert "is an input of the run" in err and err.count("\n") == 1
    assert query.read_text() == before
