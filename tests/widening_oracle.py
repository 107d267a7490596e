"""Theorem 1 of progressive window widening as a check, for any detector: each instance
reported once, every report an instance of the whole stream, and every instance of at
most ``L`` records reported."""

from __future__ import annotations

from collections.abc import Callable, Hashable


def assert_theorem_1(found: list[Hashable], truth: set[Hashable],
                     within_l: Callable[[Hashable], bool]) -> None:
    """``found``: the reported instances (as comparable keys); ``truth``: the whole
    stream's instances, by an independent matcher; ``within_l``: whether an instance
    spans at most ``L`` records."""
    assert len(found) == len(set(found)), "an instance reported twice"
    assert set(found) <= truth, "an instance the whole-stream matcher does not find"
    assert {m for m in truth if within_l(m)} <= set(found), "an instance of at most L missed"
