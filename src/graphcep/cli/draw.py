"""``graphcep draw MATCHES.jsonl``: a PNG per match of a JSONL match file, and the
pictures ``run --draw N`` writes beside its output."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from graphcep.io.sinks import MatchDrawing, refuse_files_among_parts
from graphcep.io.time_text import SECONDS, Clock
from graphcep.pictures.records import MatchFileError, drawing_of, read_matches, timed_rows
from graphcep.pictures.report import check_picture_directory

#: Pictures drawn when neither ``--first`` nor ``--ids`` says.
DEFAULT_FIRST = 10
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


#: The examples that end ``graphcep draw --help``.
DRAW_EXAMPLES = """\
examples:
  graphcep run examples/triangle.sal --input flows.csv --engine local -o matches.jsonl
  graphcep draw matches.jsonl -o pictures/ --first 5
  graphcep draw demo-output/matches/triangle.sal.jsonl --first 3 -o demo-pictures/
"""


def add_draw_parser(sub: Any) -> None:
    """The ``draw`` subcommand (``sub``: the command line's subparsers)."""
    from graphcep.cli.options import count_option, with_examples

    draw = sub.add_parser(
        "draw", help="draw matches of a match file (JSONL, Parquet) or a stream's output "
                     "directory as PNG pictures",
        description="One PNG per match: its vertices (with the query vertices they host) "
                    "and edges (numbered and coloured by time, with what they match and "
                    "when), for every kind of match record graphcep writes.",
        **with_examples(DRAW_EXAMPLES))
    draw.add_argument("matches", help="a JSONL or Parquet match file (graphcep run -o "
                                      "m.jsonl, -o m.parquet), or a stream's output "
                                      "directory of parts")
    draw.add_argument("--output", "-o", default="pictures", help="directory for the PNGs "
                      "(default pictures/; created)")
    which = draw.add_mutually_exclusive_group()
    which.add_argument("--first", type=count_option(1), metavar="N",
                       help=f"the first N matches of the file (default {DEFAULT_FIRST})")
    which.add_argument("--ids", nargs="+", action="extend", metavar="ID", help="the matches with these ids")
    draw.add_argument("--graphviz", action="store_true",
                      help="draw with Graphviz's dot (when installed) instead of matplotlib")
    draw.set_defaults(handler=cmd_draw)


def cmd_draw(args: argparse.Namespace) -> int:
    """Draw the chosen matches; a bad file or an unknown id is one line, exit 2."""
    from graphcep.pictures.draw import draw_all

    check_picture_directory(args.output, "--output")
    if Path(args.matches).is_dir():
        refuse_files_among_parts(args.matches, {"--output": args.output})
    rows = read_matches(args.matches)
    chosen = (_by_ids(rows, args.ids, args.matches) if args.ids
              else _first(rows, args.first or DEFAULT_FIRST))
    written = draw_all(named_drawings(chosen, args.matches), args.output, args.graphviz)
    print(f"drew {len(written):,} match{'' if len(written) == 1 else 'es'} in {args.output}")
    return 0


def named_drawings(rows: Iterable[dict[str, Any]], source: str = "matches"
                   ) -> Iterator[tuple[str, MatchDrawing]]:
    """``(file name, drawing)`` per row, numbered from 1 in order, with its match id; a
    row lacking what its kind of record holds is a :class:`MatchFileError` naming
    ``source`` and the row's number."""
    for number, row in enumerate(rows, start=1):
        try:
            name = f"match-{number:03d}-{_UNSAFE.sub('_', str(row['match_id']))}"
            yield name, drawing_of(row)
        except (KeyError, TypeError, AttributeError, ValueError) as err:
            raise MatchFileError(f"{source}: match {number}: not a match record of its kind "
                                 f"({type(err).__name__}: {err})") from None


def _first(rows: Iterator[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    return [row for _, row in zip(range(count), rows, strict=False)]


def _by_ids(rows: Iterator[dict[str, Any]], ids: list[str], path: str) -> list[dict[str, Any]]:
    wanted = dict.fromkeys(ids)
    found = {row["match_id"]: row for row in rows if row.get("match_id") in wanted}
    missing = [i for i in wanted if i not in found]
    if missing:
        raise MatchFileError(f"{path}: no match with id {', '.join(missing)}")
    return [found[i] for i in wanted]


def draw_table(matches: Any, count: int, directory: str | Path,
               clock: Clock = SECONDS) -> list[Path]:
    """The first ``count`` matches of a run's match table (Arrow, times in µs) drawn in
    ``directory`` (``run --draw N``), times as ``clock`` writes them."""
    from graphcep.pictures.draw import draw_all

    rows = timed_rows(matches.slice(0, count).to_pylist(), clock)
    return draw_all(named_drawings(rows), directory)
