"""``graphcep stream --metrics-port --ui-port`` for real: a stream of several rules over
files with malformed lines, its metrics parsed by ``prometheus_client``'s parser and its
page loaded in headless Chromium, their numbers against the input (edges and rejects
counted by the test) and against the summary the stream prints when it stops."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from graphcep.io.generator import generate_netflow, write_edges
from tests.monitor.browser import CHROMIUM, Browser
from tests.paths import EXAMPLES

parser = pytest.importorskip("prometheus_client.parser",
                             reason="prometheus_client is in the test extra")

SRC = Path(__file__).resolve().parents[2] / "src"
EDGES = 1500
#: malformed lines, and the kind of reason each is rejected for
BAD = {"not,a,flow\n": 3, "abc,1970-01-01 00:00:00,19700101000000,17,udp,node4,node3,1947,"
       "3067,0,0,1,35568,32400,37128,33400,39,25,0\n": 2}
REASONS = {"missing fields": 3, "not a number": 2}
#: a second rule: a 2-path within 5 seconds
PATH_RULE = "{ a e1 b; b e2 c; starttime(e1) < starttime(e2); " \
            "starttime(e2) - starttime(e1) <= 5; }\n"


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return answer.read()


#: how each stream runs: several rules in the driver, one SAL query in the executors
MODES = {"rules in the driver": ["--rules", "RULES"],
         "executors": [str(EXAMPLES / "triangle.sal"), "--matching", "executors"]}


@pytest.fixture(params=list(MODES))
def stream(request, tmp_path):
    """The stream running (``--run-for`` long: it is stopped with SIGINT), with its
    metrics and page addresses."""
    incoming, rules = tmp_path / "incoming", tmp_path / "rules"
    incoming.mkdir()
    rules.mkdir()
    write_edges(generate_netflow(EDGES, 60, 100, seed=3), incoming / "flows.csv", "vast")
    with open(incoming / "flows.csv", "a") as out:
        out.write("".join(line * count for line, count in BAD.items()))
    (rules / "triangle.sal").write_text((EXAMPLES / "triangle.sal").read_text())
    (rules / "path.sal").write_text(PATH_RULE)
    process = subprocess.Popen(
        [sys.executable, "-m", "graphcep", "stream",
         *[str(rules) if arg == "RULES" else arg for arg in MODES[request.param]], "--source",
         str(incoming), "--format", "vast", "--checkpoint", str(tmp_path / "ckpt"),
         "-o", str(tmp_path / "out") + "/", "--run-for", "900", "--summary", "json",
         "--quiet", "--metrics-port", "0", "--ui-port", "0", "--master", "local[1]"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(SRC), os.environ.get("PYTHONPATH", "")])})
    try:
        first = process.stderr.readline()
        found = re.search(r"metrics at (\S+); live page at (\S+)", first)
        assert found, first + process.stderr.read()[-3000:]
        yield process, found.group(1), found.group(2)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=60)


def state_when_read(page: str, timeout: float = 400.0) -> dict:
    """The page's data once every file has been read (every edge and reject counted)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = json.loads(get(page + "api/state.json"))
        totals = state["totals"]
        if totals and totals["edges"] == EDGES and totals["rejected"] == sum(BAD.values()):
            return state
        time.sleep(1)
    raise TimeoutError(f"the stream did not read its files: {state['totals']}")


def metrics_of(url: str) -> dict[tuple[str, tuple], float]:
    """Every sample by name and labels (query label dropped), as Prometheus' parser reads
    them."""
    text = get(url).decode()
    samples = {}
    for metric in parser.text_string_to_metric_families(text):
        for sample in metric.samples:
            labels = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "query"))
            samples[(sample.name, labels)] = sample.value
    return samples


def stop_for_summary(process) -> dict:
    """SIGINT: the stream prints its summary of the micro-batches done, and leaves."""
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.spark
def test_metrics_and_page_show_the_summarys_numbers(stream, tmp_path):
    process, metrics_url, page = stream
    state = state_when_read(page)
    metrics = metrics_of(metrics_url)
    shown = page_figures(page, tmp_path) if CHROMIUM else None
    if json.loads(get(page + "api/state.json"))["totals"] != state["totals"]:
        pytest.fail("the stream went on after its files were read")
    summary = stop_for_summary(process)
    # the input's own counts (the test wrote them)
    assert metrics[("graphcep_edges_in_total", ())] == EDGES
    assert metrics[("graphcep_rejected_lines_total", ())] == sum(BAD.values())
    reasons = {dict(labels)["reason"]: value for (name, labels), value in metrics.items()
               if name == "graphcep_rejects_by_reason_total"}
    assert reasons == REASONS
    # the summary's
    for key, name in (("edges", "graphcep_edges_in_total"), ("late", "graphcep_late_edges_total"),
                      ("rejected", "graphcep_rejected_lines_total"),
                      ("matches", "graphcep_matches_total"),
                      ("batches", "graphcep_batches_total")):
        assert metrics[(name, ())] == summary[key], key
    for part, value in summary["state"].items():
        assert metrics[("graphcep_state", (("part", part),))] == value, part
    assert summary["matches"] > 0
    assert set(summary.get("rules", {})) in ({"path.sal", "triangle.sal"}, set())
    for rule, facts in summary.get("rules", {}).items():
        labels = (("rule", rule), ("version", facts["version"]))  # the query's dropped
        assert metrics[("graphcep_rule_matches_total", labels)] == facts["matches"], rule
        assert ("graphcep_rule_state", (("part", "edges"), *labels)) in metrics
    assert metrics[("graphcep_batch_seconds_count", ())] == summary["batches"]
    assert metrics[("graphcep_batch_seconds_bucket", (("le", "+Inf"),))] == summary["batches"]
    if shown is None:
        pytest.skip("no chromium binary: install Debian's chromium package (.ci/run does "
                    "when apt is usable); the metrics were checked")
    figures, rules, rejects, errors, pictures = shown
    assert errors == []  # no console message, no uncaught error, no failed load
    for key in ("edges", "late", "rejected", "matches", "batches"):
        assert figures[key] == summary[key], key
    assert figures["state"] == summary["state"]["edges"]
    assert rules == {rule: facts["matches"] for rule, facts in summary.get("rules", {}).items()}
    assert rejects == reasons
    assert pictures and all(width > 0 for width in pictures.values())


def page_figures(page: str, tmp_path: Path) -> tuple:
    """What the page shows once rendered: the totals, each rule's matches, the rejects by
    reason (numbers as read on the page), the console's errors, and the width of each
    match picture decoded."""
    read = """(function () {
      function n(text) { return Number(text.replace(/,/g, '')); }
      var figures = {}, rules = {}, rejects = {}, pictures = {};
      document.querySelectorAll('[data-figure]').forEach(function (e) {
        figures[e.dataset.figure] = e.textContent === '-' ? null : n(e.textContent); });
      document.querySelectorAll('tr[data-rule]').forEach(function (tr) {
        rules[tr.dataset.rule] = n(tr.cells[3].textContent); });
      document.querySelectorAll('tr[data-reason]').forEach(function (tr) {
        rejects[tr.dataset.reason] = n(tr.cells[1].textContent); });
      document.querySelectorAll('#matches img').forEach(function (img) {
        pictures[img.src] = img.complete ? img.naturalWidth : 0; });
      return JSON.stringify([figures, rules, rejects, pictures]);
    })()"""
    with Browser(tmp_path / "profile") as browser:
        browser.call("Page.navigate", url=page)
        browser.wait_for("document.body && Number(document.body.dataset.polls) >= 2")
        browser.wait_for("Array.prototype.every.call(document.querySelectorAll('#matches img'),"
                         " function (i) { return i.complete; }) && "
                         "document.querySelectorAll('#matches img').length > 0")
        figures, rules, rejects, pictures = json.loads(browser.evaluate(read))
        return figures, rules, rejects, browser.errors(), pictures


def test_a_monitor_port_in_use_is_one_line(tmp_path, capsys):
    from graphcep.cli import main

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        code = main(["stream", str(EXAMPLES / "triangle.sal"), "--source", str(tmp_path),
                     "--checkpoint", str(tmp_path / "ckpt"), "--ui-port", str(port)])
    finally:
        taken.close()
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().splitlines() == [
        f"graphcep: --ui-port {port}: cannot serve on 127.0.0.1:{port}, in use by another "
        "process: name another port"]


@pytest.mark.parametrize(("argv", "said"), [
    (["--monitor-host", "0.0.0.0"], "graphcep: --monitor-host says where --metrics-port and "
                                    "--ui-port listen: give one of them"),
    (["--ui-port", "65536"], "graphcep: stream: argument --ui-port: expected at most 65,535, "
                             "got 65,536 (see graphcep stream --help)"),
])
def test_monitor_options_out_of_place_are_one_line(tmp_path, capsys, argv, said):
    from graphcep.cli import main

    code = main(["stream", str(EXAMPLES / "triangle.sal"), "--source", str(tmp_path),
                 "--checkpoint", str(tmp_path / "ckpt"), *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [said]
