"""``graphcep motifs``: the 36 δ-temporal motif counts of a stream, as text, JSON or a PNG.

The counting is :func:`graphcep.motifs.count_motifs`; this module parses the options,
prints the tables and draws the heat map (matplotlib, imported only for a PNG).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from graphcep.events import counted_noun
from graphcep.interrupts import exit_on_interrupt, signals_kept
from graphcep.io.formats import LINE_FORMATS
from graphcep.motifs import MotifCounts, count_motifs, delta_to_us

INPUT_FORMATS = (*LINE_FORMATS, "parquet")
OUTPUT_FORMATS = ("text", "json", "png")
_OUTPUT_SUFFIXES = {".json": "json", ".png": "png"}
LOCAL_HEADER = ("Raphtory's layout: 24 stars centred on the vertex (pre, mid, post; index "
                "4 d1 + 2 d2 + d3, d = 1 out of the vertex), 8 two-node, 8 triangles")
LOCAL_COLUMNS = ("columns: vertex, δ, the 40 counts; a vertex id holding whitespace, a "
                 "quote or a control character is written as a JSON string")
#: A PNG draws at most this many heat maps, ``PNG_PER_ROW`` to a row (text and JSON take
#: any number of δ).
PNG_MAX_DELTAS = 64
PNG_PER_ROW = 4
_PANEL_INCHES = 4.2


def delta_list(text: str) -> list[str]:
    """``--delta``: comma-separated non-negative numbers (checked in seconds here, the
    coarsest unit; whether each is a whole number of µs in ``--time-unit`` is checked
    when the command runs), in the order given. A δ given twice (``300,300``, or
    ``10,10.0``) is refused: one table per δ, so the output would lack a column asked for.
    """
    values = [v.strip() for v in text.split(",")]
    if not all(values):
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas: {text!r}")
    distinct: dict[int, str] = {}
    for value in values:
        try:
            first = distinct.setdefault(delta_to_us(value, "s"), value)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        if first is not value:
            same = f"{first!r} twice" if first == value else f"{first!r} and {value!r}"
            raise argparse.ArgumentTypeError(f"δ {same}: the same δ given twice (each gets "
                                             "one table; give it once)")
    return values


#: The examples that end ``graphcep motifs --help``.
MOTIFS_EXAMPLES = """\
examples:
  graphcep motifs --input flows.csv --delta 10,60
  graphcep motifs --input CollegeMsg.txt.gz --format snap --delta 600,3600 -o motifs.json
  graphcep motifs --input flows.csv --delta 10 -o motifs.png
  graphcep motifs --input flows.csv --delta 10 --per-vertex --engine spark
"""


def add_parser(sub: Any) -> None:
    """Register ``motifs`` on the CLI's subparsers."""
    from graphcep.cli.options import (
        DEFAULT_REJECTS,
        REJECTS_HELP,
        add_input_arguments,
        add_spark_arguments,
        group_options,
        path_option,
        with_examples,
    )

    motifs = sub.add_parser(
        "motifs", help="count the 36 three-event δ-temporal motifs (SNAP's 6x6 table)",
        description="Counts every 3-event δ-temporal motif on at most 3 vertices "
                    "(Paranjape, Benson, Leskovec, WSDM 2017) with SNAP's semantics, for "
                    "several δ in one pass: the 6x6 table per δ and the two-node, star "
                    "and triangle totals.",
        **with_examples(MOTIFS_EXAMPLES))
    motifs.add_argument("--input", "-i", required=True, nargs="+", action="extend",
                        type=path_option,
                        help="edge file(s) or directory")
    motifs.add_argument("--format", "-f", choices=INPUT_FORMATS,
                        help="input format, as for run (default: from the name)")
    motifs.add_argument("--delta", "-d", required=True, type=delta_list, metavar="D[,D...]",
                        help="windows δ, comma-separated, in --time-unit (t3 - t1 <= δ); "
                             f"a png takes at most {PNG_MAX_DELTAS}")
    add_input_arguments(motifs, time_unit_help=(
        "unit of δ and of the input's numeric times (default: δ in seconds, times in "
        "seconds, or a Parquet file's own unit)"))
    motifs.add_argument("--output", "-o", type=path_option,
                        help="file to write (default: standard output); its suffix, .json "
                             "or .png, chooses the output format")
    motifs.add_argument("--output-format", choices=OUTPUT_FORMATS,
                        help=f"text, json or png (a heat map per δ, {PNG_PER_ROW} to a row, "
                             f"at most {PNG_MAX_DELTAS} δ; needs -o); default: from the -o "
                             "suffix, else text")
    motifs.add_argument("--rejects", default=DEFAULT_REJECTS, type=path_option,
                        help=REJECTS_HELP)
    motifs.add_argument("--engine", choices=("local", "spark"), default="local",
                        help="in-process (local, default) or spark (each counter's groups "
                             "spread over the tasks; embedded local[*] unless --master)")
    add_spark_arguments(motifs)
    motifs.add_argument("--per-vertex", action="store_true",
                        help="also per-vertex counts (text and json; " + LOCAL_HEADER +
                             "; in text, " + LOCAL_COLUMNS + ")")
    motifs.set_defaults(handler=cmd_motifs)
    group_options(motifs)


def cmd_motifs(args: argparse.Namespace) -> int:
    """Run ``graphcep motifs``; bad options and inputs end with one line and status 2."""
    from graphcep.cli.options import refuse_overwriting_inputs
    from graphcep.io.rejects import RejectLog
    from graphcep.io.sinks import SinkError, check_target, writing

    output_format = args.output_format or _OUTPUT_SUFFIXES.get(
        Path(args.output).suffix.lower() if args.output else "", "text")
    if output_format == "png" and args.output in (None, "-"):
        print("graphcep: motifs: a png needs --output FILE", file=sys.stderr)
        return 2
    if output_format == "png" and len(args.delta) > PNG_MAX_DELTAS:
        print(f"graphcep: motifs: a png draws at most {PNG_MAX_DELTAS} heat maps, not "
              f"{len(args.delta):,} δ; write text or JSON for more", file=sys.stderr)
        return 2
    if output_format == "png" and args.per_vertex:
        print("graphcep: motifs: --per-vertex counts are written as text or JSON; the heat "
              "map shows the 6x6 tables only", file=sys.stderr)
        return 2
    try:
        check_target(args.rejects, "jsonl", directory=False, role="rejects")
    except SinkError as err:
        print(f"graphcep: motifs: {err}", file=sys.stderr)
        return 2
    refuse_overwriting_inputs(args.input, {"output": args.output, "rejects": args.rejects})
    from graphcep.cli.options import master_given

    if master_given(args) and args.engine != "spark":
        print("graphcep: motifs: --master says where Spark runs; give --engine spark too "
              "(motifs counts in this process by default)", file=sys.stderr)
        return 2
    refusal = _not_edges(args)
    if refusal is not None:
        print(f"graphcep: motifs: {refusal}", file=sys.stderr)
        return 2
    try:
        for delta in args.delta:
            delta_to_us(delta, args.time_unit or "s")
    except ValueError as err:
        print(f"graphcep: motifs: {err}", file=sys.stderr)
        return 2
    with signals_kept():  # the counts are written afterwards, with Python's Ctrl-C
        counts = _counted(args)
    rejects = RejectLog(args.rejects)  # kept aside, as run keeps them; the tables hold the rest
    rejects.add(counts.rejects)
    with writing(args.rejects):
        rejects.write_if_any()
    if counts.rejected and counts.events + counts.self_loops == 0:
        print(f"graphcep: motifs: no input line was accepted: {rejects.summary()}",
              file=sys.stderr)
        return 2
    if counts.rejected:
        print(f"graphcep: motifs: {rejects.summary()}", file=sys.stderr)
    if output_format == "png":
        write_png(counts, Path(args.output))
        return 0
    to_file = args.output not in (None, "-")
    out: TextIO = open(args.output, "w") if to_file else sys.stdout  # noqa: SIM115
    try:
        if output_format == "json":
            out.write(counts.to_json() + "\n")
        else:
            write_text(counts, out)
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


def _not_edges(args: argparse.Namespace) -> str | None:
    """Why an input is no edge list (a plain sequence, a time-event sequence, a system-call
    trace: events without two vertices), else None."""
    from graphcep.io.readers import expand_paths, guess_format

    if args.format is not None:
        return None
    for path in expand_paths(args.input):
        fmt = guess_format(path)
        if fmt not in INPUT_FORMATS:
            return (f"{path}: a {fmt} file holds no edges to count motifs over (edge "
                    f"formats: {', '.join(INPUT_FORMATS)}; --format names one)")
    return None


def write_text(counts: MotifCounts, out: TextIO) -> None:
    """The tables, one block per δ, then the per-vertex counts if any."""
    for i, delta in enumerate(counts.deltas):
        totals = {k: int(v[i]) for k, v in counts.totals.items()}
        out.write(f"δ = {delta} {counts.unit}: {counted_noun(totals['all'], 'motif')} (two-node "
                  f"{totals['two_node']:,}, stars {totals['stars']:,}, triangles "
                  f"{totals['triangles']:,})\n")
        width = max(len(f"{int(counts.tables[i].max()):,}"), 5)
        out.write("      " + " ".join(f"{f'c{c}':>{width}}" for c in range(6)) + "\n")
        for r in range(6):
            cells = " ".join(f"{int(x):>{width},}" for x in counts.tables[i, r])
            out.write(f"  r{r}  {cells}\n")
    if counts.local is not None and counts.vertices is not None:
        out.write(f"per vertex ({LOCAL_HEADER}; {LOCAL_COLUMNS}):\n")
        for j, vertex in enumerate(counts.vertices):
            name = vertex_field(vertex)
            for i, delta in enumerate(counts.deltas):
                out.write(f"{name} {delta} " + " ".join(map(str, counts.local[j, i])) + "\n")


def vertex_field(vertex: str) -> str:
    """A vertex id as one whitespace-free field: as it is, or as a JSON string when it
    is empty or holds whitespace, a quote or a control character."""
    plain = vertex and '"' not in vertex and all(c.isprintable() and not c.isspace()
                                                 for c in vertex)
    return vertex if plain else json.dumps(vertex, ensure_ascii=False)


def write_png(counts: MotifCounts, path: Path) -> None:
    """One heat map per δ (log colour scale, each cell labelled with its count),
    :data:`PNG_PER_ROW` to a row; the δ are also in the PNG's ``Description``."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    n = len(counts.deltas)
    cols, rows = min(n, PNG_PER_ROW), math.ceil(n / PNG_PER_ROW)
    width, height = _PANEL_INCHES * cols, _PANEL_INCHES * rows + 0.4  # + the suptitle
    # fixed margins (inches): tight_layout measured every label of every panel, seconds
    # for 64 panels
    fig, axes = plt.subplots(rows, cols, figsize=(width, height), squeeze=False,
                             gridspec_kw={"left": 0.45 / width, "right": 1 - 0.15 / width,
                                          "bottom": 0.35 / height, "top": 1 - 0.75 / height,
                                          "wspace": 0.25, "hspace": 0.25})
    for ax in axes.flat[n:]:
        ax.set_axis_off()
    for ax, table, delta in zip(axes.flat, counts.tables, counts.deltas, strict=False):
        _heat_map(ax, table, f"δ = {delta} {counts.unit}")
    fig.suptitle("δ-temporal motif counts (SNAP's 6x6 layout)", y=1 - 0.15 / height,
                 va="top")
    fig.savefig(path, dpi=120, format="png",  # whatever the name's suffix
                metadata={"Description": f"δ = {', '.join(counts.deltas)} {counts.unit}"})
    plt.close(fig)


def _heat_map(ax: Any, table: np.ndarray, title: str) -> None:
    """One 6x6 table on ``ax``, log colour scale, each cell labelled with its count."""
    from matplotlib.colors import LogNorm

    norm = LogNorm(vmin=1, vmax=max(int(table.max()), 2))
    ax.imshow(np.where(table > 0, table, np.nan), cmap="viridis", norm=norm)
    for (r, c), value in np.ndenumerate(table):
        ax.text(c, r, f"{int(value):,}", ha="center", va="center", fontsize=7,
                color="white" if value and norm(value) < 0.6 else "black")
    ax.set_xticks(range(6), [f"c{c}" for c in range(6)])
    ax.set_yticks(range(6), [f"r{r}" for r in range(6)])
    ax.set_title(title)


__all__ = ["PNG_MAX_DELTAS", "PNG_PER_ROW", "add_parser", "cmd_motifs", "delta_list",
           "vertex_field", "write_png", "write_text"]


def _counted(args: argparse.Namespace) -> Any:
    """The motif counts of ``args.input``, on Spark under ``--engine spark`` (where Ctrl-C
    is one line, :func:`~graphcep.interrupts.exit_on_interrupt`)."""
    from graphcep.cli.options import reader_options
    from graphcep.engines.kernel_cache import lean_cache_loads

    lean_cache_loads()  # the counters' kernels come from numba's cache
    spark = None
    if args.engine == "spark":
        from graphcep.runtime.spark import spark_session

        spark = spark_session(args.master, app_name="graphcep-motifs")
        exit_on_interrupt("nothing was written")
    return count_motifs(args.input if len(args.input) > 1 else args.input[0], args.delta,
                        time_unit=args.time_unit, options=reader_options(args),
                        fmt=args.format, local=args.per_vertex, spark=spark)
