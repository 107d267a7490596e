"""`graphcep run` / `explain` on a subscriptions file, end to end (in-process engine)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphcep.cli import main
from tests.paths import EXAMPLES, FIXTURES
from tests.sequences_oracle import occurrences

FLOWS = "t,src,dst\n0,h,22\n1,h,80\n2,g,22\n3,h,22\n4,h,80\n5,h,443\n6,g,80\n"
SUBS = "# probes\nprobe: 22.@x.22.@x\npair: @a.@b\n"


def write(tmp_path):
    (tmp_path / "flows.csv").write_text(FLOWS)
    (tmp_path / "s.subs").write_text(SUBS)
    return str(tmp_path / "s.subs"), str(tmp_path / "flows.csv")


def expected(key_field, symbol_field):
    rows = [line.split(",") for line in FLOWS.split("\n")[1:] if line]
    column = {"src": 1, "dst": 2}
    sequences = {}
    for row in rows:
        sequences.setdefault(row[column[key_field]], []).append(row[column[symbol_field]])
    found = set()
    for sid, items in (("probe", ("22", ("x",), "22", ("x",))), ("pair", (("a",), ("b",)))):
        for key, seq in sequences.items():
            found |= {(sid, key, start) for start, _ in occurrences(items, seq)}
    return found


def test_run_local_reports_what_the_oracle_finds(tmp_path, capsys):
    subs, flows = write(tmp_path)
    out = tmp_path / "out.jsonl"
    for key, symbol in (("src", "dst"), ("dst", "src")):
        status = main(["run", subs, "--input", flows, "--engine", "local", "--key", key,
                       "--symbol", symbol, "-o", str(out), "--summary", "json"])
        assert status == 0
        summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert summary["key"] == key and summary["subs_engine"] == "compiled"
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert {(r["subscription"], r["key"], r["start"]) for r in rows} == expected(key, symbol)
        out.unlink()


def test_naive_engine_and_console(tmp_path, capsys):
    subs, flows = write(tmp_path)
    assert main(["run", subs, "--input", flows, "--engine", "local", "--subs-engine",
                 "naive"]) == 0
    text = capsys.readouterr().out
    assert "subscription=probe  key=h  positions 0..3" in text and "@x=80" in text


def test_explain_prints_the_tree(tmp_path, capsys):
    subs, _ = write(tmp_path)
    assert main(["explain", subs]) == 0
    text = capsys.readouterr().out
    assert "22.@x1.22.@x1  [probe]" in text and "pattern tree (the paper's): 2 nodes" in text


def test_explain_names_the_engine_and_sizes_the_trie(tmp_path, capsys):
    """examples/subs/probes.subs by hand: the trie's paths are FRESH FRESH BACK0
    (ping_pong), then BACK1 (back_and_forth), and FRESH FRESH FRESH BACK0
    (return_after_two): the root, 3 variables and 3 back-references; a walk visits the
    root, @x1, @x1.@x2 and @x1.@x2.@x3 always, each BACK node with probability 1/16 per
    back-reference on its path: 4 + 1/16 + 1/256 + 1/16 = 4.129 steps."""
    probes = str(EXAMPLES / "subs" / "probes.subs")
    assert main(["explain", probes, "--dot", str(tmp_path / "new" / "t.dot")]) == 0
    text = capsys.readouterr().out
    assert "matching engine: compiled (the default;" in text
    assert ("compiled trie: 7 nodes (the root, 0 constants, 3 variables, 3 back-references), "
            "depth 4, 4.13 steps per start position") in text
    assert "@x1.@x2.@x1.@x2  [back_and_forth]  τ=0.00391" in text  # 16 ** -2
    dot = (tmp_path / "new" / "t.dot").read_text()  # its directory made, as for -o
    assert dot.startswith("digraph pattern_tree {") and dot.count(" -> ") == 3
    assert 'label="@x1.@x2.@x1\\nping_pong\\nτ=0.0625"' in dot
    assert main(["explain", probes, "--subs-engine", "tree"]) == 0
    text = capsys.readouterr().out
    assert "matching engine: tree (chosen with --subs-engine;" in text
    assert "compiled trie" not in text and "height 2, mean fan-out 1.50" in text


def test_a_missing_field_and_other_kinds_options_are_refused(tmp_path, capsys):
    subs, flows = write(tmp_path)
    assert main(["run", subs, "--input", flows, "--engine", "local", "--key", "port"]) != 0
    assert "--key 'port'" in capsys.readouterr().err
    assert main(["run", subs, "--input", flows, "--engine", "local", "--anchored"]) != 0
    assert "does not apply to a subscriptions file" in capsys.readouterr().err


def test_a_vast_field_name_for_key_points_at_its_column(capsys):
    """A VAST file's source address is read into 'src': --key SourceIp is refused in one
    line that names the column to give instead."""
    status = main(["subscribe", str(EXAMPLES / "subs" / "probes.subs"), "--input",
                   str(FIXTURES / "ctu13_vast_sample.csv"), "--key", "SourceIp", "--symbol",
                   "DestPort"])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1
    assert err.startswith("graphcep: --key 'SourceIp': the stream has no such field "
                          "(SourceIp is the column 'src' here: --key src). Fields: ")


def test_a_directory_reads_subscriptions_files_whatever_the_case_of_their_suffix(tmp_path,
                                                                                  capsys):
    """A file named 2.SUBS is a subscriptions file given alone; in a directory it was left
    out without a word."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "1.subs").write_text("a: x\n")
    (tmp_path / "d" / "2.SUBS").write_text("b: y\n")
    (tmp_path / "d" / "notes.txt").write_text("c: z\n")
    (tmp_path / "s.seq").write_text("x y z\n")
    assert main(["subscribe", str(tmp_path / "d"), "--input", str(tmp_path / "s.seq"),
                 "--summary", "json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["matches"] == 2


def test_a_mistake_in_a_subscriptions_file_of_another_suffix_is_named(tmp_path, capsys):
    """SUBS.txt with a ':' missing on line 2 is a subscriptions file: the error is the
    subscriptions parser's at line 2, not SAL's at line 1."""
    path = tmp_path / "SUBS.txt"
    path.write_text('ssh: 22.@x\nweb "10.0.0.1".@y\n')
    assert main(["explain", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"graphcep: {path}:2:5: subscription 'web': expected ':' after the id, found "
        "string \"10.0.0.1\"\n")


def test_errors_in_the_file_name_line_and_column(tmp_path, capsys):
    (tmp_path / "bad.subs").write_text("ok: a\nbad: a..b\n")
    (tmp_path / "flows.csv").write_text(FLOWS)
    status = main(["run", str(tmp_path / "bad.subs"), "--input", str(tmp_path / "flows.csv"),
                   "--engine", "local"])
    assert status != 0
    assert "bad.subs:2:8: subscription 'bad'" in capsys.readouterr().err


@pytest.mark.spark
def test_spark_partitions_by_key_and_equals_the_oracle(tmp_path, capsys, spark):
    """On Spark a subscription job is partitioned by its key column (every occurrence lies
    in one key's sequence): the rows equal the oracle's and the in-process run's."""
    from graphcep.io.generator import generate_netflow, write_edges

    flows = tmp_path / "many.csv"
    write_edges(generate_netflow(4000, 12, 100, 3).select(["t", "src", "dst", "dur"]),
                str(flows), "csv")
    (tmp_path / "s.subs").write_text("back: @x.@y.@x\nthree: @x.@y.@z.@x\n")
    results = {}
    for engine in ("local", "spark"):
        out = tmp_path / f"{engine}.jsonl"
        spark = ["--master", "local[2]", "--shards", "3"] if engine == "spark" else []
        status = main(["run", str(tmp_path / "s.subs"), "--input", str(flows), "--engine",
                       engine, *spark, "-o", str(out), "--summary", "json"])
        summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert status == 0
        results[engine] = {(r["subscription"], r["key"], r["start"], r["end"])
                           for r in map(json.loads, out.read_text().splitlines())}
    assert summary["strategy"] == "keys"
    assert results["spark"] == results["local"] and len(results["local"]) > 100


# -- graphcep subscribe and plain sequences (.seq) --------------------------------------


def items_of(pattern):
    """A pattern's text as the oracle's items: constants as text, variables as tuples."""
    return tuple((item[1:],) if item.startswith("@") else item for item in pattern.split("."))


def subscribe(*args, capsys):
    """``graphcep subscribe`` with a JSON summary: (status, notifications, summary)."""
    out = args[args.index("-o") + 1]
    status = main(["subscribe", *args, "--summary", "json"])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    notes = {(r["subscription"], r["key"], r["start"], r["end"])
             for r in map(json.loads, Path(out).read_text().splitlines())}
    return status, notes, summary


def oracle(subs, sequences):
    """Every occurrence, by brute force from Definitions 1-2, per key."""
    return {(sid, key, start, start + len(items_of(text)) - 1)
            for sid, text in subs.items() for key, seq in sequences.items()
            for start, _ in occurrences(items_of(text), seq)}


FIGURE = {"P1": "a", "P2": "a.@x.b", "P3": "a.c", "P4": "a.@x.b.@x", "P5": "a.c.b.a",
          "P6": "a.c.b.b"}
MORE = {"back": "@x.@y.@x", "pair": "@a.@b", "same": "@a.@a", "cv": "c.@v.@w"}


@pytest.mark.parametrize("engine", ["compiled", "tree", "naive"])
def test_subscribe_figures_3_4_from_a_seq_file_equal_the_oracle(tmp_path, capsys, engine):
    subs = tmp_path / "figure.subs"
    subs.write_text("".join(f"{k}: {v}\n" for k, v in {**FIGURE, **MORE}.items()))
    seq = EXAMPLES / "subs" / "figure3.seq"
    out = tmp_path / "notes.jsonl"
    status, notes, summary = subscribe(str(subs), "--input", str(seq), "-o", str(out),
                                       "--subs-engine", engine, capsys=capsys)
    assert status == 0 and summary["engine"] == "local" and summary["rejected"] == 0
    assert notes == oracle({**FIGURE, **MORE}, {"": list("acbcadb")})
    # the paper's run: P1 at 0 and 4, P3 at 0, P2 at 0 and 4, P4 at 0; P5, P6 never
    assert {n for n in notes if n[0] in FIGURE} == {
        ("P1", "", 0, 0), ("P1", "", 4, 4), ("P3", "", 0, 1), ("P2", "", 0, 2),
        ("P2", "", 4, 6), ("P4", "", 0, 3)}


def test_the_example_files_through_subscribe_on_the_console(capsys):
    status = main(["subscribe", str(EXAMPLES / "subs" / "figure3.subs"), "--input",
                   str(EXAMPLES / "subs" / "figure3.seq")])
    text = capsys.readouterr().out
    assert status == 0 and "figure3: 6 matches in 7 edges (0 rejected)" in text
    assert 'subscription=P4  key=""  positions 0..3  0s .. 3s  @x=c  seqs=1,2,3,4' in text


def test_one_match_in_one_edge_is_said_in_the_singular(tmp_path, capsys):
    (tmp_path / "one.subs").write_text("P: a\n")
    (tmp_path / "one.seq").write_text("a\n")
    status = main(["subscribe", str(tmp_path / "one.subs"), "--input",
                   str(tmp_path / "one.seq")])
    assert status == 0 and "one: 1 match in 1 edge (0 rejected)" in capsys.readouterr().out


def test_an_option_subscribe_lacks_is_refused_by_subscribe(capsys):
    """--window is no option of subscribe: the line names subscribe and its --help."""
    status = main(["subscribe", str(EXAMPLES / "subs" / "figure3.subs"), "--input",
                   str(EXAMPLES / "subs" / "figure3.seq"), "--window", "5"])
    assert status == 2
    assert capsys.readouterr().err == ("graphcep: subscribe: unrecognized arguments: --window 5 "
                                       "(see graphcep subscribe --help)\n")


def test_keyed_sequences_with_rejects(tmp_path, capsys):
    lines = ["# two hosts", "h1: 22 80 22", "h2: 22 443", "h1: 80 22", "h2:", "h2: 22 a:b",
             "h2: 443 22"]
    (tmp_path / "ports.seq").write_text("\n".join(lines) + "\n")
    subs = {"probe": "22.@x.22.@x", "back": "@a.@b.@a"}
    (tmp_path / "s.subs").write_text("".join(f"{k}: {v}\n" for k, v in subs.items()))
    out, rejects = tmp_path / "notes.jsonl", tmp_path / "rejects.jsonl"
    status, notes, summary = subscribe(str(tmp_path / "s.subs"), "--input",
                                       str(tmp_path / "ports.seq"), "-o", str(out),
                                       "--rejects", str(rejects), capsys=capsys)
    assert status == 0 and summary["rejected"] == 2 and summary["lines"] == 7
    sequences = {"h1": ["22", "80", "22", "80", "22"], "h2": ["22", "443", "443", "22"]}
    assert notes == oracle(subs, sequences) and ("probe", "h1", 0, 3) in notes
    bad = [json.loads(line) for line in rejects.read_text().splitlines()]
    assert [(r["line"], r["reason"].split(" (")[0]) for r in bad] == [
        (5, "key without symbols: 'h2'"), (6, "colon in a symbol: 'a:b'")]


def test_subscribe_with_a_csv_and_other_fields(tmp_path, capsys):
    subs, flows = write(tmp_path)
    out = tmp_path / "out.jsonl"
    status, notes, _ = subscribe(subs, "--input", flows, "--key", "dst", "--symbol", "src",
                                 "-o", str(out), capsys=capsys)
    assert status == 0 and {n[:3] for n in notes} == expected("dst", "src")


def one_line_error(capsys, argv, *words):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("graphcep: "), err
    for word in words:
        assert word in err, err


def test_subscribe_refuses_other_kinds_of_query(tmp_path, capsys):
    seq = str(EXAMPLES / "subs" / "figure3.seq")
    one_line_error(capsys, ["subscribe", str(EXAMPLES / "triangle.sal"), "--input", seq],
                   "is a SAL program, not a subscriptions file")
    ddst = tmp_path / "pair.txt"  # the text says what it is
    ddst.write_text("VERTICES A, B; EDGES x: A -> B; WITHIN 5 s")
    one_line_error(capsys, ["subscribe", str(ddst), "--input", seq],
                   "is a DDST query, not a subscriptions file")
    plain = tmp_path / "mine.txt"  # nothing says another kind: read as subscriptions
    plain.write_text("ok: a\nbad: a..b\n")
    one_line_error(capsys, ["subscribe", str(plain), "--input", seq],
                   "mine.txt:2:8: subscription 'bad'")
    one_line_error(capsys, ["subscribe", str(tmp_path / "none.subs"), "--input", seq],
                   "none.subs")
    one_line_error(capsys, ["subscribe", str(EXAMPLES / "subs" / "figure3.subs"), "--input",
                            str(tmp_path / "none.seq")], "none.seq")
    one_line_error(capsys, ["subscribe", str(EXAMPLES / "subs" / "figure3.subs"), "--input",
                            seq, "--window", "5"], "--window")


@pytest.mark.parametrize("query", ["triangle.sal", "nu/path.nu", "ddst/congestion.ddst"])
def test_other_kinds_refuse_a_plain_sequence(capsys, query):
    seq = str(EXAMPLES / "subs" / "figure3.seq")
    one_line_error(capsys, ["run", str(EXAMPLES / query), "--input", seq, "--engine",
                            "local"], "a plain sequence (seq) holds symbols, not links")
    one_line_error(capsys, ["run", str(EXAMPLES / query), "--input",
                            str(EXAMPLES / "subs" / "figure3.subs"), "--format", "seq",
                            "--engine", "local"], "plain sequence (seq)")


@pytest.mark.spark
def test_subscribe_on_spark_reads_a_seq_file_as_in_process(tmp_path, capsys, spark):
    subs = str(EXAMPLES / "subs" / "figure3.subs")
    (tmp_path / "keyed.seq").write_text("k: a c b\nx y\nk: c a d b\nx x\n")
    found = {}
    for engine in ("local", "spark"):
        out = tmp_path / f"{engine}.jsonl"
        master = ["--master", "local[2]"] if engine == "spark" else []
        status, found[engine], summary = subscribe(
            subs, "--input", str(tmp_path / "keyed.seq"), "--engine", engine, *master,
            "-o", str(out), capsys=capsys)
        assert status == 0 and summary["engine"] == engine
    assert found["spark"] == found["local"] == oracle(FIGURE, {"k": list("acbcadb"),
                                                               "": list("xyxx")})


def test_subscribe_widens_windows_as_run_does(tmp_path, capsys):
    """``subscribe --pww L`` is ``run SUBS --pww L``: the same notifications; with L as
    long as the stream, the occurrences the brute force finds, with their records and
    their positions in the key's whole sequence."""
    subs = str(EXAMPLES / "subs" / "figure3.subs")
    seq = str(EXAMPLES / "subs" / "figure3.seq")
    found = {}
    for command in ("subscribe", "run"):
        out = tmp_path / f"{command}.jsonl"
        argv = [command, subs, "--input", seq, "--pww", "8", "-o", str(out)]
        assert main([*argv, "--engine", "local"] if command == "run" else argv) == 0
        capsys.readouterr()
        found[command] = {(r["subscription"], r["start"], r["end"],
                           tuple(e["seq"] for e in r["edges"]))
                          for r in map(json.loads, out.read_text().splitlines())}
    expected = {(sid, start, end, tuple(range(start + 1, end + 2)))  # seq = position + 1
                for sid, _, start, end in oracle(FIGURE, {"": list("acbcadb")})}
    assert found["subscribe"] == found["run"] == expected


def refuse_a_list_field(tmp_path, capsys, extra):
    """A Parquet list column as the key or symbol: one line naming the option, exit 2."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"t": [0, 1, 2], "src": ["h"] * 3, "dst": ["a"] * 3,
                             "tags": [[1], [2], [1]]}), tmp_path / "e.parquet")
    (tmp_path / "s.subs").write_text(SUBS)
    assert main(["subscribe", str(tmp_path / "s.subs"), "--input",
                 str(tmp_path / "e.parquet"), *extra]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"{extra[0]} 'tags'" in err, err


@pytest.mark.parametrize("pww", [[], ["--pww", "2"]], ids=["whole", "pww"])
@pytest.mark.parametrize("role", ["--symbol", "--key"])
def test_a_field_that_holds_no_text_is_refused_in_one_line(tmp_path, capsys, role, pww):
    refuse_a_list_field(tmp_path, capsys, [role, "tags", *pww])


@pytest.mark.spark
def test_a_field_that_holds_no_text_is_refused_from_a_spark_task(tmp_path, capsys, spark):
    refuse_a_list_field(tmp_path, capsys, ["--symbol", "tags", "--engine", "spark",
                                           "--master", "local[2]"])
