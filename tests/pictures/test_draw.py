"""Match pictures: the texts drawn equal the match record, read here independently (the
JSON text itself, numbers kept as written), for every kind of record; ``graphcep draw``
writes decodable, non-blank PNGs and refuses bad files and unknown ids in one line."""

from __future__ import annotations

import json
import re
from decimal import Decimal

import pytest

from graphcep.cli import main
from graphcep.io.sinks import MatchDrawing
from graphcep.pictures.draw import draw_match
from graphcep.pictures.layout import lay_out
from graphcep.pictures.records import drawing_of, read_matches
from tests.paths import EXAMPLES, FIXTURES

MATCHES = FIXTURES / "pictures" / "matches.jsonl"
RECORDS = [json.loads(line, parse_float=str, parse_int=str)
           for line in MATCHES.read_text().splitlines()]


def expected_edge_labels(record: dict) -> list[str]:
    """Each stream edge: its number by time, what it matches, its time as written."""
    edges = record["edges"]
    if "vertices" in record:  # DDST: one edge per stream edge, naming every query edge
        merged: dict[str, dict] = {}
        for e in edges:
            merged.setdefault(e["seq"], {**e, "what": []})["what"].append(e["qedge"])
        edges = [{**e, "what": ", ".join(e["what"]) + (f" [{e['label']}]" if e["label"]
                                                        else "")} for e in merged.values()]
    elif "subscription" in record:
        edges = [{**e, "what": f"pos {int(record['start']) + i}"} for i, e in enumerate(edges)]
    else:
        edges = [{**e, "what": e["var"]} for e in edges]
    ranked = sorted(enumerate(edges), key=lambda p: (Decimal(p[1]["t"]), p[0]))
    return [f"{k}. {e['what']}\n{e['t']}s" for k, (_, e) in enumerate(ranked, start=1)]


def expected_hosts(record: dict) -> list[tuple[str, str]]:
    """(stream vertex, query vertex) pairs a picture must show together."""
    if "vertices" in record:
        return [(v["vertex"], v["qvar"]) for v in record["vertices"]]
    if "subscription" in record:
        return []
    return [(vertex, var) for var, vertex in record["bindings"].items()]


@pytest.mark.parametrize("index", range(len(RECORDS)))
def test_drawn_labels_equal_the_record(tmp_path, index):
    record = RECORDS[index]
    row = list(read_matches(MATCHES))[index]
    texts = draw_match(drawing_of(row), tmp_path / "m.png")
    title, rest = texts[0], texts[1:]
    edge_texts = [t for t in rest if t[0].isdigit() and ". " in t.split("\n")[0]]
    assert edge_texts == expected_edge_labels(record)
    for vertex, var in expected_hosts(record):
        assert any(t.split("\n")[0] == vertex and var in t.split("\n")[1].split(", ")
                   for t in rest), (vertex, var)
    assert record["match_id"] in title
    if "subscription" in record:
        assert f"key={record['key']}" in title
        for var, value in record["bindings"].items():
            assert f"@{var}={value}" in title
        symbols = {t for t in rest if "\n" not in t}
        assert {e["dst"] for e in record["edges"]} <= symbols
    if "pww_level" in record:
        assert f"pww level {record['pww_level']}, delay {record['pww_delay']}s" in title


def test_a_large_component_draws_its_earliest_edges():
    edges = [((f"v{i}", None), (f"v{i + 1}", None), f"e{i}", 1000 * (60 - i))
             for i in range(60)]
    nodes = {(f"v{i}", None): (f"v{i}", []) for i in range(61)}
    layout = lay_out(MatchDrawing("big", nodes, edges), max_edges=40)
    kept = sorted(edges, key=lambda e: e[3])[:40]
    assert [e.label.split("\n")[0] for e in layout.edges] == \
        [f"{k}. {e[2]}" for k, e in enumerate(kept, start=1)]
    assert set(layout.positions) == {end for e in kept for end in e[:2]}
    assert "first 40 of 60 edges" in layout.title


def test_draw_command_writes_pictures(tmp_path, capsys):
    from matplotlib.image import imread

    out = tmp_path / "pics"
    assert main(["draw", str(MATCHES), "-o", str(out), "--first", "2"]) == 0
    pictures = sorted(out.glob("*.png"))
    assert [p.name.split("-")[2][:-4] for p in pictures] == \
        [r["match_id"] for r in RECORDS[:2]]
    for picture in pictures:
        pixels = imread(picture)
        assert pixels.shape[0] > 100 and pixels.shape[1] > 100
        assert pixels.reshape(-1, pixels.shape[-1]).std(axis=0).max() > 0.05
    ids = [RECORDS[3]["match_id"], RECORDS[1]["match_id"]]
    assert main(["draw", str(MATCHES), "-o", str(out / "ids"), "--ids", *ids]) == 0
    assert [p.name.split("-")[2][:-4] for p in sorted((out / "ids").glob("*.png"))] == ids


@pytest.mark.parametrize("argv, says", [
    (["--ids", "0000000000000000"], "no match with id 0000000000000000"),
    (["--first", "0"], "--first"),
])
def test_draw_refuses_unknown_ids_in_one_line(tmp_path, capsys, argv, says):
    assert main(["draw", str(MATCHES), "-o", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("text, where", [
    ("not json\n", ":1: not JSON"), ('{"query": "q"}\n', ":1: not a match record"),
    ('{"edges": [{"t": "x"}], "match_id": "a"}\n', ":1: not a match record"),
    ('{"edges": [], "match_id": "a"}\n', ": match 1: not a match record"),
    ('{"vertices": [], "edges": [], "match_id": "a"}\n', ": match 1: not a match record"),
])
def test_draw_refuses_a_bad_file_in_one_line(tmp_path, capsys, text, where):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(text)
    assert main(["draw", str(bad), "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"graphcep: {bad}{where}") and err.count("\n") == 1


def test_run_draws_its_first_matches(tmp_path, capsys):
    from tests.paths import EXAMPLES

    out, pictures = tmp_path / "m.jsonl", tmp_path / "pics"
    assert main(["subscribe", str(EXAMPLES / "subs" / "figure3.subs"), "--input",
                 str(EXAMPLES / "subs" / "figure3.seq"), "-o", str(out), "--draw", "2",
                 "--draw-dir", str(pictures)]) == 0
    ids = [json.loads(line)["match_id"] for line in out.read_text().splitlines()[:2]]
    assert [p.name.split("-")[2][:-4] for p in sorted(pictures.glob("*.png"))] == ids


def test_the_command_line_loads_matplotlib_only_to_draw():
    import subprocess
    import sys

    code = "import sys, graphcep.cli; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"


def test_graphviz_draws_only_when_installed(tmp_path, capsys, monkeypatch):
    import shutil

    from matplotlib.image import imread

    argv = ["draw", str(MATCHES), "-o", str(tmp_path / "g"), "--first", "2", "--graphviz"]
    if shutil.which("dot"):
        assert main(argv) == 0
        assert all(imread(p).shape[0] > 50 for p in (tmp_path / "g").glob("*.png"))
        assert len(list((tmp_path / "g").glob("*.png"))) == 2
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))  # no dot program to be found
    assert main([*argv[:3], str(tmp_path / "h"), *argv[4:]]) == 2
    err = capsys.readouterr().err
    assert "apt-get install graphviz" in err and err.count("\n") == 1
    assert not (tmp_path / "h").exists()


def test_a_parquet_match_file_draws_as_its_jsonl_twin(tmp_path, capsys):
    from tests.paths import EXAMPLES

    texts = {}
    for suffix in ("jsonl", "parquet"):
        out = tmp_path / f"m.{suffix}"
        assert main(["subscribe", str(EXAMPLES / "subs" / "figure3.subs"), "--input",
                     str(EXAMPLES / "subs" / "figure3.seq"), "-o", str(out)]) == 0
        texts[suffix] = [draw_match(drawing_of(row), tmp_path / "p.png")
                         for row in read_matches(out)]
    assert len(texts["jsonl"]) == 6 and texts["parquet"] == texts["jsonl"]
    (tmp_path / "bad.parquet").write_text("x")
    assert main(["draw", str(tmp_path / "bad.parquet"), "-o", str(tmp_path / "o")]) == 2
    assert "not a Parquet match file" in capsys.readouterr().err


def test_a_graphviz_output_is_named_as_such(tmp_path, capsys):
    """-o m.dot is one of the outputs run writes: draw says what it is and what renders it."""
    dot = tmp_path / "m.dot"
    dot.write_text("digraph matches {\n}\n")
    assert main(["draw", str(dot), "-o", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{dot}: a Graphviz file" in err and "dot -Tpng" in err


def test_an_event_is_drawn_at_its_node_not_towards_an_empty_one(tmp_path, capsys):
    """A time-event sequence's row is one event (its dst empty): a mark on its node."""
    events = tmp_path / "e.tes"
    events.write_text("a 1 b\n")
    query = tmp_path / "q.nu"
    query.write_text("a . b\n")
    out = tmp_path / "m.jsonl"
    assert main(["run", str(query), "--input", str(events), "--engine", "local",
                 "-o", str(out)]) == 0
    (row,) = read_matches(out)
    drawing = drawing_of(row)
    assert [text for text, _ in drawing.nodes.values()] == ["a", "b"]
    assert [(src[0], dst[0], text) for src, dst, text, _ in drawing.edges] == [
        ("a", "a", "a"), ("b", "b", "b")]


def test_a_draw_dir_without_draw_is_refused(tmp_path, capsys):
    flows = tmp_path / "flows.csv"
    flows.write_text("t,src,dst\n1,a,b\n2,b,c\n3,c,a\n")
    assert main(["run", str(EXAMPLES / "triangle.sal"), "--input", str(flows), "--engine",
                 "local", "--draw-dir", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--draw N" in err


@pytest.mark.parametrize("command", ["draw", "run"])
def test_a_file_where_the_pictures_go_is_refused_before_any_work(tmp_path, capsys, command):
    taken = tmp_path / "taken"
    taken.write_text("keep me\n")
    if command == "draw":
        argv = ["draw", str(MATCHES), "-o", str(taken)]
    else:
        flows = tmp_path / "flows.csv"
        flows.write_text("t,src,dst\n1,a,b\n2,b,c\n3,c,a\n")
        argv = ["run", str(EXAMPLES / "triangle.sal"), "--input", str(flows), "--engine",
                "local", "-o", str(tmp_path / "m.jsonl"), "--draw", "1", "--draw-dir",
                str(taken)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a directory" in err
    assert taken.read_text() == "keep me\n" and not (tmp_path / "m.jsonl").exists()


@pytest.mark.parametrize("where", ["", "/", "/pics"])
def test_pictures_never_go_into_the_directory_of_parts_drawn(tmp_path, capsys, where):
    """pyarrow and Spark read such a directory as one data set: a PNG there breaks it."""
    parts = tmp_path / "out"
    parts.mkdir()
    (parts / "part-00000000.jsonl").write_text(MATCHES.read_text())
    assert main(["draw", str(parts), "-o", f"{parts}{where}", "--first", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a directory of match parts" in err
    assert [p.name for p in parts.iterdir()] == ["part-00000000.jsonl"]


@pytest.mark.parametrize("option", [["--draw", "1", "--draw-dir", "OUT/pics"],
                                    ["--draw", "1", "--draw-dir", "OUT"],
                                    ["--report", "OUT/r.html"], ["--timeline", "OUT/t.png"]])
def test_run_keeps_pictures_out_of_its_directory_of_parts(tmp_path, capsys, option):
    flows = tmp_path / "flows.csv"
    flows.write_text("t,src,dst\n1,a,b\n2,b,c\n3,c,a\n")
    out = tmp_path / "m.parquet"
    option = [o.replace("OUT", str(out)) for o in option]
    assert main(["run", str(EXAMPLES / "triangle.sal"), "--input", str(flows), "--engine",
                 "local", "-o", f"{out}/", "--rejects", str(tmp_path / "r.jsonl"),
                 *option]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a directory of match parts" in err
    assert not out.exists()


def test_a_directory_of_parts_reads_as_its_parts_in_order(tmp_path, capsys):
    """A stream's -o DIR/ holds part-<batch>.jsonl files: drawn in batch order."""
    lines = MATCHES.read_text().splitlines()
    parts = tmp_path / "out"
    parts.mkdir()
    (parts / "part-00000001.jsonl").write_text("\n".join(lines[2:4]) + "\n")
    (parts / "part-00000000.jsonl").write_text("\n".join(lines[:2]) + "\n")
    (parts / ".tmp-x").write_text("not a part\n")
    assert [r["match_id"] for r in read_matches(parts)] == [r["match_id"] for r in RECORDS[:4]]
    assert main(["draw", str(parts), "-o", str(tmp_path / "pics"), "--first", "3"]) == 0
    assert len(list((tmp_path / "pics").glob("*.png"))) == 3
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["draw", str(empty), "-o", str(tmp_path / "p2")]) == 2
    assert "a directory without match parts" in capsys.readouterr().err


def test_a_directory_of_pictures_shows_the_latest_drawing_only(tmp_path, capsys):
    """Redrawing into a directory removes the pictures of an earlier drawing that this one
    did not draw; a file no drawing wrote stays."""
    out = tmp_path / "pics"
    out.mkdir()
    (out / "mine.png").write_bytes(b"not a picture of graphcep's")
    first = [RECORDS[0]["match_id"], RECORDS[1]["match_id"]]
    assert main(["draw", str(MATCHES), "-o", str(out), "--ids", *first]) == 0
    second = [RECORDS[1]["match_id"], RECORDS[3]["match_id"]]
    assert main(["draw", str(MATCHES), "-o", str(out), "--ids", *second]) == 0
    drawn = sorted(p.name.split("-")[2][:-4] for p in out.glob("match-*.png"))
    assert drawn == sorted(second)
    assert (out / "mine.png").read_bytes() == b"not a picture of graphcep's"
    (out / ".graphcep-pictures").write_text("../elsewhere.png\nmine.png.txt\n")
    assert main(["draw", str(MATCHES), "-o", str(out), "--ids", first[0]]) == 0
    assert (out / "mine.png").exists()
    assert sorted(p.name.split("-")[2][:-4] for p in out.glob("match-*.png")) == \
        sorted({first[0], *second})


#: One rule of each kind, and a stream on which each has matches.
RULE_TEXTS = {
    "pair.sal": "{ x e1 y; y e2 x; starttime(e1) < starttime(e2); "
                "starttime(e2) - starttime(e1) <= 5; }",
    "back.nu": "<#X ~> #Y . Y ~> X>[0, 5]",
    "back.ddst": "VERTICES A, B; EDGES x: A -> B; y: B -> A; ORDER x < y; WITHIN 5 s",
    "echo.subs": "pp: @a.@b.@a\n",
}
RULE_STREAM = "t,src,dst\n1,a,b\n2,b,a\n3,c,a\n4,a,c\n5,b,c\n7,a,b\n9,c,b\n"


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_rule_matches_draw_as_their_kind_draws_them(tmp_path, capsys, suffix):
    """Each match of ``run --rules`` is drawn as the run of its rule alone draws the same
    match (the oracle: that run's own record), titled with the rule and its version; the
    pictures are named by the rule-qualified ids, which ``--ids`` takes."""
    folder, stream = tmp_path / "rules", tmp_path / "s.csv"
    folder.mkdir()
    for name, text in RULE_TEXTS.items():
        (folder / name).write_text(text)
    stream.write_text(RULE_STREAM)
    common = ["-i", str(stream), "--engine", "local"]
    together = tmp_path / f"m.{suffix}"
    assert main(["run", "--rules", str(folder), *common, "-o", str(together)]) == 0
    alone = {}
    for name in RULE_TEXTS:
        out = tmp_path / f"{name}.jsonl"
        assert main(["run", str(folder / name), *common, "-o", str(out)]) == 0
        alone[name] = {row["match_id"]: drawing_of(row) for row in read_matches(out)}
    assert all(alone.values())  # every kind has matches to draw

    rows = list(read_matches(together))
    drawn = {}
    for row in rows:
        own = alone[row["rule"]][_inner(row)["match_id"]]
        assert drawing_of(row) == MatchDrawing(
            f"{row['rule']} {row['version']}: {own.title}", own.nodes, own.edges)
        drawn[row["rule"], _inner(row)["match_id"]] = row["match_id"]
    assert set(drawn) == {(name, i) for name, found in alone.items() for i in found}

    pictures = tmp_path / "pics"
    assert main(["draw", str(together), "-o", str(pictures), "--first", "100"]) == 0
    names = sorted(p.name for p in pictures.glob("*.png"))
    assert names == [f"match-{n:03d}-{re.sub(r'[^A-Za-z0-9_.-]', '_', row['match_id'])}.png"
                     for n, row in enumerate(rows, 1)]
    assert all(row["match_id"].startswith(row["rule"] + "/") for row in rows)
    wanted = [rows[-1]["match_id"], rows[0]["match_id"]]
    assert main(["draw", str(together), "-o", str(tmp_path / "ids"), "--ids", *wanted]) == 0
    assert len(list((tmp_path / "ids").glob("*.png"))) == 2


def _inner(row: dict) -> dict:
    """A rule's match record as its kind writes it (JSONL: under ``match``; Parquet: in
    its record kind's column)."""
    from graphcep.jobs.rules import RECORD_OF

    return row.get("match") or row[RECORD_OF[row["kind"]]]
