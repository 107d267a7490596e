"""Exact time conversion, vectorized: decimal and ISO-8601 text to integer microseconds,
and microseconds back to exact seconds text."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.events import TimeFormatError
from graphcep.io.formats.schema import MAX_ABS_US, UNIT_DIGITS, ReaderOptions

_DECIMAL_RE = r"^(?P<sign>[+-]?)(?P<int>\d*)(?:\.(?P<frac>\d*))?$"
_ISO_RE = (
    r"^(?P<date>\d{4}-\d{2}-\d{2})"
    r"(?:[T ](?P<hm>\d{2}:\d{2})(?::(?P<sec>\d{2})(?:[.,](?P<frac>\d+))?)?)?"
    r"\s*(?P<tz>[Zz]|[+-]\d{2}(?::?\d{2})?)?$"
)


def short(text: str, limit: int = 40) -> str:
    """``repr`` of a value for a reject reason, cut so reasons stay one short line."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def unit_digits(unit: str | None) -> int:
    try:
        return UNIT_DIGITS[unit or "s"]
    except KeyError:
        raise ValueError(f"unknown time unit {unit!r}; use one of s, ms, us") from None


def scalar_to_us(text: str, unit: str = "s") -> int:
    """Exact slow path: one decimal string in ``unit`` -> integer microseconds.

    Rounds half-even, like :func:`graphcep.events.seconds_to_us`, but through
    :class:`~fractions.Fraction`, so it stays exact for any number of digits.

    Raises
    ------
    TimeFormatError
        Not a number, not finite, or ``|t| >= 2**62`` microseconds.
    """
    digits = unit_digits(unit)
    try:
        dec = Decimal(text.strip())
    except InvalidOperation:
        raise TimeFormatError(f"not a number: {short(text)}") from None
    if not dec.is_finite():
        raise TimeFormatError(f"not a finite number: {short(text)}")
    if dec.is_zero():
        return 0
    # Bounds before Fraction: "1e999999999" must not build a billion-digit integer.
    magnitude = dec.adjusted() + digits
    if magnitude >= 19:
        raise TimeFormatError(f"out of range: {short(text)}")
    if magnitude <= -2:
        return 0
    us = round(Fraction(dec) * 10**digits)  # round() on a Fraction is half-even
    if abs(us) >= MAX_ABS_US:
        raise TimeFormatError(f"out of range: {short(text)}")
    return us


def strings(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A plain ``string`` array (chunks combined, large types narrowed)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.type != pa.string():
        arr = arr.cast(pa.string())
    return arr


def bool_np(arr: pa.Array) -> np.ndarray:
    """Boolean Arrow array -> NumPy bool, nulls as False."""
    return pc.fill_null(arr, False).to_numpy(zero_copy_only=False).astype(bool)


def decimal_to_us(texts: pa.Array, unit: str | None = "s") -> tuple[np.ndarray, dict[int, str]]:
    """Convert decimal strings to exact integer microseconds.

    Parameters
    ----------
    texts
        String array of numbers in ``unit`` (``"1312964022.93089"``, ``"-3"``, ``".5"``).
    unit
        ``"s"``, ``"ms"`` or ``"us"``.

    Returns
    -------
    values, errors
        int64 microseconds (0 where invalid) and ``{row: message}`` for invalid rows.

    Notes
    -----
    Fast path, all vectorized: ``sign, int, frac`` are split off with a regular
    expression; the result is ``int * 10**k + frac[:k]`` plus one when the dropped digits
    are above one half, or exactly one half and the kept value is odd (half-even).
    """
    k = unit_digits(unit)
    texts = strings(texts)
    parts = pc.extract_regex(pc.ascii_trim_whitespace(texts), _DECIMAL_RE)
    sign = pc.fill_null(parts.field("sign"), "")
    ipart = pc.fill_null(parts.field("int"), "")
    fpart = pc.fill_null(parts.field("frac"), "")
    ilen = pc.utf8_length(ipart).to_numpy(zero_copy_only=False)
    flen = pc.utf8_length(fpart).to_numpy(zero_copy_only=False)
    # Integer parts up to 18 - k digits keep |us| < 10**18 < 2**62: no overflow possible.
    fast = bool_np(parts.is_valid()) & (ilen + flen > 0) & (ilen <= 18 - k)
    fast_arr = pa.array(fast)
    ints = pc.cast(pc.if_else(pc.and_(fast_arr, pa.array(ilen > 0)), ipart, "0"), pa.int64())
    mag = ints.to_numpy(zero_copy_only=False) * (10**k)
    if k:
        head = pc.utf8_rpad(pc.utf8_slice_codeunits(fpart, 0, k), k, "0")
        head = pc.cast(pc.if_else(fast_arr, head, "0" * k), pa.int64())
        mag = mag + head.to_numpy(zero_copy_only=False)
    mag = mag + _round_up(fpart, k, flen, mag, fast)
    values = np.where(sign.to_numpy(zero_copy_only=False) == "-", -mag, mag)
    values[~fast] = 0
    errors: dict[int, str] = {}
    for row in np.flatnonzero(~fast):
        text = texts[int(row)].as_py()
        if text is None:
            errors[int(row)] = "missing value"
            continue
        try:
            values[row] = scalar_to_us(text, unit or "s")
        except TimeFormatError as exc:
            errors[int(row)] = str(exc)
    return values.astype(np.int64, copy=False), errors


def _round_up(
    fpart: pa.Array, k: int, flen: np.ndarray, mag: np.ndarray, fast: np.ndarray
) -> np.ndarray:
    """1 where the fraction digits after position ``k`` round the magnitude up (half-even)."""
    up = np.zeros(len(mag), dtype=np.int64)
    rows = np.flatnonzero(fast & (flen > k))
    if len(rows) == 0:
        return up
    sub = fpart.take(pa.array(rows))
    digit = pc.cast(pc.utf8_slice_codeunits(sub, k, k + 1), pa.int64()).to_numpy()
    ties = digit == 5
    more = np.zeros(len(rows), dtype=bool)
    if ties.any():
        tie_rows = np.flatnonzero(ties)
        rest = pc.utf8_slice_codeunits(sub.take(pa.array(tie_rows)), k + 1)
        more[tie_rows] = bool_np(pc.match_substring_regex(rest, "[1-9]"))
    odd = (mag[rows] & 1) == 1
    up[rows] = ((digit > 5) | (ties & (more | odd))).astype(np.int64)
    return up


def iso_to_us(texts: pa.Array) -> tuple[np.ndarray, dict[int, str]]:
    """Convert ISO-8601 date-times to exact integer microseconds since the Unix epoch (UTC).

    Accepts ``YYYY-MM-DD``, ``YYYY-MM-DD[T ]HH:MM[:SS[.fff...]]`` with an optional ``Z`` or
    ``+HH[:MM]`` zone; no zone means UTC. Fractions beyond microseconds round half-even.
    Other spellings go through :meth:`datetime.fromisoformat` one by one.

    Returns
    -------
    values, errors
        As :func:`decimal_to_us`.
    """
    texts = strings(texts)
    parts = pc.extract_regex(pc.ascii_trim_whitespace(texts), _ISO_RE)
    matched = bool_np(parts.is_valid())
    hm = pc.fill_null(parts.field("hm"), "")
    hm = pc.if_else(pc.equal(hm, ""), "00:00", hm)
    sec = pc.fill_null(parts.field("sec"), "")
    sec = pc.if_else(pc.equal(sec, ""), "00", sec)
    date = pc.fill_null(parts.field("date"), "1970-01-01")
    base = pc.binary_join_element_wise(date, "T", hm, ":", sec, "")
    stamp = pc.strptime(base, format="%Y-%m-%dT%H:%M:%S", unit="s", error_is_null=True)
    # strptime rolls 02-30 over to 03-02; a date that does not print back is invalid.
    printed = pc.strftime(stamp, format="%Y-%m-%dT%H:%M:%S")
    ok = matched & bool_np(pc.equal(printed, base))
    seconds = pc.fill_null(stamp.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    frac = pc.fill_null(parts.field("frac"), "")
    frac_us, _ = decimal_to_us(pc.binary_join_element_wise("0.", frac, ""), "s")
    offset = _zone_offsets(pc.fill_null(parts.field("tz"), ""))
    values = (seconds - offset) * 1_000_000 + frac_us
    values[~ok] = 0
    errors: dict[int, str] = {}
    for row in np.flatnonzero(~ok):
        text = texts[int(row)].as_py()
        try:
            values[row] = scalar_iso_us(text)
        except TimeFormatError as exc:
            errors[int(row)] = str(exc)
    return values.astype(np.int64, copy=False), errors


def _zone_offsets(tz: pa.Array) -> np.ndarray:
    """Seconds east of UTC for ``Z`` / ``+HH`` / ``+HH:MM`` / ``+HHMM`` strings."""
    digits = pc.replace_substring_regex(tz, r"[^0-9]", "")
    digits = pc.utf8_rpad(digits, 4, "0")
    hours = pc.cast(pc.utf8_slice_codeunits(digits, 0, 2), pa.int64()).to_numpy()
    minutes = pc.cast(pc.utf8_slice_codeunits(digits, 2, 4), pa.int64()).to_numpy()
    negative = bool_np(pc.starts_with(tz, "-"))
    offset = hours * 3600 + minutes * 60
    return np.where(negative, -offset, offset)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def scalar_iso_us(text: str | None) -> int:
    """Slow path of :func:`iso_to_us` for spellings the regular expression does not cover."""
    if text is None:
        raise TimeFormatError("missing value")
    try:
        stamp = datetime.fromisoformat(text.strip())
    except ValueError:
        raise TimeFormatError(f"not an ISO-8601 date-time: {short(text)}") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    delta = stamp - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def time_to_us(texts: pa.Array, options: ReaderOptions) -> tuple[np.ndarray, dict[int, str]]:
    """Convert a time column following ``options.time_format`` and ``options.time_unit``."""
    fmt = options.time_format
    if fmt == "number":
        return decimal_to_us(texts, options.time_unit)
    if fmt == "iso":
        return iso_to_us(texts)
    if fmt != "auto":
        raise ValueError(f"unknown time_format {fmt!r}; use number, iso or auto")
    values, errors = decimal_to_us(texts, options.time_unit)
    if errors:
        rows = np.fromiter(errors, dtype=np.int64)
        iso_values, iso_errors = iso_to_us(strings(texts).take(pa.array(rows)))
        for j, row in enumerate(rows):
            if j in iso_errors:
                text = strings(texts)[int(row)].as_py() or ""
                errors[int(row)] = f"neither a number nor an ISO-8601 date-time: {short(text)}"
            else:
                values[row] = iso_values[j]
                del errors[int(row)]
    return values, errors


def format_seconds_array(us: pa.Array | np.ndarray) -> pa.Array:
    """Vectorized :func:`graphcep.events.format_seconds`: microseconds -> exact seconds text.

    >>> format_seconds_array(np.array([9_840_000, -1, 5_000_000])).to_pylist()
    ['9.84', '-0.000001', '5']
    """
    values = np.asarray(us, dtype=np.int64)
    whole, frac = np.divmod(np.abs(values), 1_000_000)
    whole_s = pa.array(whole).cast(pa.string())
    frac_s = pc.utf8_rtrim(pc.utf8_lpad(pa.array(frac).cast(pa.string()), 6, "0"), "0")
    text = pc.if_else(
        pa.array(frac == 0), whole_s, pc.binary_join_element_wise(whole_s, frac_s, ".")
    )
    signed = pc.binary_join_element_wise("-", text, "")
    return pc.if_else(pa.array(values < 0), signed, text)


#: Seconds per tick of each unit a number may count (``ns``: only named, never read).
SECONDS_PER_TICK = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_UNIT_WORDS = {"s": "seconds", "ms": "milliseconds", "us": "microseconds",
               "ns": "nanoseconds"}
#: Epoch times a stream of today plausibly holds: 1990-01-01 to 2100-01-01 (UTC).
EPOCH_SPAN = (631_152_000, 4_102_444_800)
_LAST_SECOND = 253_402_300_799  # 9999-12-31 23:59:59 UTC, the last datetime can show


def _epoch_like(low: float, high: float) -> bool:
    return EPOCH_SPAN[0] <= low and high < EPOCH_SPAN[1]


def _when(seconds: float) -> str:
    """A time in seconds since the epoch as a date, or a year past 9999."""
    if abs(seconds) > _LAST_SECOND:
        return f"year {1970 + seconds / 31_556_952:,.0f}"
    return datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%d %H:%M:%S")


def implausible_time_unit(ticks: np.ndarray, unit: str) -> str | None:
    """Whether numbers read as times in ``unit`` cannot be what their writer meant.

    Parameters
    ----------
    ticks
        The times as the file writes them (integers counting ``unit``; a fraction is
        irrelevant here).
    unit
        The unit assumed for them: ``"s"``, ``"ms"`` or ``"us"``.

    Returns
    -------
    str or None
        ``None`` when the reading may be right; otherwise the reason, naming the
        option to pass (``... pass --time-unit ms``).

    Notes
    -----
    A reading is refused only when it is implausible *and* another reading is plausible:
    read in ``unit`` the times are no epoch times of 1990 to 2100 (:data:`EPOCH_SPAN`),
    while read in another unit all of them are. Epoch milliseconds read as seconds fall
    past the year 9999; epoch seconds read as microseconds fall in 1970's first hours.
    Relative times (a stream starting at 0, SNAP's seconds from an experiment's start)
    read as no epoch time in any unit, so they are never refused: small times are no
    proof of a wrong unit. The ranges of two units never both fit the span (they differ
    by a factor of 1000, the span by 6.5), so the unit named is the only candidate.

    >>> "pass --time-unit ms" in implausible_time_unit(np.array([1_082_040_961_000]), "s")
    True
    >>> implausible_time_unit(np.array([0, 10_000_000]), "s") is None
    True
    """
    ticks = np.asarray(ticks)
    if ticks.size == 0:
        return None
    low, high = float(ticks.min()), float(ticks.max())
    here = SECONDS_PER_TICK[unit]
    if _epoch_like(low * here, high * here):
        return None
    likely = next((u for u, per in SECONDS_PER_TICK.items()
                   if u != unit and _epoch_like(low * per, high * per)), None)
    if likely is None:
        return None
    per = SECONDS_PER_TICK[likely]
    read = (f"times read as {_UNIT_WORDS[unit]} fall in {_when(low * here)} to "
            f"{_when(high * here)}; as {_UNIT_WORDS[likely]} they are "
            f"{_when(low * per)} to {_when(high * per)} UTC")
    if likely == "ns":
        return f"{read}: graphcep reads s, ms or us: write them in microseconds"
    return f"{read}: pass --time-unit {likely} (or --time-unit {unit} to keep them)"
