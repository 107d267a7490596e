"""The token game of timed ν-automata over a link stream (the paper's Definitions 3-10).

A *token* is a location with clock values and a memory: each variable holds a set of
unknown nodes in read or write mode (Definition 3). Reading an event ``α`` through a
transition (Definition 7) allocates first (write mode), then checks -- a constant reads
only itself; a variable reads only unknown nodes (no constant of the pattern), in read
mode one it holds, in write mode a *fresh* one, held by no variable (injectivity,
Property 1) -- then releases. Time (Definition 6) is in integer microseconds: a clock is
the time its delay's first link was read, its value ``now - start``; a location's
invariant drops a token as soon as a link arrives too late for it. After every event the
token follows ε-transitions (the ε-closure of Definition 10 with delay 0), and tokens equal
in location, clocks and memory are one (the paper's deduplication).

A link ``(t, u, v)`` is the two events ``u`` then ``v`` at time ``t``, read together:
a token that reads ``u`` must read ``v`` next, and a token inside a half-read pattern link
cannot be left there. Links of equal ``t`` are read in stream order. A row whose ``dst``
is empty is one event on its own (a time-event sequence, :mod:`graphcep.io.tes`): bare
nodes of the pattern read such events, and a pattern link reads two in a row.

**Time.** ``<e>[x, y]`` holds when ``e``'s last event comes ``x`` to ``y`` after the
event read just before ``e`` by ``e``'s own part of the enclosing shuffles -- the time
before ``e``'s first event counts, as in timed regular expressions and the paper's Fig. 2
(its clock is reset by the event before the delay); a part that has read nothing since
its shuffle began counts from the event before the shuffle -- or, when the match has read
nothing before ``e``, after ``e``'s own first event (anchored: after time 0). So
``a ~> b . <c ~> d>[0, 2]`` is "``c ~> d`` within 2 s of ``a ~> b``", in
``(a ~> b . <c ~> d>[0, 2]) % P`` whatever ``P`` reads in between, and a delay around a
whole pattern bounds the pattern's span. (The automaton enforces the parts: an ε-move runs
at the time of the event the match read last, and a shuffle lets a part's clock ε-moves
run only where that event is the part's own; :mod:`graphcep.engines.nu.automaton`.)

**Search mode** (the default): a match may start at any link, and other links may come
between the links of a match, anywhere but inside a link (what users of the paper's tool
write as ``(@ ~> @)* % P``). Every link starts a new attempt; a token that has read links
keeps waiting for the next ones until an invariant drops it. No clock ever runs from the
stream's start or from a link the match does not hold. A match is reported when a token
reaches a final location, once per distinct ``(first time, last time, bindings)``; the
bindings are, per variable, the nodes it held at any point of the match (a variable
released and read again lists both); the links listed are one witness's (anchored, less
those it read as ``@ ~> @``: the interleaving of a search written by hand, see
``_witnessed``).

**Witnesses are shared.** A token's witness is a cell ``(link, the witness before it)``
(None: no link yet): reading a link adds one cell to the source token's witness, so the
tokens of one run share their earlier links instead of copying them, and the links held
are at most one cell per token made. A witness is made a list only when a match is
reported; cells no token holds any more are freed with the last token holding them.

**Anchored mode**: one attempt, from the stream's start at time 0 (the start of a ``.tes``
sequence), reading every event (nothing interleaves): the paper's semantics, for its
tool's test vectors; a delay that begins the pattern counts from time 0. A report says
that the stream up to the event just read is accepted (one per such prefix and bindings).

**Bounds.** Tokens inside a delay with an upper bound die when it passes; a pattern part
with no bound (``a ~> b . c ~> d``, or the paper's Fig. 6 memory-only automaton) keeps its
tokens for ever, so the engine stops with :class:`StateBoundError` once it holds
``max_tokens``, naming that part.

Example (the paper's Section 2 attack: two fresh hosts X and Y talk, then both link to
the target ``b`` within one second, in either order)
--------------------------------------------------------------------------------------
>>> import pyarrow as pa
>>> from graphcep.patterns.nu import Alloc, Concat, Const, Delay, Link, NuPattern, Shuffle, Var
>>> x, y, b = Var("X"), Var("Y"), Const("b")
>>> attack = Concat((Link(Alloc(("X",), x), Alloc(("Y",), y)),
...                  Delay(Shuffle((Link(x, b), Link(y, b))), 0, 1_000_000)))
>>> engine = NuEngine(NuPattern("attack", attack))
>>> links = pa.table({"t": [0, 500_000, 600_000, 900_000, 2_500_000],
...                   "src": ["a", "a", "x", "d", "d"], "dst": ["d", "b", "y", "b", "b"]})
>>> [(m["bindings"], m["first_t"], m["last_t"]) for m in engine.push(links).to_pylist()]
[([('X', 'a'), ('Y', 'd')], 0, 900000)]
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from graphcep.engines.base import MATCH_CHUNK_ROWS, EngineBase, StateBoundError, joined_chunks
from graphcep.engines.nu.automaton import Automaton, Transition, compile_pattern
from graphcep.events import MATCH_SCHEMA, empty_matches
from graphcep.hashing import salt64
from graphcep.patterns.nu import AnyNode, Const, NuPattern, Var

#: A variable's memory: the nodes it holds, and whether it is in write mode.
Memory = tuple[frozenset[str], bool]
_EMPTY: Memory = (frozenset(), False)
_ANY = object()  # index key of tokens that any node may advance
MODES = ("search", "anchored")

#: A link as a witness holds it: ``(t, src, dst, pattern link, seq)``.
WitnessLink = tuple[int, str, str, str, int]
#: A witness, shared between tokens: ``(its last link, the witness before it)``, None for
#: none (a persistent list: a token that reads a link adds one cell, copies nothing).
Witness = tuple | None


class Token(NamedTuple):
    """A token: where it is and what it holds (equal tokens are one). A named tuple, not
    a frozen dataclass: tokens are made and hashed by the hundred per link, and a tuple
    is built and hashed in C."""

    loc: int
    clocks: tuple[int | None, ...]  # per clock: its start (µs), None while not running
    memory: tuple[Memory, ...]  # per variable (the automaton's order)
    held: tuple[frozenset[str], ...]  # per variable: every node it held in this match
    first_t: int | None  # time of the first link read (None: none yet)
    last_t: int | None  # time of the last event read (anchored: 0 before any; the clock
    # of a delay entered next starts there)


class NuEngine(EngineBase):
    """Matches of one timed ν-expression over a link stream (see the module docstring).

    Parameters
    ----------
    pattern : NuPattern
        The expression.
    mode : str
        ``"search"`` (default) or ``"anchored"``.
    max_tokens : int
        State bound: holding more tokens raises :class:`StateBoundError`.
    """

    #: 2: the tokens' witnesses as one arena of shared links (:func:`witness_arena`)
    state_version = 2

    def __init__(self, pattern: NuPattern, *, mode: str = "search",
                 max_tokens: int = 200_000) -> None:
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.pattern = pattern
        self.mode = mode
        self.max_tokens = max_tokens
        self.automaton: Automaton = compile_pattern(pattern)
        self._setup()
        # token -> one witness: the links it read (a shared list, see Witness)
        self._tokens: dict[Token, Witness] = {}
        self._born: dict[Token, int] = {}  # token -> when it was stored (a fixed order)
        self._deadlines: list[tuple[float, int, Token]] = []
        self._now: int | None = None
        self._reported: set[tuple] = set()
        self._started = False  # anchored: the single attempt has begun

    def _setup(self) -> None:
        """Tables the game reads (rebuilt on restore)."""
        a = self.automaton
        self._out = a.outgoing()
        self._var = {name: i for i, name in enumerate(a.variables)}
        self._events = [[t for t in ts if t.label is not None] for ts in self._out]
        self._epsilons = [[t for t in ts if t.label is None] for ts in self._out]
        self._index: dict[object, set[Token]] = {}
        self._initial = Token(a.initial, (None,) * a.clocks, (_EMPTY,) * len(a.variables),
                              (frozenset(),) * len(a.variables), None,
                              0 if self.mode == "anchored" else None)
        # no clock runs before a link is read, so the start's ε-closure is the same for
        # every attempt
        self._invariants = [a.invariants.get(q, ()) for q in range(a.locations)]
        # only tokens at locations that read an event can read a link
        self._starts = [tk for tk in self._closure(self._initial, 0) if self._events[tk.loc]]
        self._stored = 0

    # -- protocol -------------------------------------------------------------------------

    def push(self, batch: pa.Table | pa.RecordBatch) -> pa.Table:
        """Read a batch of links in stream order; the matches they complete."""
        return joined_chunks(self.push_chunks(batch), empty_matches)

    def push_chunks(self, batch: pa.Table | pa.RecordBatch,
                    chunk_rows: int = MATCH_CHUNK_ROWS) -> Iterator[pa.Table]:
        """Read a batch of links in stream order (its order checked now); the matches
        they complete come from the iterator returned as the links are read, handed out
        once ``chunk_rows`` are found (between two links: a chunk holds at most
        ``chunk_rows`` plus one link's matches, which ``max_tokens`` bounds). Take every
        chunk before the next push."""
        accepted = self._accepted(batch)
        if accepted is None:
            return iter(())
        return self._read_all(*accepted, chunk_rows)

    def _read_all(self, batch: pa.Table, t: np.ndarray, seq: np.ndarray,
                  chunk_rows: int) -> Iterator[pa.Table]:
        rows: list[dict] = []
        read = 0
        for ti, u, v, si in zip(t.tolist(), batch.column("src").to_pylist(),
                                batch.column("dst").to_pylist(), seq.tolist(), strict=True):
            if v == "":
                self._read_event(ti, u, si, rows)
            else:
                self._read_link(ti, u, v, si, rows)
            read += 1
            if len(rows) >= chunk_rows:
                yield counted(self, read, rows)
                rows, read = [], 0
        if rows or read:
            found = counted(self, read, rows)
            if found.num_rows:
                yield found

    def advance(self, watermark_us: int) -> pa.Table:
        """No link before ``watermark_us`` will come: drop the tokens it makes too late."""
        self._watermark = max(self._watermark or watermark_us, int(watermark_us))
        self._expire(int(watermark_us))
        return empty_matches()

    def state_size(self) -> dict[str, int]:
        return {"tokens": len(self._tokens), "partial_matches": len(self._tokens),
                "edges": len({cell[0][-1] for cell in _cells(self._tokens.values())})}

    def describe(self) -> str:
        span = self.pattern.span_us()
        bound = ("tokens live at most the pattern's longest delay, "
                 f"{span / 1e6:g} s" if span != math.inf else
                 f"no delay bounds the pattern: at most {self.max_tokens:,} tokens")
        start = ("every link starts an attempt" if self.mode == "search"
                 else "one attempt from the first link")
        return (f"each link advances the tokens waiting for its source node (indexed by "
                f"the node they expect); {start}; {bound}")

    def state(self) -> dict:
        """The engine's state; the tokens' witnesses as one arena of shared links
        (:func:`witness_arena`: nested cells would pickle by recursion, one level a link)."""
        arena, at = witness_arena(self._tokens.values())
        return {"pattern": self.pattern, "mode": self.mode, "max_tokens": self.max_tokens,
                "tokens": dict(zip(self._tokens, at, strict=True)), "witnesses": arena,
                "now": self._now, "reported": self._reported, "started": self._started}

    @classmethod
    def from_state(cls, state: dict) -> NuEngine:
        engine = cls(state["pattern"], mode=state["mode"], max_tokens=state["max_tokens"])
        engine._now, engine._reported = state["now"], state["reported"]
        engine._started = state["started"]
        cells = witness_cells(state["witnesses"])
        for token, at in state["tokens"].items():
            engine._store(token, cells[at] if at >= 0 else None)
        return engine

    # -- one link -------------------------------------------------------------------------

    def _attempts(self, t: int, node: str) -> list[tuple[Token, Witness]]:
        """The tokens that may read ``node`` at ``t``: new attempts (every link in search
        mode, the first in anchored mode) and the stored tokens waiting for it."""
        if t != self._now:
            self._now = t
            self._reported.clear()
        self._expire(t)
        if self.mode == "search" or not self._started:
            self._started = True
            attempts = [(tk, None) for tk in self._starts]
        else:
            attempts = []
        return attempts + [(tk, self._tokens[tk]) for tk in self._candidates(node)]

    def _read_link(self, t: int, u: str, v: str, seq: int, rows: list[dict]) -> None:
        attempts = self._attempts(t, u)
        produced: dict[Token, Witness] = {}
        for token, witness in attempts:
            if len(produced) > self.max_tokens:
                self._refuse(len(produced))
            for after_u, label_u in self._read(token, u, t):
                for mid in self._closure(after_u, t):
                    if not self._events[mid.loc]:
                        continue
                    for after_v, label_v in self._read(mid, v, t):
                        for end in self._closure(after_v, t):
                            if end.loc not in self.automaton.middles:
                                produced.setdefault(end, self._witnessed(
                                    witness, (t, u, v, f"{label_u}~>{label_v}", seq)))
        self._settle(produced, t, seq, rows)

    def _read_event(self, t: int, node: str, seq: int, rows: list[dict]) -> None:
        """One event on its own (a row whose ``dst`` is empty: a time-event sequence):
        tokens may stop inside a pattern link, and must then read the next event."""
        inside = [tk for tk in self._tokens if tk.loc in self.automaton.middles]
        produced: dict[Token, Witness] = {}
        for token, witness in self._attempts(t, node):
            for after, label in self._read(token, node, t):
                for end in self._closure(after, t):
                    produced.setdefault(end, self._witnessed(
                        witness, (t, node, "", label, seq)))
        for token in inside:  # half a link read, and this event did not continue it
            self._drop(token)
        self._settle(produced, t, seq, rows)

    def _settle(self, produced: dict[Token, Witness], t: int, seq: int,
                rows: list[dict]) -> None:
        """Report the produced tokens in a final location; keep those that can go on."""
        if self.mode == "anchored":
            self._clear()
        for token, witness in produced.items():
            if token.loc in self.automaton.finals:
                self._report(token, witness, t, seq, rows)
            if token not in self._tokens and self._events[token.loc]:
                self._store(token, witness)
                if len(self._tokens) > self.max_tokens:
                    self._refuse()

    def _candidates(self, node: str) -> list[Token]:
        """The stored tokens ``node`` may advance (by the index), in a fixed order."""
        found = self._index.get(node, set()) | self._index.get(_ANY, set())
        return sorted(found, key=self._born.__getitem__)

    def _read(self, token: Token, node: str, now: int) -> Iterable[tuple[Token, str]]:
        """The tokens ``token`` becomes by reading the event ``node`` (Definitions 5-7)."""
        for tr in self._events[token.loc]:
            memory = self._allocated(token.memory, tr.alloc)
            read = self._read_memory(tr, memory, node)
            if read is None:
                continue
            memory, var = read
            held = token.held
            if var is not None:
                held = (*held[:var], held[var] | {node}, *held[var + 1:])
            memory = self._released(memory, tr.release)
            # a clock still pending here belongs to a delay the match begins with: it starts
            # at its first event
            clocks = tuple(now if c is None and i in tr.start else c
                           for i, c in enumerate(token.clocks))
            if tr.guard or tr.pend:  # automaton files: a guard on the event, clock resets
                if not _guarded(clocks, tr.guard, now):
                    continue
                clocks = tuple(now if i in tr.pend else c for i, c in enumerate(clocks))
            moved = Token(tr.target, clocks, memory, held,
                          now if token.first_t is None else token.first_t, now)
            if self._alive(moved, now):
                yield moved, tr.label.text()

    def _read_memory(self, tr: Transition, memory: tuple[Memory, ...],
                     node: str) -> tuple[tuple[Memory, ...], int | None] | None:
        """Definition 7's check and update of the memory for reading ``node`` (None: the
        transition is not enabled); the variable read, if any."""
        label = tr.label
        if isinstance(label, Const):
            return (memory, None) if node == label.name else None
        if isinstance(label, AnyNode):
            return memory, None
        assert isinstance(label, Var)
        if node in self.automaton.constants:
            return None  # a variable reads unknown nodes only (c.1.2)
        i = self._var[label.name]
        values, writing = memory[i]
        if writing:
            if any(node in held for held, _ in memory):
                return None  # not fresh (c.1.4)
        elif node not in values:
            return None  # read mode: a node it holds (c.1.3)
        return (*memory[:i], (values | {node}, False), *memory[i + 1:]), i

    def _allocated(self, memory: tuple[Memory, ...], names: frozenset[str]) -> tuple[Memory, ...]:
        if not names:
            return memory
        return tuple((values, True) if name in names else (values, writing)
                     for name, (values, writing) in zip(self.automaton.variables, memory,
                                                        strict=True))

    def _released(self, memory: tuple[Memory, ...], names: frozenset[str]) -> tuple[Memory, ...]:
        if not names:
            return memory
        return tuple(_EMPTY if name in names else m
                     for name, m in zip(self.automaton.variables, memory, strict=True))

    def _closure(self, token: Token, now: int) -> list[Token]:
        """``token`` and every token its ε-transitions lead to at time ``now``."""
        seen = {token}
        order = [token]
        todo = [token]
        while todo:
            current = todo.pop()
            for tr in self._epsilons[current.loc]:
                moved = self._epsilon(current, tr, now)
                if moved is not None and moved not in seen:
                    seen.add(moved)
                    order.append(moved)
                    todo.append(moved)
        return order

    def _epsilon(self, token: Token, tr: Transition, now: int) -> Token | None:
        clocks = token.clocks
        if not _guarded(clocks, tr.guard, now):
            return None
        if tr.pend or tr.stop:
            # a delay's clock runs from the event the match read last -- its own part's,
            # as the shuffle product allows (None before any: then from the delay's own
            # first event)
            clocks = tuple(token.last_t if i in tr.pend else None if i in tr.stop else c
                           for i, c in enumerate(clocks))
        memory = self._released(self._allocated(token.memory, tr.alloc), tr.release)
        moved = Token(tr.target, clocks, memory, token.held, token.first_t, token.last_t)
        return moved if self._alive(moved, now) else None

    def _alive(self, token: Token, now: int) -> bool:
        """Whether the invariants of the token's location hold at ``now``."""
        return not self._invariants[token.loc] or self._deadline(token) >= now

    def _deadline(self, token: Token) -> float:
        """The last time the token's location lets it live (``math.inf``: no bound)."""
        deadline = math.inf
        for clock, high in self._invariants[token.loc]:
            start = token.clocks[clock]
            if start is not None:
                deadline = min(deadline, start + high)
        return deadline

    # -- the stored tokens ----------------------------------------------------------------

    def _store(self, token: Token, witness: Witness) -> None:
        keys = self._keys(token)
        if not keys:
            return  # nothing can advance it
        self._tokens[token] = witness
        self._born[token] = self._stored
        self._stored += 1
        for key in keys:
            self._index.setdefault(key, set()).add(token)
        deadline = self._deadline(token)
        if deadline != math.inf:
            heapq.heappush(self._deadlines, (deadline, id(token), token))

    def _keys(self, token: Token) -> set[object]:
        """The nodes that may advance the token: the first events its location reads."""
        keys: set[object] = set()
        for tr in self._events[token.loc]:
            label = tr.label
            if isinstance(label, Const):
                keys.add(label.name)
            elif isinstance(label, AnyNode):
                return {_ANY}
            else:
                values, writing = self._allocated(token.memory, tr.alloc)[self._var[label.name]]
                if writing:
                    return {_ANY}
                keys |= values
        return keys

    def _drop(self, token: Token) -> None:
        if token not in self._tokens:  # (its witness may be None: no pop(token, None))
            return
        del self._tokens[token]
        del self._born[token]
        for key in self._keys(token):
            bucket = self._index.get(key)
            if bucket is not None:
                bucket.discard(token)
                if not bucket:
                    del self._index[key]

    def _expire(self, now: int) -> None:
        while self._deadlines and self._deadlines[0][0] < now:
            _, _, token = heapq.heappop(self._deadlines)
            self._drop(token)

    def _clear(self) -> None:
        self._tokens.clear()
        self._born.clear()
        self._index.clear()
        self._deadlines.clear()

    def _witnessed(self, witness: Witness, link: WitnessLink) -> Witness:
        """The witness with ``link`` read: one cell on the source's (shared, not copied).
        Anchored, a link read as ``@ ~> @`` (or an event read as ``@``) is left out: it is
        the interleaving of a search by hand, ``(@ ~> @)* % P``, and an anchored run
        reports every prefix it accepts: listing those links would make the reports of
        ``(@ ~> @)* % P`` the stream's every prefix, whole (output quadratic in the
        stream). A search-mode pattern reads ``@`` on purpose, and its witness keeps
        those links."""
        if self.mode == "anchored" and link[3] in ("@~>@", "@"):
            return witness
        return link, witness

    def _refuse(self, held: int | None = None, what: str = "tokens") -> None:
        part = self.pattern.unbounded_part()
        where = (f"the part {part.text()!r} has no time bound: wrap it in a delay "
                 "<...>[0, SECONDS] so that waiting tokens expire" if part is not None
                 else "the pattern's delays are wide for this stream")
        held = len(self._tokens) if held is None else held
        raise StateBoundError(f"pattern {self.pattern.name!r} holds {held:,} "
                              f"{what}, above max_tokens={self.max_tokens:,}: {where}; or "
                              "raise --max-tokens")

    # -- reports --------------------------------------------------------------------------

    def _report(self, token: Token, witness: Witness, now: int, seq: int,
                rows: list[dict]) -> None:
        bindings = tuple((name, "|".join(sorted(values)))
                         for name, values in zip(self.automaton.variables, token.held,
                                                 strict=True) if values)
        # search: one report per distinct (first time, last time, bindings); anchored: one
        # per accepted prefix of the stream (ending at the event just read) and bindings
        key = (seq, bindings) if self.mode == "anchored" else \
            (token.first_t, now, bindings)
        if key in self._reported:
            return
        self._reported.add(key)
        rows.append(match_row(self.pattern.name, token.first_t, now, bindings,
                              witness_links(witness)))


def witness_links(witness: Witness) -> list[WitnessLink]:
    """The links of a witness, in the order they were read."""
    links = []
    while witness is not None:
        link, witness = witness
        links.append(link)
    links.reverse()
    return links


def _cells(witnesses: Iterable[Witness]) -> Iterable[tuple]:
    """Every cell the witnesses hold, once each (a shared cell is walked once)."""
    seen: set[int] = set()
    for cell in witnesses:
        while cell is not None and id(cell) not in seen:
            seen.add(id(cell))
            yield cell
            cell = cell[1]


def witness_arena(witnesses: Iterable[Witness]) -> tuple[dict, list[int]]:
    """The witnesses as one arena, each shared link once, and each witness's place in
    it (-1: no link). The arena holds a link's time, seq and parent (its place, earlier in
    the arena; -1 for none) as int64 arrays, and its src, dst and pattern link as lists."""
    place: dict[int, int] = {}  # id of a cell -> its place (the cells are held meanwhile)
    links: list[WitnessLink] = []
    parents: list[int] = []
    at = []
    for witness in witnesses:
        path = []  # the cells not yet placed, last read first
        cell = witness
        while cell is not None and id(cell) not in place:
            path.append(cell)
            cell = cell[1]
        for cell in reversed(path):
            place[id(cell)] = len(links)
            links.append(cell[0])
            parents.append(-1 if cell[1] is None else place[id(cell[1])])
        at.append(-1 if witness is None else place[id(witness)])
    t, src, dst, var, seq = zip(*links, strict=True) if links else ((),) * 5
    arena = {"t": np.array(t, dtype=np.int64), "seq": np.array(seq, dtype=np.int64),
             "parent": np.array(parents, dtype=np.int64),
             "src": list(src), "dst": list(dst), "var": list(var)}
    return arena, at


def witness_cells(arena: dict) -> list[tuple]:
    """The cells of an arena (:func:`witness_arena`), by place."""
    cells: list[tuple] = []
    for t, u, v, var, seq, parent in zip(arena["t"].tolist(), arena["src"], arena["dst"],
                                         arena["var"], arena["seq"].tolist(),
                                         arena["parent"].tolist(), strict=True):
        cells.append(((t, u, v, var, seq), cells[parent] if parent >= 0 else None))
    return cells


def counted(engine: EngineBase, links: int, rows: list[dict]) -> pa.Table:
    """The match rows an engine found in a batch of ``links`` links, counted in its
    counters."""
    engine.edges_seen += links
    engine.matches_found += len(rows)
    return pa.Table.from_pylist(rows, schema=MATCH_SCHEMA) if rows else \
        empty_matches()


def match_row(name: str, first_t: int, last_t: int, bindings: tuple[tuple[str, str], ...],
              witness: Iterable[WitnessLink]) -> dict:
    """A match record: its id is a hash of the pattern's name, first and last time and
    bindings (so a run, a rerun and a restored run give the same ids); ``witness`` holds
    ``(t, src, dst, pattern link, seq)`` of the links one run read."""
    edges = [{"var": var, "t": t, "src": u, "dst": v, "dur": 0, "seq": seq}
             for t, u, v, var, seq in witness]
    return {"query": name, "match_id": match_id(name, first_t, last_t, bindings),
            "first_t": first_t, "last_t": last_t, "bindings": list(bindings), "edges": edges}


def match_id(name: str, first_t: int, last_t: int,
             bindings: tuple[tuple[str, str], ...]) -> str:
    """A match's id: a hash of the pattern's name, first and last time and bindings."""
    return f"{int(salt64(f'{name}|{first_t}|{last_t}|{bindings!r}')):016x}"


def _guarded(clocks: tuple[int | None, ...], guard: tuple[tuple[int, int, int | None], ...],
             now: int) -> bool:
    """Whether every ``(clock, low, high)`` of ``guard`` holds at ``now`` (a clock not
    running reads 0)."""
    for clock, low, high in guard:
        start = clocks[clock]
        value = 0 if start is None else now - start
        if value < low or (high is not None and value > high):
            return False
    return True
