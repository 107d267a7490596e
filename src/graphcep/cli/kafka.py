"""``graphcep stream``'s Kafka options: ``--source kafka://BROKERS/TOPICS`` and the
options that shape it (:mod:`graphcep.runtime.streaming.kafka_source` is the source itself).

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
                  "time": "field", "on_data_loss": "fail"}


def add_kafka_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the Kafka source's options on ``graphcep stream``."""
    from graphcep.cli.options import path_option, positive_seconds

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
    parser.add_argument("--on-data-loss", choices=("fail", "report"), default="fail",
                        help="kafka: records deleted (retention) before the stream read "
                             "them stop it, in one line naming them (fail, default), or "
                             "are reported, a line and a summary entry, and the stream "
                             "goes on (report)")
    parser.add_argument("--broker-wait", type=positive_seconds, metavar="SECONDS",
                        help="kafka source or output: how long a micro-batch waits for "
                             "brokers that stopped answering (a Kafka output's "
                             "transaction, a Kafka source's reads) before the stream "
                             "stops (one line, exit 1; a restart runs the batch once); "
                             "default 60; a --kafka-option setting one of the source's "
                             "timeouts wins over it")
    parser.add_argument("--time", choices=("field", "kafka"), default="field",
                        help="kafka: an edge's time is its line's time field (default) or "
                             "its record's Kafka timestamp")


def refuse_kafka_options(args: argparse.Namespace, source: str) -> None:
    """A Kafka option given with another source is refused, naming it -- but the security
    settings among ``--kafka-option`` pairs when a Kafka output or a rules control topic
    takes them."""
    given = [f"--{name.replace('_', '-')}" for name, default in KAFKA_DEFAULTS.items()
             if getattr(args, name, default) != default
             and not (name == "kafka_option" and _security_only(args))]
    if given:
        verb = "shapes" if len(given) == 1 else "shape"
        raise QueryError(f"{', '.join(given)} {verb} a Kafka source (--source "
                         f"kafka://BROKERS/TOPICS), not --source {source}")


def _security_only(args: argparse.Namespace) -> bool:
    """Whether every ``--kafka-option`` pair is a security setting and a Kafka client is
    there to take them: a Kafka output's, or the rules control topic's
    (``--rules kafka://BROKER/TOPIC``)."""
    from graphcep.runtime.streaming.kafka_client import SECURITY_KEYS
    from graphcep.runtime.streaming.kafka_sink import kafka_targets_of
    from graphcep.runtime.streaming.rules_topic import is_control_topic

    control = is_control_topic(getattr(args, "rules", None))
    return (control or bool(kafka_targets_of(args))) and all(
        pair.startswith(tuple(f"kafka.{key}" for key in SECURITY_KEYS))
        for pair in args.kafka_option or [])


def check_kafka_targets(args: argparse.Namespace) -> dict[str, str]:
    """``--output``, ``--late`` and ``--rejects kafka://BROKER/TOPIC`` checked before Spark
    starts (one topic each, one cluster, a broker answering; see
    :mod:`graphcep.runtime.streaming.kafka_sink`); role -> text of those that name Kafka."""
    from graphcep.runtime.streaming.kafka_client import (
        check_client_settings,
        check_reachable,
        client_settings,
        confluent,
    )
    from graphcep.runtime.streaming.kafka_sink import (
        bootstrap_brokers,
        kafka_targets_of,
        parse_targets,
    )
    from graphcep.runtime.streaming.kafka_source import kafka_options

    targets = kafka_targets_of(args)
    kafka_in = (getattr(args, "source", None) or "").startswith("kafka://")
    if getattr(args, "broker_wait", None) is not None and not (targets or kafka_in):
        raise QueryError("--broker-wait sets how long a Kafka source (--source "
                         "kafka://BROKERS/TOPICS) or output (--output, --late or --rejects "
                         "kafka://BROKER/TOPIC) waits for its brokers: there is none")
    if targets:
        confluent()
        bootstrap, _ = parse_targets(targets)
        check_client_settings(client_settings(kafka_options(args.kafka_option)))
        check_reachable(bootstrap_brokers(bootstrap), f"kafka://{bootstrap}")
    return targets


def kafka_transactions(args: argparse.Namespace, checkpoint: Any, query: str) -> Any:
    """The started Kafka transactions of the stream's ``kafka://`` outputs (None: none)."""
    from graphcep.runtime.streaming.kafka_client import client_settings
    from graphcep.runtime.streaming.kafka_sink import (
        BROKER_WAIT_S,
        KafkaTransactions,
        kafka_targets_of,
        parse_targets,
        transactional_id,
    )
    from graphcep.runtime.streaming.kafka_source import kafka_options

    targets = kafka_targets_of(args)
    if not targets:
        return None
    bootstrap, topics = parse_targets(targets)
    transactions = KafkaTransactions(bootstrap, topics, transactional_id(checkpoint, query),
                                     query, client_settings(kafka_options(args.kafka_option)),
                                     getattr(args, "broker_wait", None) or BROKER_WAIT_S)
    transactions.start()
    return transactions


def part_writer(role: str, target: Any, transactions: Any) -> Any:
    """Where ``role``'s rows (``late``, ``rejects``) go: its Kafka topic, or a directory of
    parts (``target``)."""
    from graphcep.runtime.streaming.driver import PartWriter

    if transactions is not None and role in transactions.topics:
        from graphcep.runtime.streaming.kafka_sink import KafkaPartWriter

        return KafkaPartWriter(transactions, role)
    return PartWriter(target)


def kafka_source(args: argparse.Namespace, text: str, options: ReaderOptions,
                 max_records: int) -> Any:
    """The Kafka source ``--source kafka://...`` names, its broker reached; a micro-batch
    takes at most ``max_records`` records over all partitions (``--max-records-per-batch``,
    Spark's ``maxOffsetsPerTrigger``)."""
    from graphcep.runtime.streaming.kafka_client import (
        BROKER_WAIT_S,
        check_topics,
        client_settings,
    )
    from graphcep.runtime.streaming.kafka_source import (
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
        raise QueryError(f"--format {fmt}: a Kafka record holds lines or messages of "
                         f"{', '.join(KAFKA_FORMATS)}")
    extra = kafka_options(args.kafka_option)
    if args.on_data_loss == "report":
        if "failOnDataLoss" in extra:
            raise QueryError("--on-data-loss report sets Spark's failOnDataLoss: give one of "
                             "--on-data-loss and --kafka-option failOnDataLoss")
        extra["failOnDataLoss"] = "false"
    source = KafkaSource(brokers, topics, fmt, options,
                         starting=starting_offsets(args.starting_offsets),
                         max_records_per_batch=max_records,
                         extra=extra, report_data_loss=args.on_data_loss == "report",
                         time_from_kafka=args.time == "kafka",
                         jars_dir=jars_for(args.kafka_jars),
                         broker_wait_s=getattr(args, "broker_wait", None) or BROKER_WAIT_S)
    source.spark_conf()  # a --kafka-jars folder without the connector: refused now
    source.check_reachable()
    check_topics(source.bootstrap, topics, client_settings(extra))
    return source


def has_end(source: Any) -> bool:
    """Whether ``--once`` can read ``source`` to an end (the offsets it holds now)."""
    from graphcep.runtime.streaming.kafka_source import KafkaSource

    return isinstance(source, KafkaSource)


def spark_conf(source: Any) -> dict[str, str]:
    """Settings the Spark session needs from its start for ``source`` (its connector)."""
    conf = getattr(source, "spark_conf", None)
    return conf() if conf is not None else {}
