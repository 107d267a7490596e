"""A run's report as one self-contained HTML file: the query and its plan, the summary,
the timelines, the first matches drawn and the rejected lines grouped by reason.

Every picture is embedded as a base64 ``data:`` URI and the page loads nothing else, so
the file reads offline and pastes into a ticket as it is. A short inline script notes on
``<body data-images-decoded>`` which pictures the browser decoded (``1`` each, in page
order), for checking the page in a headless browser.
"""

from __future__ import annotations

import base64
import html
import io
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphcep.io.rejects import reason_kind
from graphcep.io.sinks import SinkError, check_target, refuse_files_among_parts

#: Matches drawn in a report when ``--draw`` does not say.
REPORT_MATCHES = 6
#: Examples shown per kind of reject reason.
REJECT_EXAMPLES = 3

_STYLE = """body{font-family:sans-serif;margin:2em auto;max-width:70em;color:#222}
pre{background:#f4f4f4;padding:.8em;overflow-x:auto}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}td.nested{padding:0}
figure{display:inline-block;margin:.5em;vertical-align:top}img{max-width:100%}
figcaption{font-size:.85em;color:#555}"""
_SCRIPT = ("window.addEventListener('load',function(){document.body.dataset.imagesDecoded="
           "Array.prototype.map.call(document.images,function(i){return i.complete&&"
           "i.naturalWidth>0?'1':'0'}).join('')})")


@dataclass
class Report:
    """What a report shows; pictures are ``(caption, PNG bytes)``."""

    title: str
    query_text: str
    plan: list[str]
    summary: dict[str, Any]
    timelines: list[tuple[str, bytes]] = field(default_factory=list)
    matches: list[tuple[str, bytes]] = field(default_factory=list)
    rejects: list[dict[str, Any]] = field(default_factory=list)
    rejects_total: int = 0


def check_picture_targets(args: Any, parts: str | None = None) -> None:
    """``--timeline`` and ``--report`` name files this process can write (checked before
    any work, as ``-o`` is); they and ``--draw-dir`` lie outside ``parts``, the run's
    directory of match parts, if any (:func:`~graphcep.io.sinks.refuse_files_among_parts`)."""
    refuse_files_among_parts(parts, {
        "--timeline": args.timeline, "--report": args.report,
        "--draw-dir": (args.draw_dir or "pictures") if getattr(args, "draw", None) else None})
    for role, target, suffixes in (("--timeline", args.timeline, (".png",)),
                                   ("--report", args.report, (".html", ".htm"))):
        if target is None:
            continue
        check_target(target, "jsonl", directory=False, role=role)
        if Path(target).suffix.lower() not in suffixes:
            kind = "a PNG picture" if role == "--timeline" else "an HTML page"
            raise SinkError(f"{role} {target}: it writes {kind}; name it {suffixes[0]}")
    if getattr(args, "draw_dir", None) is not None and not getattr(args, "draw", None):
        raise SinkError("--draw-dir says where --draw N puts its pictures; give --draw N too")
    if getattr(args, "draw", None):
        check_picture_directory(args.draw_dir or "pictures", "--draw-dir")


def check_picture_directory(path: str | Path, role: str) -> None:
    """``path`` can hold pictures: a directory, or nothing yet (it is created). A file
    there is refused in one line before any work."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise SinkError(f"{role} {path}: a file, not a directory (one PNG is written per "
                        "match, into a directory)")


def png(draw: Callable[..., Any], *args: Any) -> bytes:
    """The PNG ``draw(*args, file)`` writes, as bytes."""
    buffer = io.BytesIO()
    draw(*args, buffer)
    return buffer.getvalue()


def match_pictures(rows: Iterable[dict[str, Any]]) -> list[tuple[str, bytes]]:
    """Each match row (times in µs) drawn, captioned with its number and id."""
    from graphcep.pictures.draw import render
    from graphcep.pictures.layout import lay_out
    from graphcep.pictures.records import drawing_of

    return [(f"match {n}: {row['match_id']}", png(render, lay_out(drawing_of(row))))
            for n, row in enumerate(rows, start=1)]


def write_report(report: Report, path: str | Path) -> None:
    """Write ``report`` as one HTML file (parent directories created)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(to_html(report), encoding="utf-8")


def to_html(report: Report) -> str:
    """The report's page."""
    e = html.escape
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>"
             f"{e(report.title)}</title><style>{_STYLE}</style><script>{_SCRIPT}</script>"
             f"</head><body><h1>{e(report.title)}</h1>",
             f"<p>written {e(time.strftime('%Y-%m-%d %H:%M:%S %Z'))}</p>",
             f"<h2>Query</h2><pre id='query'>{e(report.query_text)}</pre>",
             f"<h2>Plan</h2><pre id='plan'>{e(chr(10).join(report.plan))}</pre>",
             "<h2>Summary</h2>", summary_table(report.summary),
             "<h2>Timelines</h2>", _figures(report.timelines, "timeline"),
             f"<h2>Matches</h2><p>the first {len(report.matches):,} of "
             f"{report.summary.get('matches', 0):,}</p>", _figures(report.matches, "match"),
             "<h2>Rejected lines</h2>", rejects_section(report.rejects, report.rejects_total),
             "</body></html>"]
    return "\n".join(parts)


def summary_table(summary: dict[str, Any]) -> str:
    """One row per summary field, in a cell ``data-key``'d by its field: numbers
    right-aligned with thousands separators, an object (``phases``) as a table of its
    fields and a list of objects (``pww_levels``) as a table with a row per item, their
    cells keyed ``field.name`` and ``field.index.name``; other lists as JSON."""
    rows = [f"<tr><th>{html.escape(key)}</th>{_summary_cell(key, value)}</tr>"
            for key, value in summary.items()]
    return f"<table id='summary'>{''.join(rows)}</table>"


def _summary_cell(key: str, value: Any) -> str:
    if isinstance(value, dict) and value:
        rows = "".join(f"<tr><th>{html.escape(str(k))}</th>{_summary_cell(f'{key}.{k}', v)}"
                       "</tr>" for k, v in value.items())
        return f"<td class='nested'><table>{rows}</table></td>"
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        names = list(dict.fromkeys(k for item in value for k in item))
        head = "".join(f"<th>{html.escape(str(n))}</th>" for n in names)
        rows = "".join("<tr>" + "".join(_summary_cell(f"{key}.{i}.{n}", item.get(n))
                                        for n in names) + "</tr>"
                       for i, item in enumerate(value))
        return f"<td class='nested'><table><tr>{head}</tr>{rows}</table></td>"
    if isinstance(value, bool) or not isinstance(value, int | float):
        text, cls = (value if isinstance(value, str) else json.dumps(value)), "text"
    else:
        text, cls = f"{value:,}", "num"
    return f"<td class='{cls}' data-key='{html.escape(key)}'>{html.escape(str(text))}</td>"


def rejects_section(rows: list[dict[str, Any]], total: int) -> str:
    """The rejected lines grouped by the kind of their reason, most frequent first,
    with a few examples each (file, line, reason, text)."""
    if not total:
        return "<p>none</p>"
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(reason_kind(str(row.get("reason", ""))), []).append(row)
    e = html.escape
    parts = [f"<p>{total:,} rejected</p>"]
    for kind, members in sorted(groups.items(), key=lambda g: (-len(g[1]), g[0])):
        examples = "".join(
            f"<tr><td>{e(str(r.get('file', '')))}</td><td class='num'>{r.get('line', '')}"
            f"</td><td>{e(str(r.get('reason', '')))}</td><td><code>"
            f"{e(str(r.get('text', ''))[:200])}</code></td></tr>"
            for r in members[:REJECT_EXAMPLES])
        parts.append(f"<h3 class='reject-kind'>{e(kind)}: {len(members):,}</h3><table>"
                     "<tr><th>file</th><th>line</th><th>reason</th><th>text</th></tr>"
                     f"{examples}</table>")
    return "\n".join(parts)


def _figures(pictures: list[tuple[str, bytes]], kind: str) -> str:
    if not pictures:
        return "<p>none</p>"
    return "\n".join(
        f"<figure class='{kind}'><img alt='{html.escape(caption)}' src='data:image/png;base64,"
        f"{base64.b64encode(data).decode('ascii')}'><figcaption>{html.escape(caption)}"
        "</figcaption></figure>" for caption, data in pictures)
