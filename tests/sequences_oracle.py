"""A brute-force oracle for pattern subscriptions, written from Definitions 1-2 of du
Mouza, Rigaux, Scholl (SSDBM 2006): try every position, bind variables as they come."""

from __future__ import annotations


def occurrences(items, sequence):
    """``(start, bindings)`` of every position where ``items`` (constants as str, variables
    as ``("var", name)`` or any non-str) occur contiguously in ``sequence``."""
    found = []
    for start in range(len(sequence) - len(items) + 1):
        valuation = {}
        for item, symbol in zip(items, sequence[start:start + len(items)]):
            if isinstance(item, str):
                if item != symbol:
                    break
            elif valuation.setdefault(item, symbol) != symbol:
                break
        else:
            found.append((start, valuation))
    return found


def refines(p2, p1, alphabet):
    """Definition 3 by brute force over an alphabet large enough to hold a fresh symbol
    per variable: every valuation of ``p2`` has one of ``p1`` making it a prefix."""
    import itertools
    vars2 = sorted({i for i in p2 if not isinstance(i, str)}, key=repr)
    if len(p1) > len(p2):
        return False
    for values in itertools.product(alphabet, repeat=len(vars2)):
        nu = dict(zip(vars2, values))
        word = [i if isinstance(i, str) else nu[i] for i in p2]
        if not occurrences(p1, word[:len(p1)]) or occurrences(p1, word[:len(p1)])[0][0] != 0:
            return False
    return True
