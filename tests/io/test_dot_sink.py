"""The Graphviz DOT sink: every match drawn as its row says, read back by a DOT reader
written here from the DOT grammar (quoted strings, ``->`` edges, attribute lists)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graphcep.engines.ddst.baseline import DDSTBaselineEngine
from graphcep.events import Match, MatchedEdge, format_seconds, matches_to_table
from graphcep.io.labels import service_labels
from graphcep.io.readers import read_edges
from graphcep.io.sinks import DotSink, make_sink
from graphcep.jobs.ddst import DDST_MATCHES
from graphcep.lang.ddst import parse_ddst_file
from tests.paths import ROOT

CTU_SLICE = ROOT / "tests" / "fixtures" / "ddst" / "ctu13_botnet-slice.csv"

_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|(->|[{}\[\];=,])|([A-Za-z_][A-Za-z0-9_]*))', re.S)


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), text, flags=re.S)


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text.rstrip()):
        m = _TOKEN.match(text, pos)
        assert m and m.end() > pos, f"not DOT at {pos}: {text[pos:pos + 40]!r}"
        quoted, punct, word = m.groups()
        out.append(("Q", _unquote(quoted)) if quoted is not None else ("P", punct or word))
        pos = m.end()
    return out


def read_dot(text: str) -> list[dict]:
    """The clusters of a ``digraph matches``: label, nodes (name -> label) and edges
    ``(src name, dst name, label)``. Asserts the shape the sink promises."""
    toks = _tokens(text)
    assert toks[:3] == [("P", "digraph"), ("P", "matches"), ("P", "{")]
    assert toks[-1] == ("P", "}")
    body = toks[3:-1]

    def attrs(j: int) -> tuple[dict[str, str], int]:
        """An attribute list at ``j``; its pairs and the position after its ``]``."""
        assert body[j] == ("P", "[")
        got, j = {}, j + 1
        while body[j] != ("P", "]"):
            assert body[j + 1] == ("P", "=")
            got[body[j][1]] = body[j + 2][1]
            j += 3
            if body[j] == ("P", ","):
                j += 1
        return got, j + 1

    clusters, i = [], 0
    while i < len(body):
        if body[i] != ("P", "subgraph"):  # graph attributes: rankdir=LR; node [shape=box];
            while body[i] != ("P", ";"):
                i += 1
            i += 1
            continue
        assert body[i + 1][0] == "Q" and body[i + 1][1].startswith("cluster_")
        assert body[i + 2] == ("P", "{")
        cluster: dict = {"nodes": {}, "edges": []}
        i += 3
        while body[i] != ("P", "}"):
            if body[i] == ("P", "label"):
                assert body[i + 1] == ("P", "=") and body[i + 2][0] == "Q"
                cluster["label"] = body[i + 2][1]
                i += 3
            elif body[i + 1] == ("P", "->"):
                src, dst = body[i][1], body[i + 2][1]
                got, i = attrs(i + 3)
                cluster["edges"].append((src, dst, got["label"]))
            else:
                name = body[i][1]
                got, i = attrs(i + 1)
                cluster["nodes"][name] = got["label"]
            assert body[i] == ("P", ";")
            i += 1
        clusters.append(cluster)
        i += 1
    return clusters


def drawn(cluster: dict) -> tuple[set, set]:
    """A cluster as (node labels, edges as (src label, dst label, edge label))."""
    nodes = cluster["nodes"]
    assert len(set(nodes.values())) == len(nodes), "a stream vertex drawn twice"
    edges = {(nodes[s], nodes[d], label) for s, d, label in cluster["edges"]}
    assert len(edges) == len(cluster["edges"])
    return set(nodes.values()), edges


def expected_ddst(row: dict) -> tuple[set, set]:
    """What the DDST row says: each stream vertex ``id:label`` with the query vertices it
    matches (in the row's order), each stream edge once with the query edges it matches."""
    text = {}
    roles: dict[tuple, list[str]] = {}
    for v in row["vertices"]:
        key = (v["vertex"], v["label"])
        text[key] = v["vertex"] if v["label"] is None else f"{v['vertex']}:{v['label']}"
        roles.setdefault(key, []).append(v["qvar"])
    nodes = {f"{text[k]}\n{', '.join(r)}" for k, r in roles.items()}
    by_seq: dict[int, list] = {}
    for e in row["edges"]:
        by_seq.setdefault(e["seq"], [e, []])[1].append(e["qedge"])
    edges = set()
    for e, qedges in by_seq.values():
        src = f"{text[(e['src'], e['src_label'])]}\n{', '.join(roles[(e['src'], e['src_label'])])}"
        dst = f"{text[(e['dst'], e['dst_label'])]}\n{', '.join(roles[(e['dst'], e['dst_label'])])}"
        label = f"{', '.join(qedges)} [{e['label']}]\n{format_seconds(e['t'])}s"
        edges.add((src, dst, label))
    return nodes, edges


def test_ddst_matches_are_drawn_as_their_rows_say(tmp_path: Path) -> None:
    """The bundled CTU-13 slice, labelled by service, with the IRC-then-mail query: one
    cluster per reported component, numbered across writes, holding exactly its vertex
    pairs (a vertex once, with every query vertex it matches) and its edges (a stream
    edge once, with every query edge it matches)."""
    stream = service_labels(read_edges(CTU_SLICE).edges)
    query = parse_ddst_file(str(ROOT / "examples" / "ddst" / "irc_then_mail.ddst"))
    table = DDSTBaselineEngine(query).push(stream)
    rows = table.to_pylist()
    assert len(rows) > 5
    with DotSink(tmp_path / "m.dot", matches=DDST_MATCHES) as sink:
        sink.write(table.slice(0, 4))
        sink.write(table.slice(4))
    clusters = read_dot((tmp_path / "m.dot").read_text())
    assert len(clusters) == len(rows)
    for number, (cluster, row) in enumerate(zip(clusters, rows, strict=True), start=1):
        assert cluster["label"].startswith(f"match {number}  {row['query']}  id={row['match_id']}")
        assert drawn(cluster) == expected_ddst(row)
    # several query edges on one stream edge: drawn once, naming all of them
    assert any("mail1, mail2, mail3 [tcp/mail]" in e[2] for c in clusters for e in c["edges"])


def test_names_with_quotes_backslashes_and_line_breaks_survive(tmp_path: Path) -> None:
    odd = ['say "hi"', "C:\\temp\\", "two\nlines"]
    edges = (MatchedEdge("e1", 1_500_000, odd[0], odd[1], 0, 1),
             MatchedEdge("e2", 2_000_000, odd[1], odd[2], 0, 2))
    table = matches_to_table([Match("q", (("x", odd[0]), ("y", odd[1]), ("z", odd[2])),
                                    edges, 1_500_000, 2_000_000)])
    with make_sink(tmp_path / "m.gv") as sink:
        assert isinstance(sink, DotSink)
        sink.write(table)
    (cluster,) = read_dot((tmp_path / "m.gv").read_text())
    nodes, drawn_edges = drawn(cluster)
    assert nodes == {f"{odd[0]}\nx", f"{odd[1]}\ny", f"{odd[2]}\nz"}
    assert drawn_edges == {(f"{odd[0]}\nx", f"{odd[1]}\ny", "e1\n1.5s"),
                           (f"{odd[1]}\ny", f"{odd[2]}\nz", "e2\n2s")}


def test_dot_parts_are_whole_graphs_and_an_empty_sink_an_empty_graph(tmp_path: Path) -> None:
    table = matches_to_table([
        Match("q", (("x", "a"), ("y", "b")), (MatchedEdge("e", 1, "a", "b", 0, 1),), 1, 1),
        Match("q", (("x", "c"), ("y", "d")), (MatchedEdge("e", 2, "c", "d", 0, 2),), 2, 2)])
    sink = make_sink(str(tmp_path / "parts") + "/", fmt="dot")
    sink.write(table, batch_id=0)
    sink.write(table.slice(1), batch_id=0)  # a retried batch replaces its part
    sink.write(table, batch_id=1)
    sink.close()
    parts = sorted((tmp_path / "parts").iterdir())
    assert [p.name for p in parts] == ["part-00000000.dot", "part-00000001.dot"]
    assert [len(read_dot(p.read_text())) for p in parts] == [1, 2]
    assert read_dot(parts[0].read_text())[0]["label"].startswith("match 1  q")
    with DotSink(tmp_path / "none.dot"):
        pass
    assert read_dot((tmp_path / "none.dot").read_text()) == []
    with pytest.raises(ValueError, match="dot"):
        make_sink(tmp_path / "m.txt", fmt="svg")


def test_run_command_writes_dot(tmp_path: Path) -> None:
    """``graphcep run Q.ddst -o matches.dot``: as many clusters as matches."""
    from graphcep.cli import main
    from graphcep.io.generator import write_edges

    labelled = tmp_path / "netflow.parquet"
    write_edges(service_labels(read_edges(CTU_SLICE).edges), str(labelled))
    query = str(ROOT / "examples" / "ddst" / "irc_then_mail.ddst")
    assert main(["run", query, "--input", str(labelled), "--engine", "local",
                 "-o", str(tmp_path / "m.dot")]) == 0
    assert main(["run", query, "--input", str(labelled), "--engine", "local",
                 "-o", str(tmp_path / "m.jsonl")]) == 0
    reported = len((tmp_path / "m.jsonl").read_text().splitlines())
    assert len(read_dot((tmp_path / "m.dot").read_text())) == reported > 5


def test_stream_command_picks_the_sink_by_the_directory_name(tmp_path: Path) -> None:
    from argparse import Namespace

    from graphcep.cli.stream import _sink
    from graphcep.io.sinks import JsonlSink, ParquetSink
    from graphcep.jobs.ddst import DDSTJob
    from graphcep.lang.ddst import parse_ddst

    job = DDSTJob(parse_ddst("QUERY q; VERTICES A, B; EDGES x: A -> B; WITHIN 5 s;"))
    for name, kind in (("out.dot/", DotSink), ("out.parquet/", ParquetSink), ("out/", JsonlSink)):
        sink = _sink(Namespace(output=str(tmp_path / name), limit=20), job)
        assert type(sink) is kind and sink.directory and sink.matches == job.output
        assert sink.matches.with_flat(None) == DDST_MATCHES


def test_to_dot_is_what_the_sink_writes(tmp_path: Path) -> None:
    """``to_dot`` tells DDST tables from SAL ones by their columns and gives the sink's
    document."""
    from graphcep.io.sinks import to_dot

    stream = service_labels(read_edges(CTU_SLICE).edges)
    table = DDSTBaselineEngine(
        parse_ddst_file(str(ROOT / "examples" / "ddst" / "irc_then_mail.ddst"))).push(stream)
    with DotSink(tmp_path / "m.dot", matches=DDST_MATCHES) as sink:
        sink.write(table)
    assert to_dot(table) == (tmp_path / "m.dot").read_text()
    sal = matches_to_table([Match("q", (("x", "a"),), (MatchedEdge("e", 1, "a", "b", 0, 1),),
                                  1, 1)])
    with DotSink(tmp_path / "s.dot") as sink:
        sink.write(sal)
    assert to_dot(sal) == (tmp_path / "s.dot").read_text()
