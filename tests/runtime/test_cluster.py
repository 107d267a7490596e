"""``graphcep run`` and ``graphcep stream`` on a real Spark standalone cluster, with a worker
killed while they run.

The cluster (:mod:`tests.cluster`, one per module): a standalone master and two workers
started from the installed PySpark (``<SPARK_HOME>/bin/spark-class
org.apache.spark.deploy.master.Master`` / ``...worker.Worker``) as subprocesses bound to
127.0.0.1 on free ports (``SPARK_LOCAL_IP=127.0.0.1``), each worker with ``--cores 1
--memory 1g`` and its own work directory under the test's temporary directory. The fixture
waits until the master's JSON endpoint (``http://127.0.0.1:<webui>/json/``) lists both
workers ALIVE. Every daemon leads its own process group; a worker's executor and the
executor's Python workers live in that group, so killing a worker (``SIGKILL`` to the group)
takes down the whole "node" -- its running tasks, cached blocks and shuffle files. Workers
killed by a test are restarted before the next one; at the end of the module every group
is killed, whether or not a test failed. Drivers are ``python -m graphcep.cli``
subprocesses with ``--master spark://127.0.0.1:<port>``, the same interpreter for the
executors' Python (``PYSPARK_PYTHON``; graphcep is installed in the venv, so executors import
it), and ``SPARK_CONF_DIR`` pointing at the cluster's ``spark-defaults.conf``
(:data:`tests.cluster.SPARK_DEFAULTS`: 512 MiB executors, C1-only JIT and serial GC for
the short-lived JVMs -- which halves start-up on a loaded 2-core machine -- and short
shuffle-fetch retries) and ``log4j2.properties`` (executors at INFO; the driver's scheduler
at INFO, so its lines about the lost executor and re-run tasks are in ``driver.err``).

When to kill: executors log at INFO into ``<work>/<app>/<executor>/stderr``; the test polls
those logs and kills the first worker that is running a task at the chosen point:

* batch (``graphcep run --shards 4``): the first worker whose executor starts its second
  Python task -- a time-shard replay task, after the parse task whose output is cached on
  that executor -- is killed mid-task. Spark loses that task, the cached parse partition
  and the shuffle files on that node, and recomputes them on the surviving worker
  (fetch failure, stage resubmission).
* streaming (``graphcep stream --once --max-files-per-trigger 1 --matching driver`` over
  several files):
  the first worker that runs a file-reading task after having finished one is killed
  mid-task. The matching operator runs in the driver (``foreachBatch``), so what the kill
  exercises is the executors' part -- reading the micro-batch's files -- and Spark
  re-running that task on the surviving worker inside the same micro-batch.
* streaming with the matching in the executors (``--matching auto`` on the cluster
  master, ``--cells 8``): once a micro-batch's part is written, the first worker running a
  task is killed -- a routing or cell task, with cells' state held by its state store.
  Spark re-runs the lost tasks on the survivor, whose state store loads the cells' state
  from the checkpoint.

What is checked, both times: the driver exits 0; the kill happened while it was running;
the driver's scheduler reported the lost executor, and the surviving worker ran tasks
after the kill (when a task was lost with the node); the matches written (``-o out.jsonl``; ``--output OUT/`` part files) equal the
in-process oracle (``read_edges`` + ``run_local``) exactly: the same set of
``(match_id, edge seqs)``, with no duplicates. ``pytest -s`` prints when the worker was
killed and the driver's recovery lines (lost task, shuffle files lost, resubmitted stages).
All workers run on one host, so Spark drops every shuffle output registered on 127.0.0.1
when one of them is lost ("Shuffle files lost for host") and recomputes the survivor's too.

The cluster fixture skips the module, with the reason, where a standalone cluster cannot
start. Run time: about 2 minutes for the first two (cluster start ~15 s) on the 2-core test machine under
load; up to ~3 minutes when it is heavily shared.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graphcep.io.generator import generate_netflow, write_edges
from graphcep.io.readers import read_edges
from graphcep.jobs.subgraph import SubgraphJob
from graphcep.lang.sal import parse_file
from graphcep.runtime.local import run_local
from tests.cluster import SparkCluster, Worker, kill_group
from tests.paths import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.spark]

QUERY = ROOT / "examples" / "triangle.sal"
#: longest a driver may run before the test gives up on it
DRIVER_TIMEOUT = 240
#: what the driver's scheduler logs about a lost node and the work it redoes
RECOVERY_LINES = ("Lost executor", "its executor exited", "Lost task", "Resubmitting",
                  "Shuffle files lost")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    try:
        running = SparkCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2).__enter__()
    except Exception as err:  # no Java, no free ports, a daemon that will not come up
        pytest.skip(f"a standalone Spark cluster cannot start on this machine: {err}")
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def fresh_cluster(cluster):
    """The module's cluster with both workers alive (a previous test may have killed one)."""
    cluster.restart_dead_workers()
    yield cluster


# -- oracle and outputs -------------------------------------------------------------------


def oracle(inputs: Path) -> set[tuple[str, tuple[int, ...]]]:
    read = read_edges(inputs, "vast")
    job = SubgraphJob.create(parse_file(QUERY), fmt="vast")
    matches, _ = run_local(job.query, read.edges)
    return set(zip(matches.column("match_id").to_pylist(),
                   (tuple(e["seq"] for e in m) for m in matches.column("edges").to_pylist()),
                   strict=True))


def match_keys(paths: list[Path]) -> list[tuple[str, tuple[int, ...]]]:
    keys = []
    for path in paths:
        for line in path.read_text().splitlines():
            row = json.loads(line)
            keys.append((row["match_id"], tuple(e["seq"] for e in row["edges"])))
    return keys


# -- driving a driver ---------------------------------------------------------------------


def python_tasks_started(node: Worker) -> int:
    """Python (``mapInArrow``) tasks this worker's executors have started."""
    return node.count("Starting Python task execution")


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def run_and_kill(cluster: SparkCluster, args: list[str], workdir: Path, should_kill,
                 what: str) -> dict:
    """Run ``python -m graphcep.cli ARGS`` against the cluster; SIGKILL the first worker for
    which ``should_kill(worker)`` holds while the driver runs. Returns what happened."""
    out, err = workdir / "driver.out", workdir / "driver.err"
    for node in cluster.nodes:
        node.forget_logs()  # earlier applications' executors
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        driver = subprocess.Popen([sys.executable, "-m", "graphcep.cli", *args],
                                  stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                                  env=cluster.driver_env(), cwd=workdir,
                                  start_new_session=True)
    started = time.monotonic()
    victim = None
    try:
        while driver.poll() is None:
            if time.monotonic() - started > DRIVER_TIMEOUT:
                pytest.fail(f"driver still running after {DRIVER_TIMEOUT} s\n{cluster.logs()}")
            if victim is None:
                victim = next((n for n in cluster.nodes if n.alive and should_kill(n)), None)
                if victim is not None:
                    cluster.kill_worker(victim)
                    killed_at = time.monotonic() - started
                    survivor_done = {n.name: n.finished_tasks() for n in cluster.nodes}
            time.sleep(0.05)
    finally:
        if driver.poll() is None:
            kill_group(driver)
    seconds = time.monotonic() - started
    log = f"\n== driver stderr ==\n{_read(err)[-4000:]}\n{cluster.logs()}"
    assert driver.returncode == 0, f"driver exited {driver.returncode}{log}"
    assert victim is not None, f"no worker was killed during the {what} run{log}"
    survivors = [n for n in cluster.nodes if n is not victim]
    after = sum(n.finished_tasks() - survivor_done[n.name] for n in survivors)
    driver_log = _read(err)
    assert "Lost executor" in driver_log, f"the driver did not notice the lost executor{log}"
    lost = driver_log.count("its executor exited") + driver_log.count("Lost task")
    # a task lost with the node must have been run again by the survivor (a task that
    # finished a moment before the kill, the last of its run, leaves nothing to redo)
    assert after > 0 or lost == 0, f"no task finished on the surviving worker after the kill{log}"
    recovery = [line for line in driver_log.splitlines()
                if any(k in line for k in RECOVERY_LINES)]
    print(f"{what}: killed {victim.name} at {killed_at:.1f} s of {seconds:.1f} s; "
          f"{after} tasks finished on the survivor after that; driver:\n  "
          + "\n  ".join(line[:200] for line in recovery))
    return {"victim": victim.name, "killed_at": killed_at, "seconds": seconds,
            "tasks_after_kill": after, "stdout": _read(out), "recovery": recovery}


# -- tests --------------------------------------------------------------------------------


def test_batch_run_survives_a_killed_worker(fresh_cluster, tmp_path):
    flows = tmp_path / "flows.csv"
    write_edges(generate_netflow(100_000, 500, 1_000, seed=11), flows, "vast")
    expected = oracle(flows)
    assert len(expected) > 1_000

    def mid_replay(node: Worker) -> bool:  # running its second Python task: a shard replay
        return python_tasks_started(node) >= 2 and node.running_tasks() > 0

    result = run_and_kill(
        fresh_cluster,
        ["run", str(QUERY), "--input", str(flows), "--master", fresh_cluster.url,
         "--shards", "4", "--summary", "json", "-o", str(tmp_path / "out.jsonl"),
         "--rejects", str(tmp_path / "rejects.jsonl")],
        tmp_path, mid_replay, "batch")
    summary = json.loads(result["stdout"].strip().splitlines()[-1])
    assert summary["strategy"] == "shuffle" and summary["shards"] == 4
    got = match_keys([tmp_path / "out.jsonl"])
    assert len(got) == len(set(got)), "duplicate matches"
    assert set(got) == expected
    assert summary["matches"] == len(expected)


def arrived_parts(table, tmp_path: Path, parts: int = 5) -> Path:
    """``table`` in ``parts`` VAST files moved whole into ``tmp_path/in``, their
    modification times one second apart in name order (the order Spark lists them in)."""
    incoming = tmp_path / "in"
    incoming.mkdir()
    step = -(-table.num_rows // parts)
    for i in range(parts):
        staged, target = tmp_path / f".flows-{i}.csv", incoming / f"flows-{i:02d}.csv"
        write_edges(table.slice(i * step, step), staged, "vast")
        os.replace(staged, target)
        os.utime(target, (1_700_000_000 + i, 1_700_000_000 + i))
    return incoming


def test_stream_once_survives_a_killed_worker(fresh_cluster, tmp_path):
    table = generate_netflow(50_000, 300, 1_000, seed=12)
    parts = 5
    incoming = arrived_parts(table, tmp_path, parts)
    expected = oracle(incoming)
    assert len(expected) > 500

    def mid_read(node: Worker) -> bool:  # reading a file, having read one before
        return node.finished_tasks() >= 1 and node.running_tasks() > 0

    out = tmp_path / "out"
    result = run_and_kill(
        fresh_cluster,
        ["stream", str(QUERY), "--source", str(incoming), "--format", "vast",
         "--checkpoint", str(tmp_path / "ckpt"), "--output", f"{out}/", "--once",
         "--max-files-per-trigger", "1", "--master", fresh_cluster.url, "--quiet",
         "--summary", "json", "--matching", "driver"],
        tmp_path, mid_read, "streaming")
    summary = json.loads(result["stdout"].strip().splitlines()[-1])
    assert summary["edges"] == table.num_rows and summary["batches"] >= parts
    got = match_keys(sorted(out.glob("part-*.jsonl")))
    assert len(got) == len(set(got)), "duplicate matches"
    assert set(got) == expected


def test_executor_stream_survives_a_killed_worker(fresh_cluster, tmp_path):
    """The matching in the executors (``--matching auto`` on a cluster master): eight
    cells, their state in Spark's state store; the first worker running a task after a
    micro-batch was written is killed, Spark re-runs its tasks on the survivor from the
    checkpointed state, and every match is written exactly once."""
    table = generate_netflow(20_000, 200, 1_000, seed=13)
    incoming = arrived_parts(table, tmp_path)
    expected = oracle(incoming)
    assert len(expected) > 100
    out = tmp_path / "out"

    def mid_stream(node: Worker) -> bool:  # a micro-batch written, a task running
        return any(out.glob("part-*.jsonl")) and node.running_tasks() > 0

    result = run_and_kill(
        fresh_cluster,
        ["stream", str(QUERY), "--source", str(incoming), "--format", "vast",
         "--checkpoint", str(tmp_path / "ckpt"), "--output", f"{out}/", "--once",
         "--max-files-per-trigger", "1", "--master", fresh_cluster.url, "--cells", "8",
         "--quiet", "--summary", "json"],
        tmp_path, mid_stream, "executor-mode streaming")
    summary = json.loads(result["stdout"].strip().splitlines()[-1])
    assert summary["matching"].startswith("executors, 8 cells")
    assert summary["edges"] == table.num_rows and summary["late"] == 0
    got = match_keys(sorted(out.glob("part-*.jsonl")))
    assert len(got) == len(set(got)), "duplicate matches"
    assert set(got) == expected
    assert summary["matches"] == len(expected)
