"""The format a file's first lines have the shape of (:func:`shape_of`), for the hint a
file gets when no line of it reads as the format it was read as: a VAST file read as
``csv`` is told to pass ``--format vast``, not to change its time format."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from graphcep.io.formats.schema import NETFLOW5_FIELDS, VAST_FIELDS, InputError

_PARQUET_MAGIC = "PAR1"


def is_vast_line(line: str) -> bool:
    """A VAST line: 19 comma-separated fields (20 with a leading ``Label``), or a VAST
    header (``TimeSeconds`` first or second)."""
    fields = line.split(",")
    named = any(f.strip().lower() == "timeseconds" for f in fields[:2])
    return named or len(fields) in (len(VAST_FIELDS), len(VAST_FIELDS) + 1)


#: The first characters (as decoded with replacement) of compressed files graphcep does not
#: decompress, and what each is.
_PACKED_MAGIC = (("BZh", "bzip2-compressed"), ("\ufffd7zXZ\x00", "xz-compressed"),
                 ("PK\x03\x04", "a zip archive"), ("(\ufffd/\ufffd", "zstd-compressed"),
                 ("7z\ufffd\ufffd", "a 7-zip archive"))


def packed_as(head: Sequence[str]) -> str | None:
    """What a file whose text is no text is (a tar archive, bzip2, xz, zstd or zip
    compression), from its first lines as decoded with replacement characters, or
    ``None``. Read as lines such a file is garbage, or (a tar archive) its members'
    lines with a header glued to each member's first line.

    >>> packed_as(["BZh91AY&SY\ufffd"])
    'bzip2-compressed'
    >>> packed_as(["1 2 1082040961"]) is None
    True
    """
    if not head:
        return None
    first = head[0]
    if first[257:262] == "ustar" and "\x00" in first[:257]:
        return "a tar archive"
    return next((what for magic, what in _PACKED_MAGIC if first.startswith(magic)), None)


def refuse_packed(head: Sequence[str], name: str) -> None:
    """An :class:`InputError` for a file that is an archive or a compression other than
    gzip (:func:`packed_as`), before any of its lines is read as edges."""
    if (what := packed_as(head)) is not None:
        raise InputError(f"{name}: {what}: graphcep reads text, plain or gzip-compressed: "
                         "extract it (or recompress it with gzip) and pass the files")


def shape_of(head: Sequence[str]) -> str | None:
    """The format the first lines of a file look like, or ``None`` when they look like
    none (text that is no edge list).

    The first line that is neither blank nor a comment decides: a Parquet file's magic
    bytes -> ``parquet``; a JSON object -> ``jsonl``, or the collector's format whose
    flow it is (:func:`json_shape`); comma-separated, 19 or 20 fields
    or a VAST header -> ``vast``, 24 fields -> ``netflow5``, 3 or more -> ``csv``; 3 or
    more tab-separated fields -> ``tsv``; 3 or more whitespace-separated fields -> ``snap``.

    >>> shape_of(["0,1312964022.9,2011-08-10 02:13:42" + ",x" * 17])
    'vast'
    >>> shape_of(["# comment", "1 2 1082040961"])
    'snap'
    """
    if head and head[0].startswith(_PARQUET_MAGIC):
        return "parquet"
    line = next((ln.rstrip("\r\n") for ln in head
                 if ln.strip() and not ln.lstrip().startswith(("#", "%"))), None)
    if line is None:
        return None
    if line.lstrip().startswith("{"):
        try:
            obj = json.loads(line)
        except ValueError:
            return None
        return json_shape(obj) if isinstance(obj, dict) else None
    if line.count(",") >= 2:
        if is_vast_line(line):
            return "vast"
        return "netflow5" if line.count(",") + 1 == len(NETFLOW5_FIELDS) else "csv"
    if line.count("\t") >= 2:
        return "tsv"
    return "snap" if len(line.split()) >= 3 else None


#: Keys that say which collector wrote a JSON flow, per format.
_FLOW_KEYS = (("goflow2-json", {"src_addr", "dst_addr"}), ("zeek-conn", {"id.orig_h", "id.resp_h"}),
              ("zeek-conn", {"id_orig_h", "id_resp_h"}), ("pmacct", {"ip_src", "ip_dst"}))


def json_shape(obj: dict) -> str:
    """The JSON format an object is a record of: a collector's flow (its address keys),
    a tagged Zeek record (``{"conn": {...}}``), or graphcep's ``jsonl``.

    >>> json_shape({"ip_src": "10.0.0.1", "ip_dst": "10.0.0.2"}), json_shape({"t": 1})
    ('pmacct', 'jsonl')
    """
    if len(obj) == 1 and isinstance(obj.get("conn"), dict):
        obj = obj["conn"]
    return next((fmt for fmt, keys in _FLOW_KEYS if keys <= obj.keys()), "jsonl")


def is_flow_messages(head: bytes, most: int = 8) -> bool:
    """Whether a stream opens with goflow2 protobuf messages, length-prefixed (each
    perhaps followed by a ``\\n``): its first frames (up to ``most``) are whole and
    decode without a reject."""
    from graphcep.io.formats.flow_pb import decode_messages, frame_delimited  # numba

    data = np.frombuffer(head, np.uint8)
    for separator in (True, False):
        starts, ends, _, broken = frame_delimited(data, 0, len(data), separator)
        if len(starts) and not (broken and len(starts) < most):
            _, reasons = decode_messages(data, starts[:most], ends[:most])
            if not reasons:
                return True
    return False


__all__ = ["is_flow_messages", "is_vast_line", "json_shape", "packed_as", "refuse_packed",
           "shape_of"]
