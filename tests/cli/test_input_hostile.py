"""Inputs written as a user would write them, beyond the common mistakes: each gives the
right answer or one clear line and a non-zero exit, never a silently wrong answer.

Counts come from the plain-Python counter of :mod:`tests.cli.test_college_msg` (per-vertex
time lists and ``bisect``), which agrees with the published 1,653 triangles within one hour.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_college_msg import HOUR, count_triangles
from tests.cli.test_input_guesses import run, summary


def test_snap_milliseconds_read_as_seconds_are_refused_naming_the_unit(
        tmp_path, query, events, capsys):
    data = tmp_path / "college_ms.txt"
    data.write_text("".join(f"{s} {d} {t * 1000}\n" for s, d, t in events))
    assert run(tmp_path, query, [str(data)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"graphcep: {data}: times read as seconds fall in year ")
    assert "pass --time-unit ms" in line


def test_snap_milliseconds_with_their_unit_give_the_count(
        tmp_path, query, events, triangles, capsys):
    data = tmp_path / "college_ms.txt"
    data.write_text("".join(f"{s} {d} {t * 1000}\n" for s, d, t in events))
    assert run(tmp_path, query, [str(data)], "--time-unit", "ms") == 0
    assert summary(capsys.readouterr().out)["matches"] == triangles


def write_parquet_frame(path: Path, events, t_of) -> Path:
    """A Parquet file as pandas writes it: int64 columns src, dst, t, no graphcep unit."""
    import pandas as pd

    frame = pd.DataFrame(events, columns=["src", "dst", "t"])
    frame["t"] = t_of(frame["t"])
    frame.to_parquet(path)
    return path


def test_parquet_relative_integer_times_say_the_unit_they_are_read_in(
        tmp_path, query, events, triangles, capsys):
    # seconds from the first message: no epoch time in any unit, so nothing can refuse
    # them, and read as microseconds they match as if the stream lasted 17 seconds
    data = write_parquet_frame(tmp_path / "rel.parquet", events, lambda t: t - t.min())
    assert run(tmp_path, query, [str(data)]) == 0
    (note,) = capsys.readouterr().err.splitlines()
    assert note.startswith(f"graphcep: note: {data}: the integer times of column 't' carry "
                           "no unit and are read as microseconds")
    assert "pass --time-unit s" in note
    assert run(tmp_path, query, [str(data)], "--time-unit", "s") == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert summary(captured.out)["matches"] == triangles


def test_parquet_epoch_microseconds_without_unit_are_read_without_a_note(
        tmp_path, query, events, triangles, capsys):
    data = write_parquet_frame(tmp_path / "us.parquet", events, lambda t: t * 1_000_000)
    assert run(tmp_path, query, [str(data)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert summary(captured.out)["matches"] == triangles


@pytest.mark.parametrize(("header", "order"), [
    ("timestamp,sender,receiver", "t,src,dst"),
    ("t,dst,src", "t,dst,src"),
])
def test_no_header_on_a_header_placing_the_fields_otherwise_is_refused(
        tmp_path, query, events, capsys, header, order):
    data = tmp_path / "named.csv"
    place = {"t": 2, "src": 0, "dst": 1}
    rows = [",".join(str(e[place[c]]) for c in order.split(",")) for e in events]
    data.write_text(header + "\n" + "".join(r + "\n" for r in rows))
    assert run(tmp_path, query, [str(data)], "--no-header") == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"graphcep: {data}: line 1 (")
    assert "drop --no-header, or pass --columns " in line


def test_no_header_on_a_header_in_the_headerless_places_rejects_line_1_only(
        tmp_path, query, events, triangles, capsys):
    data = tmp_path / "named.csv"
    data.write_text("src,dst,t\n" + "".join(f"{s},{d},{t}\n" for s, d, t in events))
    assert run(tmp_path, query, [str(data)], "--no-header") == 0
    result = summary(capsys.readouterr().out)
    assert (result["rejected"], result["matches"]) == (1, triangles)


def _tar(body: bytes, mode: str) -> bytes:
    import io
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode=mode) as archive:
        member = tarfile.TarInfo("college.txt")
        member.size = len(body)
        archive.addfile(member, io.BytesIO(body))
    return out.getvalue()


def _zip(body: bytes) -> bytes:
    import io
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("college.txt", body)
    return out.getvalue()


def _packed(kind: str, body: bytes) -> bytes:
    import bz2
    import lzma

    return {"tar": lambda: _tar(body, "w"), "tgz": lambda: _tar(body, "w:gz"),
            "bz2": lambda: bz2.compress(body), "xz": lambda: lzma.compress(body),
            "zip": lambda: _zip(body)}[kind]()


@pytest.mark.parametrize(("kind", "what"), [
    ("tar", "a tar archive"), ("tgz", "a tar archive"), ("bz2", "bzip2-compressed"),
    ("xz", "xz-compressed"), ("zip", "a zip archive"),
])
def test_an_archive_or_other_compression_is_refused_naming_what_it_is(
        tmp_path, query, events, capsys, kind, what):
    # a tar archive read as lines loses each member's first line (glued to its header)
    # and reads the rest, exit 0; the others gave rejects hinting at a wrong format
    body = "".join(f"{s} {d} {t}\n" for s, d, t in events[:2000]).encode()
    data = tmp_path / f"college.{kind}"
    data.write_bytes(_packed(kind, body))
    assert run(tmp_path, query, [str(data)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (f"graphcep: {data}: {what}: graphcep reads text, plain or "
                    "gzip-compressed: extract it (or recompress it with gzip) and pass the files")


@pytest.mark.parametrize("kind", ["bz2", "tar"])
def test_spark_refuses_an_archive_or_other_compression_alike(spark, tmp_path, events, kind):
    from graphcep.io.formats import InputError
    from graphcep.runtime.spark import read_edges_spark

    body = "".join(f"{s} {d} {t}\n" for s, d, t in events[:2000]).encode()
    data = tmp_path / f"college.{kind}"
    data.write_bytes(_packed(kind, body))
    with pytest.raises(InputError, match=r"^.*college\.\w+: (bzip2-compressed|a tar archive): "
                                         "graphcep reads text"):
        read_edges_spark(spark, data, "snap")


def test_a_directory_says_which_subdirectories_and_notes_it_did_not_read(
        tmp_path, query, events, capsys):
    folder = tmp_path / "data"
    (folder / "more").mkdir(parents=True)
    half = len(events) // 2
    (folder / "part1.txt").write_text("".join(f"{s} {d} {t}\n" for s, d, t in events[:half]))
    # the subdirectory's edges are not read: the count is that of the first half alone
    (folder / "more" / "part2.txt").write_text(
        "".join(f"{s} {d} {t}\n" for s, d, t in events[half:]))
    for note in ("NOTES.txt", "checksums.sha256", ".gitkeep", ".hidden"):
        (folder / note).write_text("a b c\n")
    assert run(tmp_path, query, [str(folder)]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        f"graphcep: note: skipped 2 files of the input directories, which hold no snap data: "
        f"{folder / 'NOTES.txt'}, {folder / 'checksums.sha256'}",
        "graphcep: note: skipped 1 subdirectory of the input directories (subdirectories are "
        f"not read; pass them as inputs): {folder / 'more'}/",
    ]
    result = summary(captured.out)
    assert (result["rejected"], result["matches"]) == (0, count_triangles(events[:half], HOUR))


def test_a_directory_of_subdirectories_only_is_one_line(tmp_path, query, capsys):
    folder = tmp_path / "dataset"
    (folder / "part=0").mkdir(parents=True)
    (folder / "part=0" / "edges.txt").write_text("1 2 3\n")
    assert run(tmp_path, query, [str(folder)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith("(only part=0/: notes, files of another format and subdirectories "
                         "are not read)")


@pytest.mark.parametrize("options", [("--symbol", "src"), ("--key", "dst", "--symbol", "dst")])
def test_a_key_and_symbol_of_the_same_field_are_refused(tmp_path, capsys, options):
    subs = tmp_path / "s.subs"
    subs.write_text("pp: @a.@b.@a\n")
    data = tmp_path / "x.csv"
    data.write_text("src,dst,t\n1,2,1\n2,1,2\n1,2,3\n")
    assert run(tmp_path, subs, [str(data)], *options, command="subscribe") == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "--key and --symbol name the same field" in line


@pytest.mark.parametrize("header", ["src , dst , t", "from , to , time"])
def test_spaces_around_the_commas_are_no_part_of_the_vertex_ids(
        tmp_path, query, events, triangles, capsys, header):
    # "1 , 2 , 5" kept "1 " as a source and " 1 " as a destination: two vertices, and no
    # triangle ever closed (0 matches, exit 0)
    data = tmp_path / "spaced.csv"
    data.write_text(header + "\n" + "".join(f"{s} , {d} , {t}\n" for s, d, t in events))
    assert run(tmp_path, query, [str(data)]) == 0
    result = summary(capsys.readouterr().out)
    assert (result["rejected"], result["matches"]) == (0, triangles)
