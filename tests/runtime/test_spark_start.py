"""Before Spark starts: an absent standalone master is one line and exit 2, at once
(Spark itself retries for about a minute, then prints a Java stack trace)."""

from __future__ import annotations

import socket
import sys

import pytest

from graphcep.cli import main
from graphcep.runtime.spark_start import SparkStartError, check_master, standalone_masters
from tests.paths import EXAMPLES


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_masters_of_a_url():
    assert standalone_masters("spark://h1:7000,h2") == [("h1", 7000), ("h2", 7077)]
    assert standalone_masters("spark://[::1]:7001") == [("::1", 7001)]
    assert standalone_masters("yarn") == standalone_masters("local[2]") == []


def test_a_master_that_listens_passes_and_one_that_does_not_is_named():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        check_master(f"spark://127.0.0.1:{closed_port()},127.0.0.1:{port}")  # one answers
    with pytest.raises(SparkStartError, match="no Spark master answers"):
        check_master(f"spark://127.0.0.1:{closed_port()}", timeout_s=1)


@pytest.mark.parametrize("command", ["run", "motifs"])
def test_the_command_line_says_so_in_one_line_without_starting_spark(tmp_path, capsys,
                                                                      command):
    flows = tmp_path / "flows.csv"
    flows.write_text("t,src,dst\n1,a,b\n2,b,c\n3,c,a\n")
    master = f"spark://127.0.0.1:{closed_port()}"
    argv = (["run", str(EXAMPLES / "triangle.sal"), "--input", str(flows)]
            if command == "run" else ["motifs", "-i", str(flows), "-d", "5", "--engine", "spark"])
    started = "pyspark.sql.session" in sys.modules and _active_session()
    assert main([*argv, "--master", master, "-o", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--master {master}: no Spark master answers" in err
    assert _active_session() == started  # no session was started for it


def _active_session() -> bool:
    if "pyspark.sql.session" not in sys.modules:
        return False
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession() is not None


@pytest.mark.spark
def test_the_jvm_says_nothing_at_start_unless_spark_conf_sets_its_log(tmp_path):
    """A Spark run's stderr holds no log lines of the JVM's start (before: Spark's default
    profile printed the host name's loopback address, native Hadoop libraries and a note
    on the log level, on every command); a ``log4j2.properties`` in ``SPARK_CONF_DIR`` is
    the user's, used as it is."""
    import os
    import subprocess

    edges = tmp_path / "edges.csv"
    edges.write_text("t,src,dst,dur\n1,a,b,0\n2,b,c,0\n3,c,a,0\n")
    command = [sys.executable, "-m", "graphcep", "run", str(EXAMPLES / "triangle.sal"),
               "--input", str(edges), "--engine", "spark", "--master", "local[1]"]
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "log4j2.properties").write_text(
        "rootLogger.level = info\nrootLogger.appenderRef.stderr.ref = stderr\n"
        "appender.console.type = Console\nappender.console.name = stderr\n"
        "appender.console.target = SYSTEM_ERR\nappender.console.layout.type = PatternLayout\n"
        "appender.console.layout.pattern = %p %c{1}: %m%n\n"
        # Spark's threshold for a Python session's console (else WARN)
        "logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer\n"
        "logger.gateway.level = info\n")
    stderr = {}
    for name, extra in (("ours", {}), ("user's", {"SPARK_CONF_DIR": str(conf)})):
        env = {k: v for k, v in os.environ.items() if k != "SPARK_CONF_DIR"}
        done = subprocess.run(command, capture_output=True, text=True, timeout=300,
                              env={**env, **extra})
        assert done.returncode == 0, done.stderr[-3000:]
        assert "match 1" in done.stdout
        stderr[name] = done.stderr
    # the JDK's own notice of an incubator module is not the log's
    assert [line for line in stderr["ours"].splitlines()
            if not line.startswith("WARNING: Using incubator modules")] == []
    assert "INFO SparkContext: Running Spark version" in stderr["user's"]
