"""Jobs: one module per semantics binding a pattern to what the runtimes need, and the
registry that loads any query file into the right one.

Adding a semantics means adding a language module (``lang/``), a pattern module
(``patterns/``), an engine package (``engines/``) and a job module here with ``load``,
``accepts`` and ``from_pattern`` -- plus one :class:`JobKind` line in :data:`KINDS`. No
runtime changes: they see only :class:`~graphcep.jobs.base.ReplayJob`.

Example
-------
>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "pair.ddst")
>>> _ = open(path, "w").write("VERTICES A, B; EDGES x: A -> B; WITHIN 5 s")
>>> kind_of(path).name
'ddst'
>>> load(path, {}).extent()
Extent(size=5000000, unit='us')
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from graphcep.jobs.base import DeclaredSource, Extent, JobBase, ReplayJob, cell_query_or_none
from graphcep.patterns.subgraph import QueryError

__all__ = ["KINDS", "JobKind", "ReplayJob", "JobBase", "Extent", "DeclaredSource",
           "as_job", "cell_query_or_none", "kind_named", "kind_of", "load", "said_kind"]


@dataclass(frozen=True)
class JobKind:
    """One semantics as the registry sees it: its job module (imported on use, so a run
    loads only the semantics it runs), the file suffixes of its queries, and how to tell
    its text from another kind's when the suffix says nothing (``"module:function"``)."""

    name: str
    module: str
    suffixes: tuple[str, ...]
    sniff: str | None = None
    #: what its queries are called in messages
    label: str = ""
    #: the command-line options (destinations) only this kind's jobs read
    options: tuple[str, ...] = ()

    def job_module(self) -> ModuleType:
        return importlib.import_module(self.module)

    def recognises(self, text: str) -> bool:
        if self.sniff is None:
            return False
        module, function = self.sniff.split(":")
        test: Callable[[str], bool] = getattr(importlib.import_module(module), function)
        return test(text)


#: Every semantics graphcep runs. Text no kind recognises is read as SAL (the last kind),
#: whose parser then says what is wrong with it.
KINDS: tuple[JobKind, ...] = (
    JobKind("ddst", "graphcep.jobs.ddst", (".ddst",), "graphcep.lang.ddst:looks_like_ddst",
            "DDST query", ("ddst_engine", "signature_p", "signature_seed", "ddst_report",
                           "max_window_edges")),
    JobKind("nu", "graphcep.jobs.nu", (".nu", ".regex", ".autom"),  # .regex: MaTiNA's
            "graphcep.lang.nu:looks_like_nu", "ν-expression",
            ("max_tokens", "anchored", "nu_engine")),
    JobKind("subs", "graphcep.jobs.sequences", (".subs",),
            "graphcep.lang.sequences:looks_like_subscriptions",
            "subscriptions file", ("key", "symbol", "subs_engine")),
    # a directory of query files of every kind (``--rules DIR``): each kind's options
    JobKind("rules", "graphcep.jobs.rules", (), None, "rules directory",
            ("ddst_engine", "signature_p", "signature_seed", "ddst_report", "max_tokens",
             "anchored", "nu_engine", "key", "symbol", "subs_engine", "query_name", "window",
             "max_duration", "homomorphic", "max_window_edges")),
    JobKind("sal", "graphcep.jobs.subgraph", (".sal",), None, "SAL program",
            ("query_name", "window", "max_duration", "homomorphic", "max_window_edges")),
)


#: The kind-specific options in the order messages name them (as --help lists them).
_OPTION_ORDER = ("query_name", "window", "max_duration", "homomorphic", "max_window_edges",
                 "ddst_engine", "signature_p", "signature_seed", "ddst_report", "max_tokens",
                 "anchored", "nu_engine", "key", "symbol", "subs_engine")


def kind_of(path: str) -> JobKind:
    """The kind of the query file ``path``: by suffix, else by its text, else SAL."""
    return said_kind(path) or KINDS[-1]


def said_kind(path: str) -> JobKind | None:
    """The kind the query file ``path`` says it is, by its suffix, else by its text (None:
    neither says; a missing file says nothing but its suffix). A directory is a directory
    of subscriptions files (the only kind read from several files)."""
    if Path(path).is_dir():
        return kind_named("subs")
    suffix = Path(path).suffix.lower()
    for kind in KINDS:
        if suffix in kind.suffixes:
            return kind
    try:
        text = Path(path).read_text(encoding="utf-8-sig", errors="replace")
    except OSError:
        text = ""  # the parser reports the missing file
    return next((kind for kind in KINDS if kind.recognises(text)), None)


def kind_named(name: str) -> JobKind:
    """The kind called ``name`` (``"subs"``, ...)."""
    return next(kind for kind in KINDS if kind.name == name)


def load(path: str, options: Mapping[str, Any], kind: JobKind | None = None) -> ReplayJob:
    """The job of the query file ``path``, with the command line's ``options`` (names as
    its option destinations: ``fmt``, ``query_name``, ``window_us``, ``ddst_engine``, ...);
    an option the kind cannot use is refused with a :class:`QueryError`. ``kind`` reads
    the file as that kind, whatever its name says (default :func:`kind_of`)."""
    kind = kind or kind_of(path)
    module = kind.job_module()
    refuse_foreign_options(kind, options, getattr(module, "NOT_FOR", {}))
    return module.load(path, options)


def refuse_foreign_options(kind: JobKind, options: Mapping[str, Any],
                           reasons: Mapping[str, str]) -> None:
    """Refuse, in one :class:`QueryError`, options given for other kinds of query: an
    option another kind reads and ``kind`` does not is never silently ignored. ``reasons``
    says what the kind does instead, where it has something to say."""
    # a rules directory reads every kind's options: the owner named is the file kind's
    owners = {option: other for other in KINDS if other.suffixes for option in other.options}
    foreign = [option for option in sorted(owners, key=_OPTION_ORDER.index)
               if options.get(option) not in (None, False) and option not in kind.options]
    if not foreign:
        return
    flags = ", ".join(f"--{option.replace('_', '-')}" for option in foreign)
    why = "; ".join(reasons.get(option) or f"it is an option of a {owners[option].label}"
                    for option in foreign)
    raise QueryError(f"{flags} {'does' if len(foreign) == 1 else 'do'} not apply to a "
                     f"{kind.label} ({why})")


def as_job(pattern: Any, **options: Any) -> ReplayJob:
    """A pattern object (a SAL query or program, a DDST query, ...) as a job with default
    options; a job is returned as it is."""
    for kind in KINDS:
        module = kind.job_module()
        if module.accepts(pattern):
            return module.from_pattern(pattern, **options)
    if hasattr(pattern, "new_engine") and hasattr(pattern, "extent"):
        return pattern
    raise TypeError(f"not a pattern graphcep can run: {type(pattern).__name__}")
