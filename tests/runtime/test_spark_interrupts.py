"""Ctrl-C in a Spark run or stream: exit 130 and graphcep's one line, never a traceback; an
interrupted stream still writes its --report and --timeline.

The JVM's start-up notices (``WARNING: Using incubator modules``, the log4j profile, WARN
lines about the host name and native libraries) come before any interrupt in every Spark
run, on the stderr the JVM shares; the tests set them aside and assert that nothing else
but graphcep's line is there, with no ERROR, traceback or py4j line anywhere.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from html.parser import HTMLParser

import pytest

from tests.paths import EXAMPLES

#: The JVM's start-up notices (see the module docstring).
JVM_START = re.compile(r"WARNING: Using incubator modules|Using Spark's default log4j profile"
                       r"|\d\d/\d\d/\d\d \d\d:\d\d:\d\d WARN |Setting default log level"
                       r"|To adjust logging level")

#: Runs ``graphcep`` with SIGINT sent (from a timer thread) 0.1 s into the SparkSession's
#: creation: the main thread is then inside a py4j call, where PySpark's own handler used
#: to raise KeyboardInterrupt and print four tracebacks.
INTERRUPTED_START = """
import os, signal, sys, threading
from pyspark.sql import session
made = session.SparkSession.__init__
def init(self, *args, **kwargs):
    threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT)).start()
    made(self, *args, **kwargs)
session.SparkSession.__init__ = init
from graphcep.cli import main
sys.argv = ["graphcep", *sys.argv[1:]]
sys.exit(main())
"""


def graphcep_lines(stderr: str) -> list[str]:
    """stderr without the JVM's start-up notices and the stream's progress lines; no
    traceback, ERROR or py4j line anywhere."""
    for word in ("Traceback", "ERROR", "py4j", "Exception"):
        assert word not in stderr, stderr[-3000:]
    return [line for line in stderr.splitlines()
            if not JVM_START.search(line) and not line.startswith("batch ")]


@pytest.mark.slow
def test_ctrl_c_while_the_session_is_made_is_one_line(tmp_path):
    edges = tmp_path / "edges.txt"
    edges.write_text("".join(f"{i % 7} {(i * 3) % 11} {1_000 + i}\n" for i in range(200)))
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_START, "run", str(EXAMPLES / "triangle.sal"),
         "--input", str(edges), "--master", "local[1]", "-o", str(tmp_path / "out.jsonl")],
        capture_output=True, text=True, timeout=180)
    assert done.returncode == 130, done.stderr[-3000:]
    assert graphcep_lines(done.stderr) == [
        f"graphcep: interrupted; {tmp_path / 'out.jsonl'} was not written (an output file "
        "appears when the command ends; a file that was there is kept)"]
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.slow
def test_a_stream_interrupted_while_spark_starts_says_its_report_is_not_written(tmp_path):
    report = tmp_path / "r.html"
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_START, "stream", str(EXAMPLES / "triangle.sal"),
         "--source", "generator", "--master", "local[1]", "--checkpoint",
         str(tmp_path / "ckpt"), "--output", str(tmp_path / "out") + "/", "--report",
         str(report)], capture_output=True, text=True, timeout=180)
    assert done.returncode == 130, done.stderr[-3000:]
    assert graphcep_lines(done.stderr) == [
        f"graphcep: interrupted; nothing was started; --report {report} not written"]
    assert not report.exists()


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)


@pytest.mark.slow
def test_an_interrupted_stream_writes_its_summary_report_and_timeline(tmp_path):
    """SIGINT once micro-batches have matched: exit 130, one line naming the pictures, the
    summary on stdout, and --report (HTML with the summary's figures) and --timeline (a
    PNG with a row per micro-batch drawn) written."""
    report, timeline = tmp_path / "r.html", tmp_path / "t.png"
    command = [sys.executable, "-m", "graphcep.cli", "stream", str(EXAMPLES / "triangle.sal"),
               "--source", "generator", "--rate", "20000", "--vertices", "300",
               "--master", "local[1]", "--checkpoint", str(tmp_path / "ckpt"),
               "--output", str(tmp_path / "out") + "/", "--report", str(report),
               "--timeline", str(timeline)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        matched = re.match(r"batch \d+: .*, ([\d,]+) match(?:es)? \|", line)
        if matched and matched[1] != "0":
            proc.send_signal(signal.SIGINT)
            break
    out, rest = proc.communicate(timeout=120)
    assert proc.returncode == 130, "".join(seen) + rest
    assert graphcep_lines("".join(seen) + rest) == [
        "graphcep: interrupted; every finished micro-batch is checkpointed, run the same "
        f"command to continue; --report {report} and --timeline {timeline} written from "
        "the micro-batches finished"]
    summary = re.search(r"(\d[\d,]*) match(?:es)? in ([\d,]+) edges? over ([\d,]+) "
                        r"micro-batch(?:es)?",
                        out)
    assert summary is not None, out
    assert int(summary[1].replace(",", "")) > 0
    assert timeline.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = report.read_text()
    tags = _Tags()
    tags.feed(html)
    assert tags.tags[0] == "html" and "img" in tags.tags
    assert summary[1] in html and summary[2] in html
    assert os.path.getsize(timeline) > 1_000



def test_the_line_says_which_pictures_were_not_written_and_why():
    from argparse import Namespace

    from graphcep.cli.stream import _pictures_note, _reason

    both = Namespace(report="r.html", timeline="t.png")
    full = OSError(28, "No space left on device", "r.html")
    assert (_pictures_note(both, f"not written ({_reason(full)})")
            == "; --report r.html and --timeline t.png not written "
               "(No space left on device: r.html)")
    assert _pictures_note(Namespace(report=None, timeline="t.png"), "written") == (
        "; --timeline t.png written")
    assert _pictures_note(Namespace(report=None, timeline=None), "written") == ""


#: Runs ``graphcep demo`` with SIGINT sent 0.5 s into its first Spark job, when Spark's
#: tasks are running and the JVM would print a stack trace for each one it aborts.
INTERRUPTED_DEMO = """
import os, signal, sys, threading
import graphcep.runtime.spark as spark_runtime
started = spark_runtime.run_spark
def run_spark(*args, **kwargs):
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
    return started(*args, **kwargs)
spark_runtime.run_spark = run_spark
from graphcep.cli import main
sys.argv = ["graphcep", *sys.argv[1:]]
sys.exit(main())
"""


@pytest.mark.slow
def test_ctrl_c_in_the_demo_is_one_line_and_keeps_the_generated_stream(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_DEMO, "demo", "--edges", "100000", "--workdir",
         str(tmp_path), "--master", "local[2]"],
        capture_output=True, text=True, timeout=180)
    assert done.returncode == 130, done.stderr[-3000:]
    stream = tmp_path / "netflow.csv"
    assert graphcep_lines(done.stderr) == [
        f"graphcep: interrupted; the generated stream stays in {stream}"]
    assert stream.stat().st_size > 0


#: Starts graphcep's Spark session, has the JVM write a line on its stderr, then takes
#: SIGINT under ``exit_on_interrupt`` whose ``last`` step has the JVM write again: as the
#: JVM does when it is stopped in the middle of a micro-batch (an RpcEnvStoppedException
#: trace, and more), on a machine too loaded to switch the JVM's log off in time.
JVM_WRITES_AFTER_THE_INTERRUPT = """
import os, signal, sys, time
import graphcep.interrupts as interrupts
from graphcep.runtime.spark import spark_session
spark = spark_session("local[1]")
jvm = spark.sparkContext._jvm
interrupts._hush_jvm = lambda *args, **kwargs: None  # the JVM too busy to answer
jvm.System.err.println("JVM before the interrupt")
time.sleep(1)
def last():
    jvm.System.err.println("JVM after the interrupt")
    jvm.System.err.flush()
    time.sleep(1)
    return "; summary printed"
interrupts.exit_on_interrupt("every finished micro-batch is checkpointed", last=last)
os.kill(os.getpid(), signal.SIGINT)
time.sleep(30)
"""


@pytest.mark.slow
def test_nothing_the_jvm_writes_comes_after_the_interrupted_line():
    """The JVM's stderr goes through graphcep, which drops it from the interrupt on: the
    one line is the last, whatever the JVM still writes and however long its log takes
    to be switched off (before: a JVM stack trace after the line on a busy machine)."""
    done = subprocess.run([sys.executable, "-c", JVM_WRITES_AFTER_THE_INTERRUPT],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 130, done.stderr[-3000:]
    assert "JVM before the interrupt" in done.stderr  # the JVM's stderr is not lost
    assert "JVM after the interrupt" not in done.stderr, done.stderr[-3000:]
    assert done.stderr.splitlines()[-1] == (
        "graphcep: interrupted; every finished micro-batch is checkpointed; summary printed")
