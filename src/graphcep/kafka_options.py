"""``graphcep stream``'s Kafka options: ``--source kafka://BROKERS/TOPICS`` and the
options that shape it (:mod:`graphcep.runtime.kafka_source` is the source itself).

Every value is checked, and the broker's address tried, before Spark starts: a wrong one
is one line and status 2 within seconds, not a Spark session waiting for a broker.
"""

from __future__ import annotations

import argparse
from typing import Any

from graphcep.io.formats import ReaderOptions
from graphcep.patterns.subgraph import QueryError

#: The Kafka options and the value each has when not given.
KAFKA_DEFAULTS = {"starting_offsets": "earliest", "kafka_option": None, "kafka_jars": None,
                  "time": "field"}


def add_kafka_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the Kafka source's options on ``graphcep stream``."""
    from graphcep.cli_options import path_option

    parser.add_argument("--starting-offsets", default="earliest", metavar="WHERE",
                        help="kafka: where a new stream starts reading: earliest "
                             "(default), latest, or an ISO-8601 time (the first record "
                             "at or after it); a restart resumes from its checkpoint")
    parser.add_argument("--kafka-option", action="append", metavar="KEY=VALUE",
                        help="kafka: a reader option passed to Spark's Kafka source as "
                             "given, e.g. kafka.security.protocol=SSL or "
                             "failOnDataLoss=false (repeatable)")
    parser.add_argument("--kafka-jars", type=path_option, metavar="DIR",
                        help="kafka: a directory of Spark's Kafka connector and its "
                             "dependencies (default: $GRAPHCEP_KAFKA_JARS, else the "
                             "fetched cache, else Spark downloads them from Maven Central)")
    parser.add_argument("--time", choices=("field", "kafka"), default="field",
                        help="kafka: an edge's time is its line's time field (default) or "
                             "its record's Kafka timestamp")


def refuse_kafka_options(args: argparse.Namespace, source: str) -> None:
    """A Kafka option given with another source is refused, naming it."""
    given = [f"--{name.replace('_', '-')}" for name, default in KAFKA_DEFAULTS.items()
             if getattr(args, name, default) != default]
    if given:
        verb = "shapes" if len(given) == 1 else "shape"
        raise QueryError(f"{', '.join(given)} {verb} a Kafka source (--source "
                         f"kafka://BROKERS/TOPICS), not --source {source}")


def refuse_kafka_targets(args: argparse.Namespace) -> None:
    """``--output``, ``--late`` or ``--rejects kafka://...`` is refused in one line: they
    are directories (or the console), and a name such as ``kafka://b/t`` would otherwise
    be made a local directory ``kafka:/b/t``."""
    for role in ("output", "late", "rejects"):
        target = getattr(args, role, None)
        if isinstance(target, str) and target.startswith("kafka://"):
            raise QueryError(f"--{role} {target}: the stream writes to the console or a "
                             "directory; Kafka is a source only (--source kafka://...)")


def kafka_source(args: argparse.Namespace, text: str, options: ReaderOptions,
                 max_records: int) -> Any:
    """The Kafka source ``--source kafka://...`` names, its broker reached; a micro-batch
    takes at most ``max_records`` records over all partitions (``--max-records-per-batch``,
    Spark's ``maxOffsetsPerTrigger``)."""
    from graphcep.runtime.kafka_source import (
        KAFKA_FORMATS,
        KafkaSource,
        jars_for,
        kafka_options,
        parse_kafka_uri,
        starting_offsets,
    )

    brokers, topics = parse_kafka_uri(text)
    if getattr(args, "max_files_per_trigger", None) is not None:
        raise QueryError("--max-files-per-trigger counts the files of a directory source; "
                         "a Kafka source's micro-batches are cut by --max-records-per-batch")
    fmt = args.format or "jsonl"
    if fmt not in KAFKA_FORMATS:
        raise QueryError(f"--format {fmt}: a Kafka record holds lines of "
                         f"{', '.join(KAFKA_FORMATS)}")
    source = KafkaSource(brokers, topics, fmt, options,
                         starting=starting_offsets(args.starting_offsets),
                         max_records_per_batch=max_records,
                         extra=kafka_options(args.kafka_option),
                         time_from_kafka=args.time == "kafka",
                         jars_dir=jars_for(args.kafka_jars))
    source.spark_conf()  # a --kafka-jars folder without the connector: refused now
    source.check_reachable()
    return source


def has_end(source: Any) -> bool:
    """Whether ``--once`` can read ``source`` to an end (the offsets it holds now)."""
    from graphcep.runtime.kafka_source import KafkaSource

    return isinstance(source, KafkaSource)


def spark_conf(source: Any) -> dict[str, str]:
    """Settings the Spark session needs from its start for ``source`` (its connector)."""
    conf = getattr(source, "spark_conf", None)
    return conf() if conf is not None else {}
