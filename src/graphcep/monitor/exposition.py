"""The live numbers in Prometheus' text exposition format (version 0.0.4).

Each family has its ``# HELP`` and ``# TYPE`` lines; counters end in ``_total``; label
values escape backslash, double quote and line feed, help texts backslash and line feed.
The counters of the whole stream (edges, late edges, rejected lines, matches, batches)
are the summary's totals, which the checkpoint keeps: they go on from where the last
start left them, as a counter may. The batch-duration histogram and the rejects by
reason count since this start (a counter starting again from zero is a restart to
Prometheus).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: The stream's totals: summary key -> (metric, help).
TOTALS = {
    "edges": ("graphcep_edges_in_total", "Edges read from the source."),
    "late": ("graphcep_late_edges_total",
             "Edges that arrived behind the watermark (written to the late edges, not matched)."),
    "rejected": ("graphcep_rejected_lines_total", "Malformed lines rejected."),
    "matches": ("graphcep_matches_total", "Matches reported."),
    "batches": ("graphcep_batches_total", "Micro-batches done."),
    "released": ("graphcep_released_edges_total",
                 "Edges released by the watermark to the matching."),
}

Sample = tuple[str, dict[str, str], float]


def metrics_text(numbers: dict[str, Any]) -> str:
    """The exposition of :meth:`~graphcep.monitor.live.LiveNumbers.snapshot`'s numbers.

    >>> print(metrics_text({"query": "q", "totals": {"edges": 3}, "state": {},
    ...     "pace": {}, "rules": {}, "partition_lag": {}, "rejects_by_reason": {},
    ...     "batch": None, "batch_seconds": {"buckets": [1.0], "counts": [0, 0],
    ...     "sum": 0.0, "count": 0}}).splitlines()[:3])
    ['# HELP graphcep_edges_in_total Edges read from the source.', '# TYPE graphcep_edges_in_total counter', 'graphcep_edges_in_total{query="q"} 3']
    """
    query = {"query": numbers["query"]}
    lines: list[str] = []
    for key, (name, text) in TOTALS.items():
        if key in numbers["totals"]:
            lines += family(name, "counter", text, [(name, query, numbers["totals"][key])])
    lines += family("graphcep_state", "gauge",
                    "State held: edges in the window, edges buffered for lateness, and the "
                    "engine's own figures.",
                    [("graphcep_state", {**query, "part": part}, value)
                     for part, value in numbers["state"].items()])
    lines += _batch_lines(numbers, query)
    lines += _lag_lines(numbers, query)
    lines += _rule_lines(numbers["rules"], query)
    lines += family("graphcep_rejects_by_reason_total", "counter",
                    "Malformed lines rejected since this start, by the kind of their reason.",
                    [("graphcep_rejects_by_reason_total", {**query, "reason": reason}, count)
                     for reason, count in numbers["rejects_by_reason"].items()])
    return "\n".join(lines) + "\n"


def family(name: str, kind: str, text: str, samples: Iterable[Sample]) -> list[str]:
    """A metric family's lines: its help and type, then its samples (none: no lines)."""
    body = [sample_line(*sample) for sample in samples]
    if not body:
        return []
    return [f"# HELP {name} {escape_help(text)}", f"# TYPE {name} {kind}", *body]


def sample_line(name: str, labels: dict[str, str], value: float) -> str:
    r"""One sample: ``name{label="value",...} value``.

    >>> sample_line("x_total", {"rule": 'say "hi"\\n'}, 2)
    'x_total{rule="say \\"hi\\"\\\\n"} 2'
    """
    inside = ",".join(f'{key}="{escape_label(str(text))}"' for key, text in labels.items())
    return f"{name}{{{inside}}} {number_text(value)}" if inside else f"{name} {number_text(value)}"


def escape_label(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def number_text(value: float) -> str:
    """A sample's value: integers as integers, others as Python's shortest repr,
    infinities as Prometheus writes them."""
    if value == float("inf"):
        return "+Inf"
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def _batch_lines(numbers: dict[str, Any], query: dict[str, str]) -> list[str]:
    histogram = numbers["batch_seconds"]
    samples: list[Sample] = []
    cumulative = 0
    bounds = [*histogram["buckets"], float("inf")]
    for bound, count in zip(bounds, histogram["counts"], strict=True):
        cumulative += count
        bound_text = "+Inf" if bound == float("inf") else repr(float(bound))
        samples.append(("graphcep_batch_seconds_bucket", {**query, "le": bound_text},
                        cumulative))
    samples += [("graphcep_batch_seconds_sum", query, histogram["sum"]),
                ("graphcep_batch_seconds_count", query, histogram["count"])]
    lines = family("graphcep_batch_seconds", "histogram",
                   "Seconds each micro-batch took, since this start.", samples)
    batch = numbers["batch"]
    if batch is not None and batch["watermark_us"] > -(2**63):
        lines += family("graphcep_watermark_seconds", "gauge",
                        "Event time the watermark has reached (edges before it are released).",
                        [("graphcep_watermark_seconds", query, batch["watermark_us"] / 1e6)])
    return lines


def _lag_lines(numbers: dict[str, Any], query: dict[str, str]) -> list[str]:
    pace = numbers["pace"]
    lines: list[str] = []
    for key, name, text in (
            ("lag_s", "graphcep_source_lag_seconds",
             "How long the newest record taken was due at the source (the generator, "
             "Kafka)."),
            ("backlog", "graphcep_source_backlog_records",
             "Records due at the source and not yet taken."),
            ("matched_rate", "graphcep_matched_records_per_second",
             "Records a second the stream has taken since this start.")):
        if pace.get(key) is not None:
            lines += family(name, "gauge", text, [(name, query, pace[key])])
    lines += family("graphcep_partition_lag_records", "gauge",
                    "Kafka records not read yet, by topic and partition.",
                    [("graphcep_partition_lag_records",
                      {**query, **_place(place)}, count)
                     for place, count in numbers["partition_lag"].items()])
    return lines


def _place(place: str) -> dict[str, str]:
    topic, _, partition = place.rpartition("/")
    return {"topic": topic, "partition": partition}


def _rule_lines(rules: dict[str, dict[str, Any]], query: dict[str, str]) -> list[str]:
    def labels(name: str, facts: dict[str, Any]) -> dict[str, str]:
        return {**query, "rule": name, "version": facts["version"] or "removed"}

    matches = [("graphcep_rule_matches_total", labels(name, facts), facts["matches"])
               for name, facts in rules.items()]
    state = [("graphcep_rule_state", {**labels(name, facts), "part": part}, value)
             for name, facts in rules.items() for part, value in facts["state"].items()]
    return (family("graphcep_rule_matches_total", "counter",
                   "Matches of each rule since the stream's start.", matches)
            + family("graphcep_rule_state", "gauge",
                     "State each rule's engine holds.", state))
