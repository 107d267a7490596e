"""Plain sequences (.seq): one symbol per token, optional ``KEY:`` lines, comments,
malformed lines as counted rejects with their line number."""

from __future__ import annotations

import gzip

import pytest

from graphcep.io.readers import guess_format, read_edges
from graphcep.io.rejects import RejectLog
from graphcep.io.seq import SYMBOL_US, parse_seq


def rows(edges):
    return list(zip(edges.column("src").to_pylist(), edges.column("dst").to_pylist(),
                    strict=True))


def test_an_unkeyed_sequence_is_one_key_in_order():
    read = parse_seq("a c b\n\n# a comment line\n  c a d b  # trailing words\n", "x.seq")
    assert rows(read.edges) == [("", s) for s in "acbcadb"]
    assert read.edges.column("t").to_pylist() == [i * SYMBOL_US for i in range(7)]
    assert read.edges.column("seq").to_pylist() == list(range(1, 8))
    assert (read.lines, read.skipped, read.rejects.num_rows) == (4, 2, 0)


def test_keyed_lines_continue_their_key():
    read = parse_seq("h1: 22 80\nh2: 443\nx y\nh1: 22\r\n", "x.seq")
    assert rows(read.edges) == [("h1", "22"), ("h1", "80"), ("h2", "443"), ("", "x"),
                                ("", "y"), ("h1", "22")]
    assert read.edges.column("t").to_pylist()[-1] == 5 * SYMBOL_US  # stream position


def test_malformed_lines_are_rejects_with_their_line_and_reason():
    text = "\ufeffa b\nk:\n: a\nk:x y\nk: a b:c\nk : a\n\ufffd z\nk: # only a comment\nc\n"
    read = parse_seq(text, "x.seq")
    assert rows(read.edges) == [("", "a"), ("", "b"), ("", "c")]
    assert read.edges.column("t").to_pylist() == [0, SYMBOL_US, 2 * SYMBOL_US]
    assert [(r["file"], r["line"], r["reason"], r["text"])
            for r in read.rejects.to_pylist()] == [
        ("x.seq", 2, "key without symbols: 'k'", "k:"),
        ("x.seq", 3, "no key before ':' (a key is written 'KEY:')", ": a"),
        ("x.seq", 4, "colon inside a key: 'k:x' (a key is written 'KEY:', then the symbols)",
         "k:x y"),
        ("x.seq", 5, "colon in a symbol: 'b:c' (only a key, first on its line, ends with "
                     "':')", "k: a b:c"),
        ("x.seq", 6, "colon in a symbol: ':' (only a key, first on its line, ends with "
                     "':')", "k : a"),
        ("x.seq", 7, "invalid UTF-8", "\ufffd z"),
        ("x.seq", 8, "key without symbols: 'k'", "k: # only a comment"),
    ]
    assert (read.lines, read.skipped) == (9, 0)
    kinds = RejectLog()
    kinds.add(read.rejects)  # a summary groups them by what is wrong, not by ':'
    assert kinds.kinds() == {"key without symbols": 2, "no key before ':'": 1,
                             "colon inside a key": 1, "colon in a symbol": 2,
                             "invalid UTF-8": 1}


@pytest.mark.parametrize("text", ["", "\n\n", "# nothing\n"])
def test_empty_files_give_no_rows(text):
    read = parse_seq(text, "x.seq")
    assert read.edges.num_rows == 0 and read.rejects.num_rows == 0
    assert read.edges.schema.names == ["t", "src", "dst", "seq"]


def test_the_reader_takes_seq_files_by_name_and_positions_run_on_across_files(tmp_path):
    first, second = tmp_path / "1.seq", tmp_path / "2.seq.gz"
    first.write_bytes(b"a b\nk: \xff\n# c\n")
    second.write_bytes(gzip.compress(b"k: c\nd\n"))
    assert guess_format(first) == "seq" and guess_format(second) == "seq"
    result = read_edges([first, second])
    assert result.fmt == "seq" and rows(result.edges) == [("", "a"), ("", "b"), ("k", "c"),
                                                          ("", "d")]
    assert result.edges.column("t").to_pylist() == [i * SYMBOL_US for i in range(4)]
    assert [(r["file"], r["line"], r["reason"]) for r in result.rejects.to_pylist()] == [
        (str(first), 2, "invalid UTF-8")]
    assert (result.lines_read, result.skipped) == (5, 1)
    seqs = result.edges.column("seq").to_pylist()
    assert seqs[:2] == [1, 2] and seqs[2] > 1 << 40  # the second file's index in seq


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32"])
def test_a_file_opening_with_a_wide_byte_order_mark_is_refused_by_name(tmp_path, encoding):
    from graphcep.io.readers import InputError, read_edges_bytes

    path = tmp_path / "u.seq"
    path.write_text("a b a\nk: c\n", encoding=encoding)  # Python writes the mark first
    with pytest.raises(InputError, match=rf"u\.seq: UTF-{encoding[-2:]} text .*save it as UTF-8"):
        read_edges(path)
    with pytest.raises(InputError, match="UTF-"):  # as a stream receives the file
        read_edges_bytes("u.seq", path.read_bytes())


@pytest.mark.parametrize("fmt", ["seq", "tes", "syscall"])
def test_nul_bytes_are_rejects_never_symbols(tmp_path, fmt):
    path = tmp_path / f"n.{fmt}"
    path.write_bytes("a b a\n".encode("utf-16-le") + b"\nok\n")  # UTF-16 without a mark, then UTF-8
    result = read_edges(path)
    # no row holds a NUL; every line holding one is a reject that says why
    assert all("\x00" not in v for v in result.edges.column("src").to_pylist()
               + result.edges.column("dst").to_pylist())
    lines = {(r["line"], r["reason"].split(":")[0]) for r in result.rejects.to_pylist()}
    assert lines == {(1, "NUL byte"), (2, "NUL byte")}
    assert result.edges.num_rows == {"seq": 1, "tes": 1, "syscall": 1}[fmt]  # "ok"
