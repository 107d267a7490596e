"""The SparkSession graphcep runs on: Java present, embedded ``local[*]`` by default, exact column names.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from graphcep.cores import usable_cores
from graphcep.interrupts import honour, interrupt_deferred, jvm_stderr_relay
from graphcep.runtime.spark_start import (
    JavaMissingError,
    SparkStartError,
    check_java,
    check_master,
)

__all__ = ["JavaMissingError", "SparkStartError", "check_column_names", "check_java",
           "spark_session"]


def spark_session(master: str = "local[*]", app_name: str = "graphcep",
                  shuffle_partitions: int | None = None, conf: dict[str, str] | None = None):
    """The shared SparkSession: UI off, Arrow on, few shuffle partitions by default;
    ``conf`` adds settings that must be there when the JVM starts (``spark.jars`` or
    ``spark.jars.packages`` for a source's connector).

    Raises :class:`SparkStartError` (one line: why, and what to do) when Java is missing,
    a standalone master does not answer, or the JVM refuses the settings (a master URL it
    cannot parse)."""
    check_java()
    check_master(master)
    import sys

    from pyspark.sql import SparkSession

    # Python workers must run the interpreter graphcep is installed in, not "python3"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    cores = max(2, usable_cores())
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions or max(2, cores)))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "200000")
        .config("spark.driver.memory", os.environ.get("GRAPHCEP_DRIVER_MEMORY", "4g"))
        .config("spark.sql.session.timeZone", "UTC")
        # column names are exact, as in Arrow, Parquet and graphcep's local runs: a netflow
        # table may hold an export's numeric `Label` next to the string edge `label`
        .config("spark.sql.caseSensitive", "true")
    )
    settings = {**_quiet_log(), **(conf or {})}
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        with interrupt_deferred() as caught:
            session = _started_off_main_thread(builder)
    except Exception as err:  # the JVM's reason, without its stack trace
        raise SparkStartError(f"Spark did not start with --master {master}: "
                              f"{java_reason(err)}") from None
    if caught:  # Ctrl-C while the JVM started: stop it rather than leave it running
        session.stop()
        honour(caught)
    session.sparkContext.setLogLevel("ERROR")
    return session


#: where the driver's Java options go: the administrators' option, which Spark puts
#: before ``spark.driver.extraJavaOptions`` (a user's own stay as they are)
_JAVA_OPTIONS = "spark.driver.defaultJavaOptions"


def _quiet_log() -> dict[str, str]:
    """The JVM's log at errors only from its start (``log4j2.properties`` beside this
    module), unless Spark's conf directory configures it: a ``log4j2.properties`` there,
    or a ``spark-defaults.conf`` that sets :data:`_JAVA_OPTIONS` (kept as it is)."""
    from pathlib import Path

    conf_dir = os.environ.get("SPARK_CONF_DIR") or (
        os.path.join(os.environ["SPARK_HOME"], "conf") if "SPARK_HOME" in os.environ else None)
    if conf_dir:
        defaults = Path(conf_dir, "spark-defaults.conf")
        if Path(conf_dir, "log4j2.properties").exists() or (
                defaults.exists() and _JAVA_OPTIONS in defaults.read_text(errors="replace")):
            return {}
    profile = Path(__file__).with_name("log4j2.properties")
    return {_JAVA_OPTIONS: f"-Dlog4j2.configurationFile={profile.as_uri()}"}


def _get_or_create(builder):
    """``builder.getOrCreate()``, the JVM (when this starts it) writing its stderr through
    :func:`~graphcep.interrupts.jvm_stderr_relay`: nothing it writes comes after an
    interrupted command's one line."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is None:
        conf = SparkConf()
        for key, value in builder._options.items():  # the JVM's own (driver memory) too
            conf.set(key, str(value))
        write = jvm_stderr_relay()
        try:
            gateway = launch_gateway(conf, popen_kwargs={"stderr": write})
        finally:
            os.close(write)
        SparkContext._ensure_initialized(gateway=gateway)
    return builder.getOrCreate()


def _started_off_main_thread(builder):
    """``builder.getOrCreate()`` in a thread of its own, the main thread waiting for it.

    A SparkContext made in the main thread sets a SIGINT handler that cancels the jobs
    through py4j and raises ``KeyboardInterrupt`` in the middle of whatever py4j call the
    main thread is in: four tracebacks (py4j's own logging among them) before graphcep's
    line. Made elsewhere, it sets none, and Ctrl-C stays the command's (held back here by
    :func:`~graphcep.interrupts.interrupt_deferred`, then ``exit_on_interrupt``'s).
    """
    with ThreadPoolExecutor(1, thread_name_prefix="spark-start") as pool:
        session = pool.submit(_get_or_create, builder).result()
    # the JVM keeps the active session per thread: make it this thread's, as it would be
    # had it started here (``SparkSession.getActiveSession()``)
    session._jvm.SparkSession.setActiveSession(session._jsparkSession)
    return session


def java_reason(err: BaseException) -> str:
    """The message of the Java exception behind a Py4J error (``Could not parse Master
    URL: 'x'``), else the error's first line."""
    lines = str(err).splitlines() or [type(err).__name__]
    for line in lines:
        if "Exception: " in line:
            return line.split("Exception: ", 1)[1].strip()
    return lines[0].strip()


def check_column_names(spark, columns: list[str]) -> None:
    """Refuse, with the names and the fix, columns that differ only in case when the session
    compares names ignoring case (Spark's default): every reference to either would be
    ambiguous. :func:`spark_session` makes names exact."""
    if spark.conf.get("spark.sql.caseSensitive", "false").lower() == "true":
        return
    seen: dict[str, str] = {}
    for name in columns:
        other = seen.setdefault(name.lower(), name)
        if other != name:
            raise ValueError(
                f"columns {other!r} and {name!r} differ only in case, and this Spark session "
                f"compares column names ignoring case; set spark.sql.caseSensitive=true "
                f"(graphcep's spark_session does) or rename one of them"
            )
