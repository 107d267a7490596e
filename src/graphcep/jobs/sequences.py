"""Subscription jobs: a set of parameterized sequence patterns over a keyed link stream
(du Mouza, Rigaux, Scholl, SSDBM 2006; semantics in :mod:`graphcep.engines.sequences.engine`).

:func:`load` reads a ``.subs`` file with the command line's options (``key``, ``symbol``,
``subs_engine``). Every occurrence lies inside one key's sequence, so the stream splits by
key exactly (:meth:`SubscriptionJob.partition_key`): on Spark each partition of keys is
replayed in an engine of its own; never by time (``whole_stream``: a key's sequence may
span the whole stream).

Example
-------
>>> import pyarrow as pa
>>> from graphcep.lang.sequences import parse_subscriptions
>>> job = SubscriptionJob(parse_subscriptions("back: @x.@y.@x"))
>>> edges = pa.table({"t": [0, 1, 2], "src": ["h", "h", "h"], "dst": ["a", "b", "a"]})
>>> from graphcep.runtime.local import run_job
>>> matches, _ = run_job(job, edges)
>>> [(m["subscription"], m["key"], m["start"], m["end"]) for m in matches.to_pylist()]
[('back', 'h', 0, 2)]
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from graphcep.engines.base import Engine
from graphcep.engines.sequences.engine import SUBS_MATCH_SCHEMA
from graphcep.engines.sequences.tree import PatternTree
from graphcep.events import counted_noun
from graphcep.io.formats import resolve_field
from graphcep.io.sinks import MatchDrawing, MatchFormat
from graphcep.io.time_text import SECONDS, Clock
from graphcep.jobs.base import CellSplit, Extent, Instances, JobBase
from graphcep.jobs.key_positions import KeyPositions
from graphcep.jobs.subscription_watch import SubscriptionWatch
from graphcep.patterns.sequences import SubscriptionSet, filtering_rate, show
from graphcep.patterns.subgraph import QueryError

#: ``--subs-engine`` name -> (module, class); all report the same notifications. The
#: compiled trie is the default (the fastest, :mod:`graphcep.engines.sequences.compiled`);
#: the pattern tree is the paper's, the naive engine its baseline.
ENGINES: dict[str, tuple[str, str]] = {
    "compiled": ("graphcep.engines.sequences.compiled", "CompiledSequenceEngine"),
    "tree": ("graphcep.engines.sequences.engine", "SequenceEngine"),
    "naive": ("graphcep.engines.sequences.engine", "NaiveSequenceEngine"),
}
DEFAULT_ENGINE = "compiled"
#: The alphabet size ``explain`` estimates filtering rates and trie steps for.
EXPLAIN_ALPHABET = 16

#: Options of other kinds subscriptions have no use for, with what they do instead.
NOT_FOR = {
    "query_name": "a .subs file is one set of subscriptions",
    "window": "an occurrence is contiguous in its key's sequence, whatever its duration",
    "max_duration": "subscriptions read edges in stream order only",
    "homomorphic": "different variables may already bind equal symbols",
    "anchored": "it is a ν-expression option",
}


def format_notification(row: dict[str, Any], number: int, clock: Clock = SECONDS) -> str:
    """A notification on the console: who, where, when (as ``clock`` writes times), the
    bindings and edge seqs."""
    binds = ", ".join(f"@{b['var']}={b['value']}" for b in row["bindings"] or [])
    seqs = ",".join(str(e["seq"]) for e in row["edges"] or [])
    return (f"match {number}  subscription={row['subscription']}  key={_key_text(row)}  "
            f"positions {row['start']}..{row['end']}  {clock.text(row['start_t'])} .. "
            f"{clock.text(row['end_t'])}  {binds}  seqs={seqs}\n")


def _key_text(row: dict[str, Any]) -> str:
    """A notification's key as shown: the empty key (a plain sequence's lines without
    one) as ``""``, as its picture's node shows it."""
    return row["key"] or '""'


def notification_to_json(row: dict[str, Any], clock: Clock = SECONDS) -> str:
    """A notification as one JSON object; times are exact decimal seconds (or ISO
    date-times, as ``clock`` writes them)."""
    edges = ",".join(f'{{"seq":{int(e["seq"])},"t":{clock.json(e["t"])},'
                     f'"src":{json.dumps(e["src"])},"dst":{json.dumps(e["dst"])}}}'
                     for e in row["edges"] or [])
    binds = json.dumps({b["var"]: b["value"] for b in row["bindings"] or []})
    return (f'{{"subscription":{json.dumps(row["subscription"])},"match_id":'
            f'{json.dumps(row["match_id"])},"key":{json.dumps(row["key"])},'
            f'"start":{row["start"]},"end":{row["end"]},"start_t":'
            f'{clock.json(row["start_t"])},"end_t":{clock.json(row["end_t"])},'
            f'"bindings":{binds},"edges":[{edges}]}}')


def notification_drawing(row: dict[str, Any], clock: Clock = SECONDS) -> MatchDrawing:
    """A notification's edges as a small graph, each edge named by its position in the
    key's sequence; the title has the key, the positions and the bindings."""
    nodes: dict[tuple[str, str | None], tuple[str, list[str]]] = {}
    edges = []
    for i, e in enumerate(row["edges"] or []):
        for end in (e["src"], e["dst"]):
            nodes.setdefault((end, None), (end, []))
        edges.append(((e["src"], None), (e["dst"], None), f"pos {row['start'] + i}",
                      e["t"]))
    binds = " ".join(f"@{b['var']}={b['value']}" for b in row["bindings"] or [])
    title = (f"{row['subscription']}  key={_key_text(row)}  id={row['match_id']}  positions "
             f"{row['start']}..{row['end']}" + (f"  {binds}" if binds else ""))
    return MatchDrawing(title, nodes, edges, clock)


#: Notifications on the console, in JSONL and in DOT.
SUBS_MATCHES = MatchFormat(SUBS_MATCH_SCHEMA, format_notification, notification_to_json,
                           notification_drawing)


def load(path: str, options: Mapping[str, Any]) -> SubscriptionJob:
    """A ``.subs`` file, or a directory of them, as a job; other kinds' options are
    refused, saying why."""
    from graphcep.lang.sequences import parse_subscriptions_source

    return with_options(parse_subscriptions_source(path), options)


def with_options(subscriptions: SubscriptionSet, options: Mapping[str, Any]) -> SubscriptionJob:
    """A subscription set as a job, with the command line's ``key``, ``symbol`` and
    ``subs_engine``."""
    key, symbol = options.get("key"), options.get("symbol")
    return SubscriptionJob(subscriptions, "src" if key is None else key,
                           "dst" if symbol is None else symbol,
                           options.get("subs_engine") or DEFAULT_ENGINE)


def accepts(pattern: Any) -> bool:
    """Whether ``pattern`` is a subscription set (:func:`graphcep.jobs.as_job`)."""
    return isinstance(pattern, SubscriptionSet)


def from_pattern(pattern: SubscriptionSet, **options: Any) -> SubscriptionJob:
    """A subscription set as a job (``key=``, ``symbol=``, ``engine=``)."""
    return SubscriptionJob(pattern, **options)


@dataclass(frozen=True)
class SubscriptionJob(JobBase):
    """Subscriptions, the fields giving each edge's key and symbol, and the engine."""

    subscriptions: SubscriptionSet
    key: str = "src"
    symbol: str = "dst"
    engine: str = DEFAULT_ENGINE

    output: ClassVar[MatchFormat] = SUBS_MATCHES

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise QueryError(f"unknown subscriptions engine {self.engine!r}: "
                             f"{', '.join(ENGINES)}")
        for role, field in (("key", self.key), ("symbol", self.symbol)):
            if not field.strip():  # never silently the default field
                raise QueryError(f"the {role} field cannot be empty (--{role} names a field "
                                 "of the stream, such as src or dst)")

    @property
    def name(self) -> str:
        return self.subscriptions.name

    @property
    def whole_stream(self) -> bool:
        return True  # never cut by time: a key's sequence may span the whole stream

    def partition_key(self) -> str:
        return self.key  # every occurrence lies inside one key's sequence

    def cell_split(self) -> CellSplit:
        """Keyed by the key field: each key's whole sequence in one cell, whose engine
        keeps each key's positions apart (:meth:`partition_key`), so a cell reports its
        keys' notifications as one engine over the whole stream does."""
        return CellSplit(columns=(self.key,), home=("column", "key"),
                         fields=frozenset({self.key, self.symbol} - {"t", "src", "dst", "dur"}),
                         words=f"keyed by the key field {self.key!r}: each key's sequence "
                               "goes to one cell, an edge to the cell of its key")

    @property
    def reads_symbols(self) -> bool:
        return True  # a plain sequence's key and symbol are its rows' src and dst

    @property
    def min_records(self) -> int:
        """An occurrence holds one edge per item of its pattern: the shortest pattern's
        length (1 for an empty set)."""
        return min((len(s.pattern) for s in self.subscriptions.subscriptions), default=1)

    def bind(self, longest_duration_us: int) -> SubscriptionJob:
        return self

    def extent(self) -> Extent:
        return Extent(0)

    def needed_columns(self, available: list[str]) -> list[str]:
        wanted = {"t", "src", "dst", "seq", "dur", self.key, self.symbol}
        return [c for c in available if c in wanted]

    def check_columns(self, available: list[str]) -> None:
        if self.key == self.symbol:  # each key's sequence would be the key, repeated
            raise QueryError(f"--key and --symbol name the same field {self.key!r}: a "
                             "key's sequence would be the key itself, repeated; give the "
                             "symbol another field")
        for role, field in (("--key", self.key), ("--symbol", self.symbol)):
            if field not in available:
                column = resolve_field(None, field)  # a format's own name (SourceIp)
                hint = (f" ({field} is the column {column!r} here: {role} {column})"
                        if column != field and column in available else "")
                raise QueryError(f"{role} {field!r}: the stream has no such field{hint}. "
                                 f"Fields: {list(available)}")

    def orient(self, edges: pa.Table) -> pa.Table:
        return edges

    def instances(self, matches: pa.Table) -> Instances:
        """The ``match_id`` (subscription and edge seqs) and the occurrence's times."""
        return Instances(matches.column("match_id").to_pylist(),
                         matches.column("start_t").to_numpy().astype(np.int64),
                         matches.column("end_t").to_numpy().astype(np.int64))

    @property
    def local_matches(self) -> bool:
        """A notification is decided by its records and their places in their key's
        sequence: under window widening those come numbered over the whole stream
        (:meth:`stream_numbering`), so a window holding the records finds it, and only
        the stream's notifications."""
        return True

    def stream_numbering(self) -> KeyPositions:
        """Each record's position in its key's sequence: windows read the runs of
        consecutive positions, and report the stream's positions
        (:mod:`graphcep.jobs.key_positions`)."""
        return KeyPositions(self.key, self.symbol)

    def new_engine(self, threads: int | None = 1) -> Engine:
        module, cls = ENGINES[self.engine]
        engine_class = getattr(importlib.import_module(module), cls)
        return engine_class({s.id: s.pattern for s in self.subscriptions.subscriptions},
                            key=self.key, symbol=self.symbol)

    def watch(self, path: str) -> SubscriptionWatch:
        """The subscriptions source ``path``, re-read between micro-batches
        (:mod:`graphcep.jobs.subscription_watch`)."""
        return SubscriptionWatch(path)

    def summary_fields(self) -> dict[str, Any]:
        return {"subs_engine": self.engine, "key": self.key, "symbol": self.symbol}

    def describe(self) -> list[str]:
        """The subscriptions, the pattern tree with each node's filtering rate (for an
        alphabet of 16 symbols), its height and fan-out, the matching engine that runs
        (and for the compiled trie, its size) and the plan."""
        tree = self.pattern_tree()
        stats = tree.stats()
        lines = [f"subscriptions {self.name}: {len(self.subscriptions.subscriptions)}, "
                 f"sequences by {self.key!r}, symbols from {self.symbol!r}", ""]
        for depth, node in tree.walk():
            ids = f"  [{', '.join(node.ids)}]" if node.ids else ""
            rate = f"  τ={filtering_rate(node.pattern, EXPLAIN_ALPHABET):.3g}" \
                if node.pattern else ""
            lines.append("  " * depth + show(node.pattern) + ids + rate)
        engine = self.new_engine()
        chosen = "the default" if self.engine == DEFAULT_ENGINE else "chosen with --subs-engine"
        others = " or ".join(e for e in ENGINES if e != self.engine)
        lines += ["", f"pattern tree (the paper's): {counted_noun(stats['nodes'], 'node')}, height "
                      f"{stats['height']}, mean fan-out {stats['fan_out']:.2f}",
                  f"matching engine: {self.engine} ({chosen}; --subs-engine {others} "
                  "reports the same notifications)"]
        trie = getattr(engine, "trie", None)
        if trie is not None:
            shape = trie.shape(EXPLAIN_ALPHABET)
            lines.append(f"compiled trie: {counted_noun(shape['nodes'], 'node')} (the root, "
                         f"{counted_noun(shape['constants'], 'constant')}, "
                         f"{counted_noun(shape['variables'], 'variable')}, "
                         f"{counted_noun(shape['back_references'], 'back-reference')}), depth "
                         f"{shape['depth']}, {shape['steps']:.3g} steps per start position "
                         f"(nodes visited, symbols uniform over {EXPLAIN_ALPHABET})")
        lines += [f"plan: {engine.describe()}",
                  f"Spark: the stream is partitioned by {self.key!r} (every occurrence lies "
                  "in one key's sequence), each partition replayed in one engine"]
        return lines

    def pattern_tree(self) -> PatternTree:
        """The paper's pattern tree of the subscriptions, inserted in file order."""
        tree = PatternTree()
        for s in self.subscriptions.subscriptions:
            tree.insert(s.pattern.marked(), s.id)
        return tree

    def plan_dot(self) -> str:
        """The pattern tree as Graphviz DOT: each node its pattern, the subscriptions
        ending there and its filtering rate; an arrow from each node to its sons."""
        tree = self.pattern_tree()
        lines = ["digraph pattern_tree {", '  node [shape=box, fontname="monospace"];']
        for _, node in tree.walk():
            label = [show(node.pattern)]
            if node.ids:
                label.append(", ".join(node.ids))
            if node.pattern:
                label.append(f"τ={filtering_rate(node.pattern, EXPLAIN_ALPHABET):.3g}")
            text = "\\n".join(json.dumps(part, ensure_ascii=False)[1:-1] for part in label)
            lines.append(f'  n{node.nid} [label="{text}"];')
            lines += [f"  n{node.nid} -> n{child.nid};" for child in node.children]
        return "\n".join([*lines, "}"]) + "\n"
