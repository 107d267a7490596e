"""Reading edge streams, writing matches, and generating synthetic netflows.

* :mod:`graphcep.io.formats` -- formats, options and the vectorized line parser
  (:func:`parse_lines`) shared by the local and Spark readers.
* :mod:`graphcep.io.readers` -- :func:`read_edges` for files, lists and directories.
* :mod:`graphcep.io.rejects` -- :class:`RejectLog` for lines that could not be read.
* :mod:`graphcep.io.sinks` -- console, JSONL and Parquet match sinks.
* :mod:`graphcep.io.generator` -- SAM-style random netflows, planted patterns, writers.
"""

from graphcep.io.formats import (
    FORMAT_FIELD_ALIASES,
    FORMATS,
    LINE_FORMATS,
    ReaderOptions,
    parse_lines,
    parse_table,
    prepare_options,
    resolve_field,
)
from graphcep.io.generator import generate_netflow, generate_planted, write_edges
from graphcep.io.readers import ReadResult, guess_format, read_edges
from graphcep.io.rejects import RejectLog
from graphcep.io.sinks import ConsoleSink, JsonlSink, ParquetSink, make_sink

__all__ = [
    "FORMATS",
    "FORMAT_FIELD_ALIASES",
    "LINE_FORMATS",
    "ConsoleSink",
    "JsonlSink",
    "ParquetSink",
    "ReadResult",
    "ReaderOptions",
    "RejectLog",
    "generate_netflow",
    "generate_planted",
    "guess_format",
    "make_sink",
    "parse_lines",
    "parse_table",
    "prepare_options",
    "read_edges",
    "resolve_field",
    "write_edges",
]
