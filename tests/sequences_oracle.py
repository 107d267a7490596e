"""Brute-force oracles for pattern subscriptions, written from the definitions of du
Mouza, Rigaux, Scholl (SSDBM 2006), not from graphcep's code: Definitions 1-2 (try every
position, bind variables as they come) and Definition 3 (refinement, over valuations)."""

from __future__ import annotations

import itertools


def occurrences(items, sequence):
    """``(start, valuation)`` of every position where ``items`` (constants ``str``, any
    other value a variable) occur contiguously in ``sequence``."""
    found = []
    for start in range(len(sequence) - len(items) + 1):
        valuation = {}
        for item, symbol in zip(items, sequence[start:start + len(items)], strict=True):
            if isinstance(item, str):
                if item != symbol:
                    break
            elif valuation.setdefault(item, symbol) != symbol:
                break
        else:
            found.append((start, valuation))
    return found


def refines(p2, p1):
    """Definition 3: for every valuation of ``p2`` (over its constants plus one fresh
    symbol per variable), ``p1`` matches a prefix of the valued ``p2``."""
    if len(p1) > len(p2):
        return False
    variables = sorted({i for i in p2 if not isinstance(i, str)}, key=repr)
    alphabet = sorted({i for i in (*p1, *p2) if isinstance(i, str)}) + \
        [f"fresh{k}" for k in range(len(variables))]
    for values in itertools.product(alphabet, repeat=len(variables)):
        nu = dict(zip(variables, values, strict=True))
        word = [i if isinstance(i, str) else nu[i] for i in p2]
        if not occurrences(p1, word[:len(p1)]):
            return False
    return True


def expected_notifications(added, sequences):
    """``(id, key, start)`` of the occurrences each subscription must report: per key
    sequence of ``(symbol, arrival)``, each occurrence of the subscription's pattern
    (``added[id] = (pattern, added_at, removed_at)``, arrival numbers, ``removed_at``
    None while subscribed) whose first edge arrived at or after the add and whose last
    edge arrived before the remove."""
    expected = set()
    for sid, (pattern, added_at, removed_at) in added.items():
        for key, seq in sequences.items():
            for start, _ in occurrences(pattern.items, [s for s, _ in seq]):
                first, last = seq[start][1], seq[start + len(pattern) - 1][1]
                if first >= added_at and (removed_at is None or last < removed_at):
                    expected.add((sid, key, start))
    return expected
