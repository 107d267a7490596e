"""Streaming features against brute-force oracles written here, batch by batch.

Every oracle recomputes a position's value from scratch out of the raw stream, so it shares
no code (and no cleverness) with the features. Batch independence is checked by feeding the
same stream cut in several random ways and requiring identical answers.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphcep.features import (
    CountDistinct,
    ExponentialHistogram,
    FeatureDefinitionError,
    FeatureInputError,
    FeatureStateError,
    NumericFeature,
    SetFeature,
    SlidingStat,
    TopK,
    make_feature,
    top_k_values,
)
from graphcep.patterns.program import FeatureDef

# ------------------------------------------------------------------------- helpers


def cuts_strategy(n: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, n), max_size=6).map(lambda c: sorted({0, n, *c}))


def random_cuts(rng: np.random.Generator, n: int, pieces: int) -> list[int]:
    inner = rng.integers(0, n + 1, size=pieces - 1) if pieces > 1 else []
    return sorted({0, n, *np.asarray(inner).tolist()})


def feed_topk(top: TopK, values: np.ndarray, cuts: list[int], verts: list) -> np.ndarray:
    """Membership of every vertex at every position, asked right after each batch."""
    rows = []
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
        top.update(values[lo:hi])
        pos = np.repeat(np.arange(lo, hi), len(verts))
        vs = np.array(verts * (hi - lo), dtype=object)
        rows.append(top.membership(vs, pos).reshape(hi - lo, len(verts)))
    return np.concatenate(rows) if rows else np.zeros((0, len(verts)), dtype=bool)


def feed_numeric(
    feat: NumericFeature, values: np.ndarray, keys: np.ndarray | None, cuts: list[int], qkeys
) -> np.ndarray:
    """Value of every query key at every position, asked right after each batch."""
    rows = []
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
        feat.update(values[lo:hi], None if keys is None else keys[lo:hi])
        pos = np.repeat(np.arange(lo, hi), len(qkeys))
        ks = None if keys is None else np.array(list(qkeys) * (hi - lo), dtype=object)
        rows.append(feat.values_at(ks, pos).reshape(hi - lo, len(qkeys)))
    return np.concatenate(rows)


# --------------------------------------------------------------------------- oracles


def oracle_topk(values: list, n: int, b: int, k: int, p: int) -> set:
    """The set at position p: refreshed after the last complete basic window."""
    done = (p + 1) // b * b  # items in complete basic windows so far
    if done == 0:
        return set()
    counts = Counter(values[max(0, done - n) : done])
    ranked = sorted(counts.items(), key=lambda vc: (-vc[1], vc[0]))
    return {v for v, _ in ranked[:k]}


def key_window(values, keys, key, p: int, n: int) -> list:
    """The last n values of key up to and including position p (keys None: whole stream)."""
    mine = [v for i, v in enumerate(values[: p + 1]) if keys is None or keys[i] == key]
    return mine[-n:]


def oracle_stat(window: list, stat: str) -> float:
    if not window:
        return float("nan")
    arr = np.array(window, dtype=np.float64)
    return {"sum": arr.sum(), "mean": arr.mean(), "var": arr.var()}[stat]


# ------------------------------------------------------------------------------ topk


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    values=st.lists(st.integers(0, 6), min_size=0, max_size=60),
    b=st.integers(1, 4),
    m=st.integers(1, 4),
    k=st.integers(1, 4),
)
def test_topk_matches_brute_force_for_any_batching(data, values, b, m, k):
    n = b * m
    vals = np.array([f"v{x}" for x in values], dtype=object)
    verts = [f"v{x}" for x in range(8)]
    expected = np.array(
        [[v in oracle_topk(list(vals), n, b, k, p) for v in verts] for p in range(len(vals))],
        dtype=bool,
    ).reshape(len(vals), len(verts))
    for _ in range(2):
        cuts = data.draw(cuts_strategy(len(vals)))
        got = feed_topk(TopK("DestIp", n, b, k, name="T"), vals, cuts, verts)
        assert np.array_equal(got, expected), cuts


def test_topk_integer_values_large_stream_and_unsorted_queries():
    rng = np.random.default_rng(1)
    vals = rng.zipf(1.5, size=3000) % 50
    n, b, k = 200, 40, 5
    top = TopK("DestPort", n, b, k)
    top.update(vals[:1700])
    top.update(vals[1700:])
    pos = rng.permutation(np.arange(1700, 3000))
    verts = rng.integers(0, 50, size=len(pos))
    got = top.membership(verts, pos)
    want = [
        int(v) in oracle_topk(vals.tolist(), n, b, k, int(p))
        for v, p in zip(verts, pos, strict=True)
    ]
    assert got.tolist() == want
    # Vertices of another type are simply not members.
    assert not top.membership(np.array(["3"], dtype=object), np.array([2999])).any()


def test_topk_history_window_and_given_positions():
    top = TopK("f", 4, 2, 1, name="Top1")
    top.update(np.array(["a", "b", "a"], dtype=object), positions=np.array([10, 20, 30]))
    assert top.membership(np.array(["a", "a"], dtype=object), np.array([15, 25])).tolist() == [
        False,
        True,
    ]
    top.update(np.array(["b", "b", "b"], dtype=object), positions=np.array([40, 50, 60]))
    # The set in force at the batch start began at 20; earlier history is gone.
    assert top.membership(np.array(["a"], dtype=object), np.array([20])).tolist() == [True]
    with pytest.raises(FeatureStateError, match="older than the history kept"):
        top.membership(np.array(["a"], dtype=object), np.array([19]))
    # After item 40 the window is a b a b (tie: a); beyond the stream, the current set.
    got = top.membership(np.array(["a", "b", "b"], dtype=object), np.array([45, 60, 99]))
    assert got.tolist() == [True, True, True]
    with pytest.raises(FeatureInputError, match="strictly increase"):
        top.update(np.array(["a"], dtype=object), positions=np.array([60]))


def test_top_k_values_tie_break_is_value_ascending():
    vals = np.array(["z", "y", "x", "x", "w", "w"], dtype=object)
    assert sorted(top_k_values(vals, 3)) == ["w", "x", "y"]
    assert sorted(top_k_values(vals, 10)) == ["w", "x", "y", "z"]


def test_topk_definition_errors():
    with pytest.raises(FeatureDefinitionError, match="does not divide the window 10"):
        TopK("f", 10, 3, 2)
    with pytest.raises(FeatureDefinitionError, match="positive integer"):
        TopK("f", 10, 0, 2)
    with pytest.raises(FeatureInputError, match="nulls"):
        TopK("f", 4, 2, 1).update(np.array(["a", None], dtype=object))


# ------------------------------------------------------------- exact window statistics


@pytest.mark.parametrize("stat", ["sum", "mean", "var"])
@pytest.mark.parametrize("integers", [True, False])
def test_exact_stats_per_key_match_brute_force_for_any_batching(stat, integers):
    rng = np.random.default_rng(7)
    size, window = 400, 5
    keys = rng.choice(
        np.array(["a", "b", "c", "d"], dtype=object), size=size, p=[0.55, 0.3, 0.1, 0.05]
    )
    if integers:
        values = rng.integers(-50, 1000, size=size)
    else:
        values = rng.normal(1e6, 3.0, size=size)  # far from 0: variance must not cancel
    qkeys = ["a", "b", "c", "d", "never"]
    expected = np.array(
        [
            [oracle_stat(key_window(values, keys, q, p, window), stat) for q in qkeys]
            for p in range(size)
        ]
    )
    results = []
    for pieces in (1, 3, 17, 400):
        feat = SlidingStat(stat, "bytes", window, key_fields=("DestIp",), name="S")
        cuts = random_cuts(rng, size, pieces)
        results.append(feed_numeric(feat, values, keys, cuts, qkeys))
    for got in results:
        assert np.array_equal(got, results[0], equal_nan=True)  # bit-identical
    if integers and stat == "sum":
        assert np.array_equal(results[0], expected, equal_nan=True)
    else:
        np.testing.assert_allclose(results[0], expected, rtol=1e-9, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    values=st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=50),
    window=st.integers(1, 7),
    stat=st.sampled_from(["sum", "mean", "var"]),
)
def test_exact_unkeyed_stats_hypothesis(data, values, window, stat):
    vals = np.array(values)
    expected = np.array(
        [oracle_stat(key_window(vals, None, None, p, window), stat) for p in range(len(vals))]
    )
    outs = []
    for _ in range(2):
        feat = SlidingStat(stat, "x", window)
        outs.append(
            feed_numeric(feat, vals, None, data.draw(cuts_strategy(len(vals))), [None])[:, 0]
        )
    assert np.array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0], expected, rtol=1e-9, atol=1e-6)


def test_exact_stats_long_stream_keeps_precision():
    # Many blocks per key: the blocked prefix sums must not drift as the stream goes on.
    rng = np.random.default_rng(3)
    vals = rng.uniform(0, 1e9, size=200_000)
    feat = SlidingStat("sum", "x", 1000)
    feat.update(vals)
    got = feat.last_values()
    idx = np.arange(999, len(vals), 997)
    want = np.array([vals[i - 999 : i + 1].sum() for i in idx])
    np.testing.assert_allclose(got[idx], want, rtol=1e-12)


def test_values_at_positions_between_items_and_stale_history():
    feat = SlidingStat("sum", "x", 2, key_fields=("k",), name="Sums")
    feat.update(np.array([1, 2]), keys=np.array(["a", "b"], dtype=object), positions=[10, 20])
    feat.update(np.array([4, 8]), keys=np.array(["a", "a"], dtype=object), positions=[30, 40])
    ks = np.array(["a", "a", "a", "b", "a"], dtype=object)
    got = feat.values_at(ks, np.array([20, 29, 35, 35, 100]))
    assert got.tolist() == [1.0, 1.0, 5.0, 2.0, 12.0]
    with pytest.raises(FeatureStateError, match="older than the history kept"):
        feat.values_at(np.array(["a"], dtype=object), np.array([19]))
    with pytest.raises(FeatureInputError, match="pass keys"):
        feat.update(np.array([1]))


def test_multi_field_keys_and_arrow_input():
    feat = SlidingStat("mean", "x", 3, key_fields=("src", "dst"))
    src = pa.array(["a", "a", "b", "a"])
    dst = pa.array(["x", "y", "x", "x"])
    feat.update(pa.array([1.0, 2.0, 3.0, 5.0]), keys=(src, dst))
    got = feat.values_at(
        (np.array(["a", "b", "a"], dtype=object), np.array(["x", "x", "z"], dtype=object)),
        [3, 3, 3],
    )
    assert got[:2].tolist() == [3.0, 3.0] and np.isnan(got[2])


def test_integer_then_fractional_values_are_refused():
    feat = SlidingStat("sum", "x", 3)
    feat.update(np.array([1, 2]))
    feat.update(np.array([3.0]))  # integral floats are fine
    with pytest.raises(FeatureInputError, match="fractional"):
        feat.update(np.array([0.5]))
    with pytest.raises(FeatureInputError, match="finite|nulls"):
        SlidingStat("sum", "x", 3).update(np.array([1.0, np.nan]))


# ----------------------------------------------------------- exponential histograms


@pytest.mark.parametrize("epsilon", [0.01, 0.1, 0.5])
def test_exponential_histogram_within_epsilon(epsilon):
    rng = np.random.default_rng(11)
    window = 500
    # Heavy tail plus runs of zeros: the hard cases for a bucket straddling the edge.
    vals = np.concatenate([rng.pareto(1.2, 3000) * 100, np.zeros(300), rng.integers(0, 5, 1500)])
    eh = ExponentialHistogram(window, epsilon)
    worst = 0.0
    for i, x in enumerate(vals.tolist()):
        eh.update(x)
        true = vals[max(0, i + 1 - window) : i + 1].sum()
        err = abs(eh.estimate() - true)
        assert err <= epsilon * true + 1e-6 * max(1.0, true)
        worst = max(worst, err / true if true else 0.0)
    assert len(eh) < window  # it actually compresses
    if epsilon >= 0.1:
        assert len(eh) < window / 4


@pytest.mark.parametrize("stat", ["sum", "mean", "var"])
def test_eh_mode_keyed_error_bounds(stat):
    rng = np.random.default_rng(5)
    size, window, eps = 3000, 200, 0.05
    keys = rng.choice(np.array(["a", "b", "c"], dtype=object), size=size)
    vals = rng.integers(0, 10_000, size=size)
    feat = SlidingStat(stat, "bytes", window, key_fields=("k",), mode="eh", epsilon=eps)
    cuts = random_cuts(rng, size, 7)
    got = feed_numeric(feat, vals, keys, cuts, ["a", "b", "c"])
    for p in range(0, size, 13):
        for j, q in enumerate("abc"):
            win = key_window(vals, keys, q, p, window)
            if not win:
                assert np.isnan(got[p, j])
                continue
            true = oracle_stat(win, stat)
            if stat == "var":
                bound = (3 * eps + eps**2) * np.mean(np.square(np.array(win, dtype=float)))
            else:
                bound = eps * true
            assert abs(got[p, j] - true) <= bound + 1e-9, (p, q)


def test_eh_mode_refuses_negative_values():
    feat = SlidingStat("sum", "x", 10, mode="eh")
    with pytest.raises(FeatureInputError, match="non-negative"):
        feat.update(np.array([1, -1]))


# ------------------------------------------------------------------ count-distinct


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    items=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 5)), min_size=1, max_size=60),
    window=st.integers(1, 6),
    keyed=st.booleans(),
)
def test_countdistinct_matches_brute_force(data, items, window, keyed):
    keys = np.array([f"k{k}" for k, _ in items], dtype=object) if keyed else None
    vals = np.array([f"p{v}" for _, v in items], dtype=object)
    qkeys = ["k0", "k1", "k2", "k9"] if keyed else [None]
    expected = np.array(
        [
            [
                float(len(set(w))) if (w := key_window(vals, keys, q, p, window)) else np.nan
                for q in qkeys
            ]
            for p in range(len(vals))
        ]
    )
    for _ in range(2):
        feat = CountDistinct("DestPort", window, key_fields=("SrcIp",) if keyed else ())
        got = feed_numeric(feat, vals, keys, data.draw(cuts_strategy(len(vals))), qkeys)
        assert np.array_equal(got, expected, equal_nan=True)


def test_countdistinct_recycles_value_ids_and_big_keyed_stream():
    rng = np.random.default_rng(2)
    size, window = 20_000, 50
    keys = rng.integers(0, 300, size=size)
    vals = rng.integers(0, 100_000, size=size)  # mostly fresh values: ids must be recycled
    feat = CountDistinct("port", window, key_fields=("src",))
    for lo in range(0, size, 3000):
        feat.update(vals[lo : lo + 3000], keys=keys[lo : lo + 3000])
    assert feat.distinct_values_held <= 300 * window
    for key in (0, 17, 299):
        want = len(set(vals[keys == key][-window:].tolist()))
        assert feat.values_at(np.array([key]), np.array([size - 1]))[0] == want


# --------------------------------------------------------------------- bounds, api


def test_max_keys_bound_gives_clear_error_and_keeps_state():
    feat = SlidingStat("sum", "x", 4, key_fields=("k",), name="Sums", max_keys=3)
    feat.update(np.array([1, 2, 3]), keys=np.array(["a", "b", "c"], dtype=object))
    with pytest.raises(
        FeatureStateError,
        match=r"feature Sums holds 4 keys, above max_keys=3; raise it with make_feature\(\.\.\., max_keys=N\)",
    ):
        feat.update(np.array([1, 1]), keys=np.array(["a", "d"], dtype=object))
    feat.update(np.array([10]), keys=np.array(["a"], dtype=object))  # unchanged by the refusal
    assert feat.values_at(np.array(["a"], dtype=object), [3]).tolist() == [11.0]
    cd = CountDistinct("f", 4, key_fields=("k",), name="CD", max_keys=1)
    with pytest.raises(FeatureStateError, match="feature CD holds 2 keys, above max_keys=1"):
        cd.update(np.array([1, 2]), keys=np.array([1, 2]))
    top = TopK("f", 4, 2, 1, name="Top1000", max_keys=2)
    with pytest.raises(FeatureStateError, match="feature Top1000 holds 4 keys, above max_keys=2"):
        top.update(np.array(["a", "b", "c", "d"], dtype=object))


def test_make_feature_from_definitions():
    top = make_feature(FeatureDef("Top1000", "Netflows", "topk", "DestIp", (100000, 10000, 10000)))
    assert isinstance(top, TopK) and isinstance(top, SetFeature)
    assert (top.name, top.field, top.k) == ("Top1000", "DestIp", 10000)
    for op, stat in (("ehsum", "sum"), ("ehave", "mean"), ("ehvar", "var")):
        f = make_feature(FeatureDef("S", "VertsByDest", op, "SrcTotalBytes", (1000,)), ("DestIp",))
        assert isinstance(f, SlidingStat) and isinstance(f, NumericFeature)
        assert (f.stat, f.window, f.key_fields) == (stat, 1000, ("DestIp",))
    eh = make_feature(FeatureDef("S", "N", "ehsum", "b", (10,)), mode="eh", epsilon=0.1)
    assert eh.mode == "eh" and eh.epsilon == 0.1
    cd = make_feature(FeatureDef("C", "N", "countdistinct", "DestPort", (10,)), max_keys=5)
    assert isinstance(cd, CountDistinct) and cd.max_keys == 5
    with pytest.raises(FeatureDefinitionError, match="unknown operator"):
        make_feature(FeatureDef("X", "N", "median", "b", (10,)))
    with pytest.raises(FeatureDefinitionError, match="takes a field and 3"):
        make_feature(FeatureDef("X", "N", "topk", "b", (10, 5)))
    with pytest.raises(FeatureDefinitionError, match="keyed stream"):
        make_feature(FeatureDef("X", "V", "topk", "b", (10, 5, 2)), ("DestIp",))
    with pytest.raises(FeatureDefinitionError, match="does not divide"):
        make_feature(FeatureDef("X", "N", "topk", "b", (10, 4, 2)))


@pytest.mark.parametrize(
    "make",
    [
        lambda: TopK("f", 6, 2, 2),
        lambda: SlidingStat("var", "f", 5, key_fields=("k",)),
        lambda: SlidingStat("mean", "f", 5, key_fields=("k",), mode="eh"),
        lambda: CountDistinct("f", 5, key_fields=("k",)),
    ],
)
def test_snapshot_restore_continues_identically(make):
    rng = np.random.default_rng(4)
    vals = rng.integers(0, 6, size=300)
    keys = rng.integers(0, 4, size=300)
    is_top = isinstance(make(), TopK)

    def run(feat, lo, hi):
        if is_top:
            feat.update(vals[lo:hi].astype(object))
            return feat.membership(vals[lo:hi].astype(object), np.arange(lo, hi))
        feat.update(vals[lo:hi], keys=keys[lo:hi])
        return feat.values_at(keys[lo:hi], np.arange(lo, hi))

    whole = make()
    run(whole, 0, 150)
    want = run(whole, 150, 300)
    first = make()
    run(first, 0, 150)
    again = type(first).restore(first.snapshot())
    assert np.array_equal(run(again, 150, 300), want, equal_nan=True)
