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
