"""The DDST match record and report modes: what a DDST job's output looks like, importable
without the engines (Arrow only; the CLI and the job read it on every run).

:data:`DDST_MATCH_SCHEMA` has one row per report (see :mod:`graphcep.engines.ddst.baseline`
for what a report holds).
"""

from __future__ import annotations

import pyarrow as pa

#: One pair of the vertex match relation ``S``: query vertex, stream vertex id and label.
DDST_VERTEX_TYPE = pa.struct(
    [pa.field("qvar", pa.string()), pa.field("vertex", pa.string()), pa.field("label", pa.string())]
)
#: One pair of the edge match relation ``Se``, with the stream edge's time and endpoints.
DDST_EDGE_TYPE = pa.struct(
    [
        pa.field("qedge", pa.string()),
        pa.field("seq", pa.int64()),
        pa.field("t", pa.int64()),
        pa.field("src", pa.string()),
        pa.field("dst", pa.string()),
        pa.field("label", pa.string()),
        pa.field("src_label", pa.string()),
        pa.field("dst_label", pa.string()),
    ]
)
#: Reported match components (see the module docstring).
DDST_MATCH_SCHEMA = pa.schema(
    [
        pa.field("query", pa.string()),
        pa.field("match_id", pa.string()),
        pa.field("window_start", pa.int64()),
        pa.field("window_end", pa.int64()),
        pa.field("trigger_seq", pa.int64()),
        pa.field("first_t", pa.int64()),
        pa.field("vertices", pa.list_(DDST_VERTEX_TYPE)),
        pa.field("edges", pa.list_(DDST_EDGE_TYPE)),
    ]
)

#: What a report holds: the whole match component, or only its pairs not reported before.
REPORT_MODES = ("component", "new")

#: The coloring engine keeps query edges and vertices as bits of int64 masks: at most this
#: many of each (a wider query runs on the signature engine unless ``--ddst-engine`` says).
COLORING_MAX_BITS = 62
