"""What must hold before a SparkSession starts, checked without starting one: a Java
runtime, and for a standalone cluster (``spark://host:port``) a master that answers.

Kept apart from :mod:`graphcep.runtime.spark` (which imports PySpark) so that the command
line can name these errors without loading Spark.
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

#: Seconds to wait for a standalone master's port before calling it unreachable.
CONNECT_TIMEOUT_S = 5.0


class SparkStartError(RuntimeError):
    """Spark cannot start as asked: the message is one line saying why and what to do."""


class JavaMissingError(SparkStartError):
    pass


def check_java() -> None:
    """Fail with one clear line when no Java runtime is available for Spark."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and Path(java_home, "bin", "java").exists():
        return
    if shutil.which("java"):
        return
    raise JavaMissingError(
        "Spark needs Java 17 or newer and none was found: install it (e.g. "
        "'apt-get install openjdk-17-jre-headless') or set JAVA_HOME; "
        "'--engine local' runs without Spark."
    )


def standalone_masters(master: str) -> list[tuple[str, int]]:
    """The ``(host, port)`` of each master a ``spark://`` URL names (several for a
    highly available cluster, ``spark://h1:7077,h2:7077``); none for other masters.

    >>> standalone_masters("spark://a:7077,b"), standalone_masters("local[*]")
    ([('a', 7077), ('b', 7077)], [])
    """
    if not master.startswith("spark://"):
        return []
    found = []
    for part in master[len("spark://"):].split(","):
        host, _, port = part.strip().rpartition(":") if ":" in part else (part, "", "7077")
        found.append((host.strip("[]"), int(port) if port.isdigit() else 7077))
    return found


def check_master(master: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """A standalone master must accept a connection before Spark is started against it:
    Spark itself retries an absent one for about a minute, then fails with a Java stack
    trace. Other masters (``local``, ``yarn``, ``k8s://``) are not probed."""
    masters = standalone_masters(master)
    reasons = []
    for host, port in masters:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return
        except OSError as err:
            reasons.append(f"{host}:{port}: {err.strerror or err}")
    if masters:
        raise SparkStartError(
            f"--master {master}: no Spark master answers ({'; '.join(reasons)}); start it, "
            "or leave --master out to run on this machine's cores (local[*])")
