"""Subscriptions that change while ``graphcep stream`` runs.

A :class:`SubscriptionWatch` watches a subscriptions source (a ``.subs`` file or a
directory of them, :func:`~graphcep.lang.sequences.parse_subscriptions_source`). Before
each micro-batch the stream asks it for :meth:`~SubscriptionWatch.changes`: it re-reads
the source when its content changed (a hash of the files' names and bytes), diffs the
subscriptions it holds against the engine's live ones -- ids added, ids removed, ids
whose pattern changed (removed, then added) -- and applies the difference through the
engine's ``remove`` and ``add`` before the batch's edges are pushed.

**Stream position.** A key's position is the number of its edges the engine has read
(the edges released to it, in ``(t, seq)`` order). A subscription added when the engine
has read ``n`` edges reports exactly the occurrences whose first edge is the ``n``-th or
later -- for each key, those starting at or after the key's position at the add; a
removed one reports nothing from then on (what earlier micro-batches reported stays).
A changed pattern is both: its id reports the new pattern's occurrences from then on.

**A bad edit** (a syntax error, an id defined twice, a vanished file) keeps the set in
force and gives one line naming ``file:line:col`` -- once per content, not per batch; the
next good edit is applied.

The engine's subscriptions are part of its checkpointed state, so a restart resumes
with the set in force when the checkpoint was written, then applies whatever the source
holds now.

Example
-------
>>> import os, tempfile
>>> from graphcep.engines.sequences.engine import SequenceEngine
>>> path = os.path.join(tempfile.mkdtemp(), "s.subs")
>>> _ = open(path, "w").write("a: x.y\\nb: @v.@v")
>>> watch, engine = SubscriptionWatch(path), SequenceEngine()
>>> watch.changes(engine)
['subscriptions: +2 -0 (s.subs, from stream position 0): added a, b']
>>> _ = open(path, "w").write("a: x.@w\\nc: z")
>>> watch.changes(engine)
['subscriptions: +2 -2 (s.subs, from stream position 0): added c; changed a; removed b']
>>> _ = open(path, "w").write("a: x..y\\nc: z")
>>> watch.changes(engine)
["subscriptions: ...s.subs:1:6: subscription 'a': expected a constant or @variable, found \
'.'; keeping the 2 subscriptions in force"]
>>> watch.changes(engine), sorted(engine.patterns)
([], ['a', 'c'])
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from graphcep.lang.errors import QuerySyntaxError
from graphcep.lang.sequences import parse_subscription_texts, read_subscriptions_source
from graphcep.patterns.sequences import SequencePattern

__all__ = ["LiveSubscriptions", "SubscriptionChange", "SubscriptionWatch"]

#: ids named in a change's line, at most
_SHOWN = 8


class LiveSubscriptions(Protocol):
    """An engine whose subscriptions change between pushes
    (:class:`~graphcep.engines.sequences.engine.KeyedSequenceEngine`)."""

    patterns: Mapping[str, SequencePattern]
    edges_seen: int

    def add(self, sid: str, pattern: SequencePattern) -> None: ...

    def remove(self, sid: str) -> None: ...


@dataclass(frozen=True)
class SubscriptionChange:
    """What turns one subscription set into another: ids to remove, then to add (an id
    whose pattern changed is in both)."""

    removed: tuple[str, ...]
    added: tuple[tuple[str, SequencePattern], ...]

    @classmethod
    def between(cls, live: Mapping[str, SequencePattern],
                wanted: Mapping[str, SequencePattern]) -> SubscriptionChange:
        """The change from ``live`` to ``wanted`` (ids in ``wanted``'s order)."""
        changed = {sid for sid, p in wanted.items() if sid in live and live[sid] != p}
        removed = tuple(sid for sid in live if sid not in wanted or sid in changed)
        added = tuple((sid, p) for sid, p in wanted.items() if sid not in live or sid in changed)
        return cls(removed, added)

    def __bool__(self) -> bool:
        return bool(self.removed or self.added)

    def apply(self, engine: LiveSubscriptions) -> None:
        """Remove, then add, through the engine's own ``remove`` and ``add``."""
        for sid in self.removed:
            engine.remove(sid)
        for sid, pattern in self.added:
            engine.add(sid, pattern)

    def describe(self) -> tuple[str, str]:
        """``("+A -R", "added ...; changed ...; removed ...")`` (a changed id counts in
        both A and R)."""
        gone, come = set(self.removed), {sid for sid, _ in self.added}
        parts = (("added", [sid for sid, _ in self.added if sid not in gone]),
                 ("changed", [sid for sid, _ in self.added if sid in gone]),
                 ("removed", [sid for sid in self.removed if sid not in come]))
        detail = "; ".join(f"{what} {_names(ids)}" for what, ids in parts if ids)
        return f"+{len(self.added)} -{len(self.removed)}", detail


def _names(ids: list[str]) -> str:
    shown = ", ".join(ids[:_SHOWN])
    return shown + (f" and {len(ids) - _SHOWN} more" if len(ids) > _SHOWN else "")


class SubscriptionWatch:
    """A subscriptions source, re-read when its content changes (module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        #: the set the source last held when it parsed; None before the first good read
        self.wanted: dict[str, SequencePattern] | None = None
        self._digest: str | None = None  # of the content (or the error) last read

    def check(self) -> list[str]:
        """Re-read the source if it changed, applying nothing; the line saying why it
        cannot be used, if it cannot (none when it parses or nothing changed)."""
        return self._reread()

    def changes(self, engine: LiveSubscriptions) -> list[str]:
        """Re-read the source if it changed and bring ``engine`` to its subscriptions;
        one line per applied change set or refused edit (none when nothing changed)."""
        notes = self._reread()
        if self.wanted is None:
            return notes
        change = SubscriptionChange.between(engine.patterns, self.wanted)
        if change:
            position = engine.edges_seen
            change.apply(engine)
            counts, detail = change.describe()
            notes.append(f"subscriptions: {counts} ({self.path.name}, from stream position "
                         f"{position:,}): {detail}")
        return notes

    def _reread(self) -> list[str]:
        """Parse the source if its content is new; one line when it cannot be used."""
        texts, reason = self._read()
        digest = hashlib.sha256(repr(texts if reason is None else reason).encode()).hexdigest()
        if digest == self._digest:
            return []
        self._digest = digest
        if reason is None:
            try:
                subs = parse_subscription_texts(texts, self.path.stem)
            except QuerySyntaxError as err:
                reason = str(err).splitlines()[0]
            else:
                self.wanted = {s.id: s.pattern for s in subs.subscriptions}
                return []
        if self.wanted is None:  # never parsed since this start: a restart's checkpoint
            return [f"subscriptions: {reason}; resuming with the checkpoint's subscriptions "
                    "until it parses"]
        return [f"subscriptions: {reason}; keeping the {len(self.wanted):,} subscriptions "
                "in force"]

    def _read(self) -> tuple[list[tuple[str, str]], str | None]:
        """The source's ``(file, text)`` pairs, or why it cannot be read."""
        try:
            return read_subscriptions_source(self.path), None
        except OSError as err:
            return [], f"{self.path}: cannot be read ({err})"
