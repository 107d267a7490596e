"""A Spark standalone cluster on loopback for tests: one master, N workers, killable.

Started from the installed PySpark distribution (``pyspark.find_spark_home``; the pip
package ships ``bin/spark-class`` and the jars): the master and every worker are
``spark-class org.apache.spark.deploy.{master.Master,worker.Worker}`` subprocesses, each
the leader of its own process group (``start_new_session``), bound to 127.0.0.1 on free
ports, with their own work directory and log file under the cluster's directory.

A worker launches its executor JVM (and the executor its Python workers) inside the
worker's process group, so :meth:`SparkCluster.kill_worker` -- ``SIGKILL`` to the group --
takes the whole "machine" down at once: worker, executor, Python daemons, cached blocks and
shuffle files' server, as a lost node would. :meth:`SparkCluster.stop` kills every group
that is still alive; use the cluster as a context manager (or from a fixture's
``finally``) so nothing outlives a failing test. The daemons also get
``PR_SET_PDEATHSIG=SIGKILL`` (Linux), so even a test process killed outright takes them
down, and their executors follow them.

The daemons and the drivers started with :meth:`SparkCluster.driver_env` read
``<dir>/conf/`` (``SPARK_CONF_DIR``): ``spark-defaults.conf`` (:data:`SPARK_DEFAULTS`) and
``log4j2.properties`` (:data:`LOG4J2`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

#: What a driver started against the cluster reads (``SPARK_CONF_DIR``): executors small,
#: since the test machine is shared; short shuffle-fetch retries, so a fetch from the
#: killed worker gives up in seconds rather than Spark's default 3 x 5 s.
SPARK_DEFAULTS = {
    "spark.executor.memory": "512m",
    "spark.executor.cores": "1",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.shuffle.io.maxRetries": "1",
    "spark.shuffle.io.retryWait": "1s",
    # the master's REST submission server would take the fixed port 6066
    "spark.master.rest.enabled": "false",
    # short-lived JVMs on a small shared machine: C1 only, serial GC (less start-up CPU)
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}
#: the same for the master and worker daemons (``SPARK_DAEMON_JAVA_OPTS``)
DAEMON_JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

#: Log configuration for every JVM of the cluster and its drivers: INFO to stderr, as
#: Spark's default, which executors keep (their logs tell a test which tasks ran where);
#: drivers lower the root level (``setLogLevel``), but keep the scheduler's INFO lines
#: (lost tasks and executors, resubmitted stages), named here.
LOG4J2 = """\
rootLogger.level = info
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.dag.name = org.apache.spark.scheduler.DAGScheduler
logger.dag.level = info
logger.tsm.name = org.apache.spark.scheduler.TaskSetManager
logger.tsm.level = info
logger.tsi.name = org.apache.spark.scheduler.TaskSchedulerImpl
logger.tsi.level = info
logger.jetty.name = org.sparkproject.jetty
logger.jetty.level = warn
"""


def spark_home() -> Path:
    """SPARK_HOME of the installed PySpark (the package directory for a pip install)."""
    from pyspark.find_spark_home import _find_spark_home

    home = Path(_find_spark_home())
    if not (home / "bin" / "spark-class").exists():
        raise RuntimeError(f"no bin/spark-class under {home}")
    return home


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Signal ``proc``'s process group (it leads one: ``start_new_session``) and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL does not time out
        proc.wait(timeout=30)


@dataclass
class Worker:
    name: str
    port: int
    webui_port: int
    work_dir: Path
    log: Path
    proc: subprocess.Popen | None = None
    stale_logs: set[Path] = field(default_factory=set)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def executor_logs(self) -> list[Path]:
        """``stderr`` of the executors this worker ran since :meth:`forget_logs`
        (``work/<app>/<executor>/stderr``)."""
        return sorted(set(self.work_dir.glob("*/*/stderr")) - self.stale_logs)

    def forget_logs(self) -> None:
        """Ignore the executor logs there are now (earlier applications')."""
        self.stale_logs |= set(self.work_dir.glob("*/*/stderr"))

    def count(self, text: str) -> int:
        """Lines of its executors' logs containing ``text`` (executors log at INFO)."""
        total = 0
        for path in self.executor_logs():
            total += sum(text in line for line in _read(path).splitlines())
        return total

    def finished_tasks(self) -> int:
        return self.count("Executor: Finished task")

    def running_tasks(self) -> int:
        """Tasks started and not (yet) logged as finished or failed."""
        return (self.count("Executor: Running task") - self.finished_tasks()
                - self.count("Executor: Exception in task"))


@dataclass
class SparkCluster:
    """Master plus ``workers`` workers under ``root`` (see the module docstring)."""

    root: Path
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    daemon_memory: str = "256m"
    host: str = "127.0.0.1"
    master_port: int = 0
    webui_port: int = 0
    master_proc: subprocess.Popen | None = None
    nodes: list[Worker] = field(default_factory=list)

    # -- lifecycle ----------------------------------------------------------------------

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        self.home = spark_home()
        self.conf_dir = self.root / "conf"
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        (self.conf_dir / "spark-defaults.conf").write_text(
            "".join(f"{k} {v}\n" for k, v in SPARK_DEFAULTS.items()))
        (self.conf_dir / "log4j2.properties").write_text(LOG4J2)
        self.master_port = self.master_port or free_port()
        self.webui_port = self.webui_port or free_port()
        for i in range(self.workers):
            self.nodes.append(Worker(
                name=f"worker{i}", port=free_port(), webui_port=free_port(),
                work_dir=self.root / f"worker{i}" / "work", log=self.root / f"worker{i}.log"))

    @property
    def url(self) -> str:
        return f"spark://{self.host}:{self.master_port}"

    def __enter__(self) -> SparkCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({
            "SPARK_HOME": str(self.home),
            "SPARK_CONF_DIR": str(self.conf_dir),
            "SPARK_LOCAL_IP": self.host,
            "SPARK_LOCAL_HOSTNAME": self.host,
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            "SPARK_DAEMON_JAVA_OPTS": DAEMON_JAVA_OPTS,
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        })
        env.pop("SPARK_MASTER_HOST", None)
        env.pop("SPARK_WORKER_DIR", None)
        return env

    def _spawn(self, cls: str, args: list[str], log: Path) -> subprocess.Popen:
        with open(log, "ab") as out:
            return subprocess.Popen(
                [str(self.home / "bin" / "spark-class"), cls, *args],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=self._env(), cwd=self.root, start_new_session=True,
                preexec_fn=_die_with_parent)

    def start(self, timeout: float = 90) -> None:
        self.master_proc = self._spawn(
            "org.apache.spark.deploy.master.Master",
            ["--host", self.host, "--port", str(self.master_port),
             "--webui-port", str(self.webui_port)],
            self.root / "master.log")
        self._wait(lambda: self.state() is not None, timeout, "the master's web UI")
        for node in self.nodes:
            self.start_worker(node)
        self.wait_for_workers(len(self.nodes), timeout)

    def start_worker(self, node: Worker | int) -> Worker:
        node = self.nodes[node] if isinstance(node, int) else node
        if node.alive:
            return node
        node.work_dir.mkdir(parents=True, exist_ok=True)
        node.proc = self._spawn(
            "org.apache.spark.deploy.worker.Worker",
            ["--host", self.host, "--port", str(node.port), "--webui-port", str(node.webui_port),
             "--cores", str(self.cores), "--memory", self.memory,
             "--work-dir", str(node.work_dir), self.url],
            node.log)
        return node

    def kill_worker(self, node: Worker | int) -> Worker:
        """SIGKILL the worker's process group: worker, executors and their Python workers."""
        node = self.nodes[node] if isinstance(node, int) else node
        if node.proc is not None:
            kill_group(node.proc)
            # the master drops it as soon as its connection breaks
            self._wait(lambda: all(w.get("port") != node.port for w in self.alive_workers()),
                       30, f"the master to drop {node.name}")
        return node

    def restart_dead_workers(self, timeout: float = 90) -> None:
        for node in self.nodes:
            if not node.alive:
                self.start_worker(node)
        self.wait_for_workers(len(self.nodes), timeout)

    def stop(self) -> None:
        """Kill every process group still alive (workers first, then the master)."""
        for node in self.nodes:
            if node.proc is not None:
                kill_group(node.proc)
        if self.master_proc is not None:
            kill_group(self.master_proc)

    # -- the master's view --------------------------------------------------------------

    def state(self) -> dict | None:
        """The master's ``/json/`` (workers, apps), or ``None`` while it does not answer."""
        if self.master_proc is not None and self.master_proc.poll() is not None:
            raise RuntimeError(f"the master exited ({self.master_proc.returncode}); "
                               f"see {self.root / 'master.log'}")
        try:
            with urllib.request.urlopen(
                    f"http://{self.host}:{self.webui_port}/json/", timeout=5) as resp:
                return json.loads(resp.read())
        except (OSError, ValueError):
            return None

    def alive_workers(self) -> list[dict]:
        state = self.state() or {}
        return [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]

    def wait_for_workers(self, count: int, timeout: float = 90) -> None:
        """Until ``count`` workers are ALIVE at the master (dead ones are forgotten)."""
        self._wait(lambda: len(self.alive_workers()) >= count, timeout,
                   f"{count} workers to register")

    def active_apps(self) -> list[dict]:
        return (self.state() or {}).get("activeapps", [])

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            for node in self.nodes:
                if node.proc is not None and node.proc.poll() is not None and (
                        node.proc.returncode != -signal.SIGKILL):
                    raise RuntimeError(f"{node.name} exited ({node.proc.returncode}); "
                                       f"see {node.log}:\n{_tail(node.log)}")
            time.sleep(0.25)
        raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}; logs in "
                           f"{self.root}:\n{_tail(self.root / 'master.log')}")

    # -- drivers ------------------------------------------------------------------------

    def driver_env(self, driver_memory: str = "1g") -> dict[str, str]:
        """Environment for a driver process (``graphcep run|stream --master URL``)."""
        env = self._env()
        env["GRAPHCEP_DRIVER_MEMORY"] = driver_memory
        return env

    def logs(self) -> str:
        """The tails of every daemon and executor log (for assertion messages)."""
        parts = [f"== master ==\n{_tail(self.root / 'master.log')}"]
        for node in self.nodes:
            parts.append(f"== {node.name} ==\n{_tail(node.log)}")
            for path in node.executor_logs():
                parts.append(f"== {path} ==\n{_tail(path)}")
        return "\n".join(parts)


def _die_with_parent() -> None:
    """In the child before ``exec``: be SIGKILLed if the test process dies (Linux only), so
    not even a killed pytest leaves daemons behind. Executors follow their worker."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _tail(path: Path, lines: int = 30) -> str:
    return "\n".join(_read(path).splitlines()[-lines:]) or "(no log)"
