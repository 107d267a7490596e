"""Byte order marks: how a file read as UTF-8 text is told from a UTF-16 or UTF-32 one.

Queries and inputs are UTF-8; a UTF-8 byte order mark (editors on Windows write one) is
skipped, and a text in a wider encoding is named, since every character of it would hold
a NUL byte.

>>> wide_encoding("ab".encode("utf-16"))[0]
'UTF-16'
>>> wide_encoding(b"ab") is None
True
"""

from __future__ import annotations

#: The UTF-8 byte order mark.
UTF8_BOM = b"\xef\xbb\xbf"

#: Byte order marks of the text encodings other than UTF-8 (UTF-32 first: its
#: little-endian mark begins with UTF-16's).
WIDE_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
             (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))


def wide_encoding(data: bytes) -> tuple[str, bytes] | None:
    """The encoding a UTF-16 or UTF-32 byte order mark opening ``data`` names, and the
    mark; None when no such mark opens it."""
    for bom, encoding in WIDE_BOMS:
        if data.startswith(bom):
            return encoding, bom
    return None
