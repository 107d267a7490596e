"""Time-event sequences (.tes): pauses summed exactly, events as rows with an empty dst,
bad tokens as counted rejects."""

from __future__ import annotations

from graphcep.io.readers import read_edges
from graphcep.io.tes import parse_tes

S = 1_000_000


def test_pauses_sum_exactly_and_each_event_is_rounded_once():
    edges, rejects, lines = parse_tes("a 0.0000004 b 0.0000004 c\n0.0000002 d", "x.tes")
    assert edges.column("t").to_pylist() == [0, 0, 1, 1]  # 0.4, 0.8 -> 1, 1.0 µs
    assert edges.column("dst").to_pylist() == [""] * 4 and lines == 2
    assert rejects.num_rows == 0


def test_bad_tokens_are_rejects_with_their_line():
    text = "\ufeffa 1 b\n-1 c 99999999999999999999999 d\n\ufffdx 1.2.3 e"
    edges, rejects, _ = parse_tes(text, "x.tes")
    assert list(zip(edges.column("t").to_pylist(), edges.column("src").to_pylist(),
                    strict=True)) == [
        (0, "a"), (S, "b"), (S, "c"), (S, "d"), (S, "e")]  # the byte order mark is gone
    assert [(r["line"], r["reason"]) for r in rejects.to_pylist()] == [
        (2, "negative pause: '-1'"),
        (2, "pause past the range of times (2**62 µs): '99999999999999999999999'"),
        (3, "invalid UTF-8"),
        (3, "pause not a number: '1.2.3'")]


def test_rejected_pauses_are_summed_up_by_kind_not_by_value():
    from graphcep.io.rejects import RejectLog

    _, rejects, _ = parse_tes("a -1 b -2 c 1e400 d 1e401 e x.y 1.2.3 f", "x.tes")
    log = RejectLog()
    log.add(rejects)
    assert log.kinds() == {"negative pause": 2, "pause past the range of times": 2,
                           "pause not a number": 1}


def test_the_reader_takes_tes_files_by_name_and_invalid_bytes_are_rejects(tmp_path):
    path = tmp_path / "s.tes"
    path.write_bytes(b"a 1 \xff b\n")
    result = read_edges(path)
    assert result.edges.column("src").to_pylist() == ["a", "b"]
    assert result.rejects.to_pylist()[0]["reason"] == "invalid UTF-8"


def test_the_summary_counts_rejected_tokens_and_the_lines_they_are_on():
    from graphcep.io.rejects import RejectLog

    _, rejects, _ = parse_tes("a 1 b\nx -1 y -2 z -3\n-4 w\n", "x.tes")
    log = RejectLog()
    log.add(rejects, file="x.tes")
    # four tokens on two lines: not "4 lines rejected"
    assert log.summary() == "4 rejected on 2 lines: 4 × negative pause"
    one = RejectLog()
    one.add(parse_tes("x -1 y -2 z -3", "y.tes")[1], file="y.tes")
    assert one.summary() == "3 rejected on 1 line: 3 × negative pause"
