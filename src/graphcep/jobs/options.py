"""The options every query kind's job is loaded with, from the command line's parsed
options or the Python API's keyword arguments (:meth:`graphcep.api.Query.job`): one
translation, so ``graphcep run`` and ``Query.match`` load a query the same way.

The settings are named as the command line's options are (``window``, ``max_duration``,
``pww_base``...); a value is its text as given (seconds as text, turned into exact µs
here) or its number.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graphcep.events import seconds_to_us
from graphcep.patterns.subgraph import QueryError

#: The settings: a mapping named as the command line's options, or an argparse namespace
#: (its attributes are read).
Settings = Mapping[str, Any] | Any


def _settings(given: Settings) -> Mapping[str, Any]:
    return given if isinstance(given, Mapping) else vars(given)


def pww_options(given: Settings) -> tuple[int, int, int | None] | None:
    """``(L, T0, D)`` in records and µs from ``pww``, ``pww_base`` and
    ``pww_max_duration`` (None without ``pww``)."""
    settings = _settings(given)
    if settings.get("pww") is None:
        stray = [flag for flag, name in (("--pww-base", "pww_base"),
                                         ("--pww-max-duration", "pww_max_duration"))
                 if settings.get(name) is not None]
        if stray:
            raise QueryError(f"{', '.join(stray)} {'goes' if len(stray) == 1 else 'go'} "
                             "with --pww L (progressive window widening)")
        return None
    if settings.get("window") is not None:
        raise QueryError("--window bounds how long a match may last, and --pww finds matches "
                         "of any duration (of at most L records): give one of them")
    base = seconds_to_us(settings.get("pww_base") or "1")
    if base < 1:
        raise QueryError("--pww-base must be at least 1 µs")
    longest = settings.get("pww_max_duration")
    most = None if longest is None else seconds_to_us(longest)
    if most is not None and most < 1:  # no levels could be fixed by a zero duration
        raise QueryError("--pww-max-duration must be at least 1 µs (leave it out for no "
                         "bound on an instance's duration)")
    return settings["pww"], base, most


def state_bound(given: Settings) -> int | None:
    """``max_window_edges`` (``--max-window-edges``), checked (None: the engine's default)."""
    bound = _settings(given).get("max_window_edges")
    if bound is not None and bound < 1:
        raise QueryError("--max-window-edges must be at least 1")
    return bound


def job_options(given: Settings, fmt: str | None) -> dict[str, Any]:
    """The options :func:`graphcep.jobs.load` reads (seconds as µs; ``fmt`` the input's
    format, None where it is not known)."""
    settings = _settings(given)

    def seconds(name: str) -> int | None:
        text = settings.get(name)
        return None if text is None else seconds_to_us(text)

    plain = ("query_name", "window", "max_duration", "ddst_engine", "signature_p",
             "signature_seed", "ddst_report", "max_tokens", "nu_engine", "key", "symbol",
             "subs_engine")
    return {
        "fmt": fmt,
        **{name: settings.get(name) for name in plain},
        "window_us": seconds("window"),
        "max_duration_us": seconds("max_duration"),
        "homomorphic": bool(settings.get("homomorphic")),
        "anchored": bool(settings.get("anchored")),
        "max_window_edges": state_bound(settings),
        "pww": settings.get("pww") is not None,
    }
