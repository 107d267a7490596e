"""The pattern tree (du Mouza, Rigaux, Scholl, SSDBM 2006, Section 4.2).

A spanning tree of the refinement relation over the subscribed patterns and the lubs
added to cluster them: each node's pattern strictly refines its parent's, so a
position where a node does not match is a position where none of its descendants does.
The root is the empty pattern (it matches everywhere; the paper draws it ``@x1``); its
children are the *top* nodes, searched at every position, and every other node is
tried only where its parent matched (:mod:`graphcep.engines.sequences.active`).

**Insertion** of ``P`` (the paper's INSERT):

1. *candidate parent*: from the root, descend to the most selective child that
   contains ``P`` (smallest filtering rate, then the prefix tie-break of
   :func:`~graphcep.patterns.sequences.more_selective`, then the older child) while there
   is one;
2. *lub selection*: among the candidate parent ``N``'s children ``N'``, those whose
   ``lub(P, N')`` is strictly contained in ``N``; the most selective lub ``L`` wins and the
   subtree ``L(P, N')`` replaces ``N'`` (when ``L`` is ``P`` itself, ``P`` becomes
   ``N'``'s parent); without one, ``P`` becomes a child of ``N``. A pattern already in the
   tree gets the subscription added to its node (the paper's special cases (i), (ii)).

**Removal** of the last subscription of a node ``X``: with two children or more ``X``
stays as a filter, tightened to the lub of its children; with one child, the child
takes its place (case 2); with none, ``X`` goes, and its parent, if it is a lub node,
is spliced out when one child is left (case 2) or tightened to the lub of the children
left (case 1).

Each change returns the nodes whose partial matches must be rebuilt from the recent
symbols of each key (their role or pattern changed); the engine does it.

Example (Figure 5: inserting ``b.a.c.a``)
-----------------------------------------
>>> from graphcep.patterns.sequences import mark, parse_items, show
>>> tree = PatternTree()
>>> for sid, text in enumerate(["@x.a", "b.@x.c", "b.c.c", "b.d.c.d"]):
...     _ = tree.insert(mark(parse_items(text)), str(sid))
>>> _ = tree.insert(mark(parse_items("b.a.c.a")), "P")
>>> print(tree.render())
ε
  @x1.a
  b.@x1.c
    b.c.c
    b.@x1.c.@x1
      b.d.c.d
      b.a.c.a
"""

from __future__ import annotations

from collections.abc import Iterator

from graphcep.engines.sequences.kmp_var import KmpVar
from graphcep.patterns.sequences import (
    Marked,
    contains,
    lub,
    lub_all,
    more_selective,
    selectivity,
    show,
    strictly_contains,
)


class Node:
    """A tree node: a marked pattern, its KMP_var automaton and the subscriptions on it."""

    __slots__ = ("nid", "pattern", "parent", "children", "ids", "kmp")

    def __init__(self, nid: int, pattern: Marked, parent: Node | None = None) -> None:
        self.nid = nid
        self.pattern = pattern
        self.parent = parent
        self.children: list[Node] = []
        self.ids: list[str] = []
        self.kmp = KmpVar(pattern) if pattern else None

    @property
    def m(self) -> int:
        return len(self.pattern)

    def is_top(self) -> bool:
        return self.parent is not None and self.parent.parent is None

    def __repr__(self) -> str:
        return f"Node({self.nid}, {show(self.pattern)!r}, ids={self.ids})"


class PatternTree:
    """The pattern tree (see the module docstring)."""

    def __init__(self) -> None:
        self.root = Node(0, ())
        self.nodes: dict[int, Node] = {0: self.root}
        self.by_pattern: dict[Marked, Node] = {(): self.root}
        self.subscriptions: dict[str, Node] = {}
        self._next = 1

    # -- insertion ----------------------------------------------------------------------

    def insert(self, pattern: Marked, sid: str) -> list[Node]:
        """Subscribe ``sid`` to ``pattern`` (marked, not empty); the nodes to rebuild."""
        if not pattern:
            raise ValueError("the empty pattern cannot be subscribed")
        if sid in self.subscriptions:
            raise ValueError(f"subscription {sid!r} exists already")
        node = self.by_pattern.get(pattern)
        if node is not None:
            node.ids.append(sid)
            self.subscriptions[sid] = node
            return []
        parent = self.candidate_parent(pattern)
        new = self._new(pattern)
        new.ids.append(sid)
        self.subscriptions[sid] = new
        chosen = self._choose_lub(pattern, parent)
        if chosen is None:
            self._attach(new, parent)
            return []
        sibling, common = chosen
        demoted = sibling.is_top()
        index = parent.children.index(sibling)
        top = new if common == pattern else self._new(common)  # P may contain N' itself
        parent.children[index] = top
        top.parent = parent
        self._attach(sibling, top)
        if top is not new:
            self._attach(new, top)
        rebuild = [sibling] if demoted else []
        if top is not new and top.is_top():
            rebuild.append(top)  # a new top filter catches up on the symbols its children hold
        return rebuild

    def candidate_parent(self, pattern: Marked) -> Node:
        """The deepest node reached by following the most selective containing child."""
        node = self.root
        while True:
            best = None
            for child in node.children:
                if contains(pattern, child.pattern) and (
                        best is None or more_selective(child.pattern, best.pattern)):
                    best = child
            if best is None:
                return node
            node = best

    def _choose_lub(self, pattern: Marked, parent: Node) -> tuple[Node, Marked] | None:
        """The child ``N'`` of ``parent`` whose lub with ``pattern`` is the most selective
        of those strictly below ``parent`` (lubs that name another node are passed over:
        one node per pattern)."""
        best: tuple[Node, Marked] | None = None
        for child in parent.children:
            common = lub(pattern, child.pattern)
            if not strictly_contains(common, parent.pattern) or (
                    common != pattern and common in self.by_pattern):
                continue
            if best is None or more_selective(common, best[1]):
                best = (child, common)
        return best

    # -- removal ------------------------------------------------------------------------

    def remove(self, sid: str) -> list[Node]:
        """Unsubscribe ``sid``; the nodes to rebuild."""
        node = self.subscriptions.pop(sid)
        node.ids.remove(sid)
        if node.ids:
            return []
        if len(node.children) >= 2:
            return self._tighten(node)
        if len(node.children) == 1:
            return [self._splice(node)]
        parent = node.parent
        assert parent is not None
        parent.children.remove(node)
        self._forget(node)
        if parent is self.root or parent.ids:
            return []
        if len(parent.children) == 1:
            return [self._splice(parent)]
        return self._tighten(parent)

    def _splice(self, node: Node) -> Node:
        """Replace ``node`` by its only child (case 2); the child, to rebuild."""
        (child,) = node.children
        parent = node.parent
        assert parent is not None
        parent.children[parent.children.index(node)] = child
        child.parent = parent
        self._forget(node)
        return child

    def _tighten(self, node: Node) -> list[Node]:
        """Give an unsubscribed node the lub of its children (case 1), if it is new."""
        tighter = lub_all(c.pattern for c in node.children)
        if tighter in self.by_pattern or not contains(tighter, node.pattern):
            return []
        del self.by_pattern[node.pattern]
        node.pattern = tighter
        node.kmp = KmpVar(tighter)
        self.by_pattern[tighter] = node
        return [node]

    # -- bookkeeping --------------------------------------------------------------------

    def _new(self, pattern: Marked) -> Node:
        node = Node(self._next, pattern)
        self._next += 1
        self.nodes[node.nid] = node
        self.by_pattern[pattern] = node
        return node

    def _attach(self, node: Node, parent: Node) -> None:
        node.parent = parent
        parent.children.append(node)

    def _forget(self, node: Node) -> None:
        del self.nodes[node.nid]
        del self.by_pattern[node.pattern]
        node.parent = None

    def walk(self) -> Iterator[tuple[int, Node]]:
        """``(depth, node)`` in depth-first order, the root at depth 0."""
        stack = [(0, self.root)]
        while stack:
            depth, node = stack.pop()
            yield depth, node
            stack.extend((depth + 1, c) for c in reversed(node.children))

    def render(self) -> str:
        """The tree as indented text, one node a line."""
        return "\n".join("  " * d + show(n.pattern) for d, n in self.walk())

    def stats(self) -> dict[str, float]:
        """Nodes, height and mean fan-out of inner nodes (Figure 6's measures)."""
        depths = [d for d, _ in self.walk()]
        inner = [len(n.children) for n in self.nodes.values() if n.children]
        return {"nodes": len(self.nodes) - 1, "height": max(depths),
                "fan_out": sum(inner) / len(inner) if inner else 0.0}

    def check(self) -> None:
        """Raise AssertionError unless the tree is sound: each child strictly refines its
        parent, links agree, every subscription is reachable, one node per pattern, and
        a node nobody subscribed to filters at least two children."""
        seen = set()
        for _, node in self.walk():
            seen.add(node.nid)
            assert self.by_pattern[node.pattern] is node, node
            for child in node.children:
                assert child.parent is node, child
                assert child.pattern != node.pattern and contains(child.pattern, node.pattern), \
                    (child, node)
            if node is not self.root and not node.ids:
                assert len(node.children) >= 2, node
        assert seen == set(self.nodes), "unreachable nodes"
        for sid, node in self.subscriptions.items():
            assert node.nid in seen and sid in node.ids, sid
        assert selectivity(()) == 0
