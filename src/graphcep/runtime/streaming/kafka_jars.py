"""Where graphcep gets Spark's Kafka connector and a Kafka broker.

Spark reads Kafka through its own connector, ``spark-sql-kafka-0-10``, which PySpark does
not ship. A Spark user gets it with ``spark.jars.packages`` (Spark resolves the Maven
coordinates and downloads the jars when the session starts); graphcep does the same when
no directory of jars is given (:func:`connector_packages`). Offline, a directory of jars
(``--kafka-jars DIR`` or ``GRAPHCEP_KAFKA_JARS``) goes on ``spark.jars`` instead
(:func:`connector_jars`).

This module also fills such a directory: ``python3 src/graphcep/runtime/streaming/kafka_jars.py
[CACHE]`` runs Maven's ``dependency:copy-dependencies`` on two small generated POMs, one
for the connector (with the dependencies Spark does not ship) and one for an
Apache Kafka broker (KRaft) that the tests start. It imports nothing but the standard
library, so it runs before graphcep is installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SCALA_BINARY = "2.13"
# The connector of the PySpark graphcep pins (pyproject.toml; a test checks they agree):
# the newest release whose connector Maven Central serves (4.3.0's is not served).
CONNECTOR_VERSION = "4.2.0"
CONNECTOR_ARTIFACT = f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY}:{CONNECTOR_VERSION}"
BROKER_VERSION = "4.1.1"
BROKER_ARTIFACT = f"org.apache.kafka:kafka_{SCALA_BINARY}:{BROKER_VERSION}"
#: The connector's own classpath: its other dependencies (compression codecs, slf4j,
#: Scala's collections) are Spark's, in the versions PySpark ships; two versions of one
#: library on Spark's classpath would be a conflict waiting to happen.
CONNECTOR_CLASSPATH = (f"spark-sql-kafka-0-10_{SCALA_BINARY}",
                       f"spark-token-provider-kafka-0-10_{SCALA_BINARY}", "kafka-clients",
                       "commons-pool2")
JARS_ENV = "GRAPHCEP_KAFKA_JARS"
CONNECTOR_CLASS_JAR = re.compile(r"^spark-sql-kafka-0-10_.*\.jar$")


def cache_root() -> Path:
    """The default folder for the jars: ``$XDG_CACHE_HOME/graphcep/kafka`` (``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "graphcep" / "kafka"


def connector_dir(root: Path | None = None) -> Path:
    """The folder the fetch fills with the connector and its dependencies."""
    return (root or cache_root()) / f"connector-{CONNECTOR_VERSION}"


def broker_dir(root: Path | None = None) -> Path:
    """The folder the fetch fills with the broker's classpath."""
    return (root or cache_root()) / f"broker-{BROKER_VERSION}"


def connector_jars(directory: str | Path) -> list[Path]:
    """The jars of a connector folder; ``ValueError`` (one line) when it has no connector.

    Parameters
    ----------
    directory : str or Path
        A folder holding ``spark-sql-kafka-0-10_*.jar`` and its dependencies.
    """
    folder = Path(directory)
    if not folder.is_dir():
        raise ValueError(f"Kafka jars: {folder} is not a directory")
    jars = sorted(folder.glob("*.jar"))
    if not any(CONNECTOR_CLASS_JAR.match(jar.name) for jar in jars):
        raise ValueError(
            f"Kafka jars: {folder} holds no spark-sql-kafka-0-10 jar "
            f"(fill it with: python3 -m graphcep.runtime.streaming.kafka_jars {folder.parent})"
        )
    return jars


def connector_packages() -> str:
    """The ``spark.jars.packages`` value that makes Spark download the connector."""
    return CONNECTOR_ARTIFACT


def jars_dir_from_env() -> str | None:
    """The folder ``GRAPHCEP_KAFKA_JARS`` names, or None when it is unset or empty."""
    value = os.environ.get(JARS_ENV, "").strip()
    return value or None


def _pom(artifact: str) -> str:
    group, name, version = artifact.split(":")
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>graphcep.local</groupId>
  <artifactId>kafka-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>{group}</groupId>
      <artifactId>{name}</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""


def _copy_dependencies(artifact: str, target: Path, only: tuple[str, ...] = ()) -> None:
    """Run Maven to copy ``artifact`` and its runtime dependencies (``only`` those
    artifacts, when given) into ``target``."""
    with tempfile.TemporaryDirectory() as work:
        pom = Path(work) / "pom.xml"
        pom.write_text(_pom(artifact))
        staging = Path(work) / "jars"
        command = [
            "mvn", "-q", "-B", "-f", str(pom),
            "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies",
            f"-DoutputDirectory={staging}", "-DincludeScope=runtime",
        ]  # fmt: skip
        if only:
            command.append(f"-DincludeArtifactIds={','.join(only)}")
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:  # Maven's [ERROR] lines say why
            output = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout).splitlines()  # no colours
            errors = [line.strip() for line in output if line.startswith("[ERROR] ")]
            raise OSError(f"mvn failed for {artifact}: "
                          + " ".join(errors[:1] or output[-3:]))
        # a folder is complete or absent: a fetch cut short leaves nothing half-filled
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staging), str(target))


def fetch(root: Path | None = None) -> tuple[Path, Path]:
    """Fill the connector and broker folders under ``root`` (skip those already filled).

    Returns
    -------
    (connector folder, broker folder)
    """
    connector, broker = connector_dir(root), broker_dir(root)
    if not any(connector.glob("spark-sql-kafka-0-10_*.jar")):
        _copy_dependencies(CONNECTOR_ARTIFACT, connector, CONNECTOR_CLASSPATH)
    if not any(broker.glob("kafka_*.jar")):
        _copy_dependencies(BROKER_ARTIFACT, broker)
    return connector, broker


def main(argv: list[str]) -> int:
    """``kafka_jars.py [CACHE]``: fetch the jars; print the two folders."""
    root = Path(argv[0]) if argv else None
    try:
        connector, broker = fetch(root)
    except OSError as exc:  # Maven missing, or what it said
        print(f"Kafka jars could not be fetched: {exc}", file=sys.stderr)
        return 1
    print(f"connector: {connector}\nbroker: {broker}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
