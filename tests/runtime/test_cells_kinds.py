"""Executor-mode cells for the kinds beyond SAL: ν-expressions keyed by the variable on
every link, subscriptions keyed by their key field; DDST patterns and the ν-expressions
without such a variable refused, saying why.

The cells' steps run here as Spark runs them (each micro-batch cut into tasks, routed,
packed, stepped per cell from its state, then the end-of-input flush: ``run_cells``), for
several cell counts, and their matches are compared with the kind's brute-force oracle
(tests/nu_oracle.py, tests/sequences_oracle.py, written from the papers' definitions)
over the on-time edges, and with the driver mode's operator over the same batches.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from graphcep.jobs.ddst import DDSTJob
from graphcep.jobs.nu import NuJob
from graphcep.jobs.sequences import SubscriptionJob
from graphcep.lang.ddst import parse_ddst
from graphcep.lang.nu import parse_nu
from graphcep.lang.sequences import parse_subscriptions
from graphcep.patterns.sequences import SubscriptionSet
from graphcep.patterns.subgraph import QueryError
from graphcep.runtime.cell_plans import KeyedCells, cell_plan, route
from graphcep.runtime.streaming.driver import StreamOperator
from tests.nu_oracle import Oracle
from tests.runtime.test_spark_cells import run_cells
from tests.runtime.test_streaming import arrival_batches, late_seqs
from tests.sequences_oracle import occurrences

S = 1_000_000
#: name -> (expression, links per match, the key variable and the link ends it is read at)
NU = {
    # X the source of the first link, the target of the second: two copies an edge
    "ping": ("<#X ~> #Y . Y ~> X . X ~> #Z>[0, 3]", 3, "X", ("src", "dst")),
    # X the source of every link: one copy
    "fan": ("<#X ~> #Y . X ~> #Z . X ~> b>[0, 2]", 3, "X", ("src",)),
    # a choice and a shuffle: Y is on every link (X is not), the target of the first
    "alt": ("<#X ~> #Y . (Y ~> X | Y ~> #Z % @ ~> Y)>[0, 2]", None, "Y", ("src", "dst")),
}


def links_table(seed: int, n: int = 70, nodes: str = "abcdef") -> pa.Table:
    """Random links with ties, self-loops and repeated links, numbered in stream order."""
    rng = random.Random(seed)
    rows, t = [], 0
    for _ in range(n):
        t += rng.choice([0, 0, S // 2, S, S])
        rows.append((t, rng.choice(nodes), rng.choice(nodes)))
    return pa.table({"t": [r[0] for r in rows], "src": [r[1] for r in rows],
                     "dst": [r[2] for r in rows], "dur": [0] * n, "seq": list(range(n))})


def out_of_order(table: pa.Table, seed: int) -> list[pa.Table]:
    """The table arriving out of order (some edges up to 3 s late), in five batches."""
    n = table.num_rows
    delays = [((i * 7919 + seed) % 4) * S for i in range(n)]
    return arrival_batches(table, delays, [n // 5, 2 * n // 5, 3 * n // 5, 4 * n // 5])


def nu_key(row: dict) -> tuple:
    return (row["first_t"], row["last_t"], tuple(sorted(row["bindings"])))


def nu_keys(tables: list[pa.Table]) -> list[tuple]:
    return [nu_key(r) for t in tables for r in t.to_pylist()]


def nu_oracle(text: str, size: int | None, links: list[tuple[int, str, str]]) -> set[tuple]:
    """The brute-force search-mode matches: each stretch of one span from a link's time,
    matches starting there (a bounded match lies within its span, and a search-mode match
    is decided by its own links)."""
    pattern = parse_nu(text, "p")
    span = int(pattern.span_us())
    oracle = Oracle(pattern)
    found: set[tuple] = set()
    for start in sorted({t for t, _, _ in links}):
        stretch = [link for link in links if start <= link[0] <= start + span]
        sizes = [size] if size is not None else range(1, 4)
        found |= {m for m in oracle.matches(stretch, sizes=sizes) if m[0] == start}
    return {(a, b, tuple(sorted(binds))) for a, b, binds in found}


def driver_matches(job, batches: list[pa.Table], lateness: int) -> list[pa.Table]:
    """The driver mode's operator over the same micro-batches, then its flush."""
    found: list[pa.Table] = []
    operator = StreamOperator(job, lateness_us=lateness, on_matches=lambda m, _: found.append(m))
    for batch_id, batch in enumerate(batches):
        operator.process(batch_id, batch)
    operator.flush()
    return found


@pytest.mark.parametrize("name, cells, engine", [
    *((name, cells, "auto") for name in sorted(NU) for cells in (1, 3, 8)),
    ("ping", 3, "interpreted")])
def test_nu_cells_match_like_the_oracle_and_the_driver(name, cells, engine):
    text, size, variable, ends = NU[name]
    job = NuJob(parse_nu(text, name), engine=engine)
    plan = cell_plan(job, cells)
    assert plan == KeyedCells(cells, ends, ("bindings", variable))
    found_any = False
    for seed in range(3):
        table = links_table(seed)
        batches = out_of_order(table, seed)
        found, late = run_cells(job, batches, cells, S, flush=True)
        assert late == late_seqs(batches, S)
        on_time = [(r["t"], r["src"], r["dst"]) for r in table.to_pylist()
                   if r["seq"] not in late]
        got = nu_keys(found)
        assert len(got) == len(set(got)), "a match was reported twice"
        assert set(got) == nu_oracle(text, size, on_time)
        assert sorted(got) == sorted(nu_keys(driver_matches(job, batches, S)))
        found_any |= bool(got)
    assert found_any, "the streams hold no match: the test would prove nothing"


def test_nu_keyed_routing_sends_each_edge_to_the_cells_of_its_key_ends():
    """Keyed by a variable read at both ends, an edge goes to its source's cell and its
    target's (once when they share one); keyed by a source, to its source's alone."""
    from graphcep.runtime.cell_plans import cell_of

    table = links_table(4)
    for name in NU:
        job = NuJob(parse_nu(NU[name][0], name))
        plan = cell_plan(job, 5)
        cells, rows, roles = route(table, job, plan)
        src, dst = cell_of(table["src"], 5), cell_of(table["dst"], 5)
        want = sorted({(int(c), i) for i in range(table.num_rows)
                       for c in ([src[i], dst[i]] if "dst" in plan.columns else [src[i]])})
        assert sorted(zip(cells.tolist(), rows.tolist(), strict=True)) == want
        assert (roles == -1).all()  # keyed: every edge may play any link


@pytest.mark.parametrize("text, key", [
    ("#X ~> a . (X ~> b)?", ("X", ("src",))),
    ("(#X ~> a)? . X ~> b", ("X", ("src",))),
    ("<#X ~> #Y % X ~> #Z>[0, 2]", ("X", ("src",))),
    ("a ~> #X . X ~> @ . (@ ~> X)*", ("X", ("src", "dst"))),
])
def test_nu_key_variables(text, key):
    split = NuJob(parse_nu(text, "p")).cell_split()
    assert (split.home[1], split.columns) == key


@pytest.mark.parametrize("text, why", [
    ("#X ~> a . b ~> #Y", "no variable is on every link"),
    ("(#X ~> #Y . X ~> Y)+", "may be allocated more than once"),
    ("#X ~> a . (X ~> b | #X ~> b)", "may be allocated more than once"),
    ("a ~> b", "no variable is on every link"),
])
def test_nu_without_a_key_variable_is_refused_saying_why(text, why):
    with pytest.raises(QueryError, match=why):
        NuJob(parse_nu(text, "p")).cell_split()


def test_an_anchored_nu_expression_is_refused():
    job = NuJob(parse_nu("#X ~> #Y . Y ~> X", "p"), mode="anchored")
    with pytest.raises(QueryError, match="anchored"):
        job.cell_split()


def test_a_second_allocation_would_break_the_split():
    """Why two allocations are refused: ``#X ~> a . #X ~> b`` binds X to two nodes (the
    oracle says so), and its match's links share none, so no cell keyed by X's node
    holds them both."""
    text = "#X ~> a . #X ~> b"
    with pytest.raises(QueryError, match="may be allocated more than once"):
        NuJob(parse_nu(text, "p")).cell_split()
    (match,) = Oracle(parse_nu(text, "p")).matches([(0, "u", "a"), (S, "v", "b")])
    assert match == (0, S, (("X", "u|v"),))


# -- subscriptions ---------------------------------------------------------------------

SUBS = "back: @x.@y.@x\nabc: a.@z.c\npair: @w.@w\n"


def keyed_table(seed: int, n: int = 120) -> pa.Table:
    rng = random.Random(seed)
    t = sorted(rng.randrange(0, 40) * S for _ in range(n))
    return pa.table({"t": t, "src": [rng.choice("hkmnpq") for _ in range(n)],
                     "dst": [rng.choice("abc") for _ in range(n)], "dur": [0] * n,
                     "seq": list(range(n))})


def subs_keys(tables: list[pa.Table]) -> list[tuple]:
    return [(r["subscription"], r["key"], r["start"], r["end"])
            for t in tables for r in t.to_pylist()]


def subs_oracle(subscriptions: SubscriptionSet, rows: list[dict],
                key: str = "src") -> set[tuple]:
    """Every occurrence in each key's sequence of the edges ``rows``, in stream order."""
    sequences: dict[str, list[str]] = {}
    for row in sorted(rows, key=lambda r: (r["t"], r["seq"])):
        sequences.setdefault(str(row[key]), []).append(row["dst"])
    return {(s.id, key, start, start + len(s.pattern) - 1)
            for s in subscriptions.subscriptions
            for key, seq in sequences.items()
            for start, _ in occurrences(s.pattern.items, seq)}


@pytest.mark.parametrize("cells", [1, 4, 7])
def test_subscription_cells_match_like_the_oracle_and_the_driver(cells):
    job = SubscriptionJob(parse_subscriptions(SUBS))
    assert cell_plan(job, cells) == KeyedCells(cells, ("src",), ("column", "key"))
    for seed in range(3):
        table = keyed_table(seed)
        batches = out_of_order(table, seed)
        found, late = run_cells(job, batches, cells, S, flush=True)
        assert late == late_seqs(batches, S)
        on_time = [r for r in table.to_pylist() if r["seq"] not in late]
        got = subs_keys(found)
        assert len(got) == len(set(got)), "a notification was reported twice"
        want = subs_oracle(job.subscriptions, on_time)
        assert want and set(got) == want
        assert sorted(got) == sorted(subs_keys(driver_matches(job, batches, S)))


def test_subscription_cells_keyed_by_an_attribute_carry_it():
    """``--key host``: the cells carry the column (an integer here) and route by it."""
    from graphcep.runtime.streaming.cells import cell_attributes

    job = SubscriptionJob(parse_subscriptions(SUBS), key="host")
    table = keyed_table(3)
    table = table.append_column("host", pa.array([(7, 8, 9)[i % 3] * (1 + (i % 5 == 0))
                                                  for i in range(table.num_rows)]))
    attrs = cell_attributes(job, table.schema)
    assert attrs.names == ["host"] and job.cell_split().fields == {"host"}
    batches = out_of_order(table, 3)
    found, late = run_cells(job, batches, 4, S, attrs=attrs, flush=True)
    on_time = [r for r in table.to_pylist() if r["seq"] not in late]
    got = subs_keys(found)
    want = subs_oracle(job.subscriptions, on_time, key="host")
    assert want and len(got) == len(set(got)) and set(got) == want


# -- DDST ------------------------------------------------------------------------------


def test_ddst_is_refused_and_its_components_span_key_nodes():
    """The refusal's reason, checked on the oracle: for ``A -> B`` (``A`` on every
    edge), ``a1 -> b`` and ``a2 -> b`` form one match component, holding two nodes that
    play ``A``; cells keyed by ``A``'s node would report two components instead."""
    from tests.ddst_oracle import reports

    query = parse_ddst("VERTICES A, B; EDGES x: A -> B; WITHIN 10 s")
    with pytest.raises(QueryError, match="match graph"):
        DDSTJob(query).cell_split()
    stream = [{"t": 0, "src": "a1", "dst": "b", "seq": 0},
              {"t": S, "src": "a2", "dst": "b", "seq": 1}]
    last = reports(query, stream)[-1]
    players = {v for q, v, *_ in last[1] if q == "A"}
    assert players == {"a1", "a2"}


def test_explain_says_how_each_kind_splits():
    from graphcep.runtime.hypercube import partitioning_lines

    ping = partitioning_lines(NuJob(parse_nu(NU["ping"][0], "ping")), (8,))
    assert ping[0].startswith("cells (graphcep stream --matching executors --cells N): "
                              "keyed by variable X")
    assert ping[1] == "  --cells 8: 8 cells, 1.88 copies per edge, busiest cell 0.234 of the stream"
    subs = partitioning_lines(SubscriptionJob(parse_subscriptions(SUBS)), (8,))
    assert "keyed by the key field 'src'" in subs[0]
    assert subs[1] == "  --cells 8: 8 cells, 1 copy per edge, busiest cell 0.125 of the stream"
    (ddst,) = partitioning_lines(DDSTJob(parse_ddst("VERTICES A, B; EDGES x: A -> B; "
                                                   "WITHIN 10 s")))
    assert ddst.startswith("cells (graphcep stream --cells N): none, ") and "match graph" in ddst
