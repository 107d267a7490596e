"""How match outputs write times: exact decimal seconds (the default), or ISO-8601
date-times in UTC (``--time-format iso``: the stream's times are epoch times).

A :class:`Clock` says which, for one value (the console, pictures, a JSON line written
row by row) or a whole column (:meth:`Clock.json_column`, the JSON lines built column by
column). Durations stay in seconds under either: a duration is no date.

Example
-------
>>> SECONDS.text(1_500_000), ISO.text(1_082_040_961_250_000)
('1.5s', '2004-04-15T14:56:01.25Z')
>>> ISO.json_column(pa.array([0, None, 1_000_000])).to_pylist()
['"1970-01-01T00:00:00Z"', 'null', '"1970-01-01T00:00:01Z"']
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.events import format_iso, format_seconds
from graphcep.io.json_lines import seconds_text

#: A trailing run of zeros after a decimal point, and the point when nothing else is left.
_FRACTION_ZEROS = r"(\.\d*?)0+Z$"
_EMPTY_FRACTION = r"\.Z$"


@dataclass(frozen=True)
class Clock:
    """Times as seconds (``iso=False``) or as ISO-8601 date-times in UTC."""

    iso: bool = False

    def text(self, us: int) -> str:
        """A time as people read it: ``12.5s``, or ``2004-04-15T14:56:01.25Z``."""
        return format_iso(us) if self.iso else f"{format_seconds(us)}s"

    def json(self, us: int | None) -> str:
        """A time as a JSON value: a number of seconds, or an ISO string (``null``)."""
        if us is None:
            return "null"
        return f'"{format_iso(us)}"' if self.iso else format_seconds(us)

    def json_column(self, us: pa.Array | pa.ChunkedArray) -> pa.Array:
        """:meth:`json` of every value of an int64 column of µs, column at once."""
        if isinstance(us, pa.ChunkedArray):
            us = us.combine_chunks()
        valid = us.is_valid()
        filled = pc.fill_null(us.cast(pa.int64()), 0)
        text = iso_text(filled) if self.iso else seconds_text(filled)
        if self.iso:
            text = pc.binary_join_element_wise('"', text, '"', "")
        return pc.if_else(valid, text, "null")


def iso_text(us: pa.Array) -> pa.Array:
    """:func:`~graphcep.events.format_iso` of every value of an int64 column (no nulls),
    column at once (a time outside the years 1 to 9999 row by row)."""
    values = np.asarray(us.to_numpy(zero_copy_only=False), dtype=np.int64)
    inside = (values >= _FIRST_US) & (values <= _LAST_US)
    if not inside.all():
        return pa.array([format_iso(int(v)) for v in values], pa.string())
    stamps = pa.array(values).cast(pa.timestamp("us"))
    text = pc.binary_join_element_wise(pc.strftime(stamps, format="%Y-%m-%dT%H:%M:%S"),
                                       "Z", "")
    text = pc.replace_substring_regex(text, _FRACTION_ZEROS, r"\1Z")
    return pc.replace_substring_regex(text, _EMPTY_FRACTION, "Z")


#: The µs of 0001-01-01 and of the last µs of 9999 (what ISO-8601 dates without a sign
#: hold).
_FIRST_US = -62_135_596_800_000_000
_LAST_US = 253_402_300_799_999_999

#: The default clock, and the ISO one.
SECONDS = Clock()
ISO = Clock(iso=True)


def clock_for(time_format: str | None) -> Clock:
    """The clock of outputs for the input's ``--time-format``: ISO when the input's
    times are ISO date-times (``auto`` may read numbers as well: seconds)."""
    return ISO if time_format == "iso" else SECONDS
